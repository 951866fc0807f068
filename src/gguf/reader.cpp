// GGUF reader (spec/quant-formats.md §1): header, metadata, tensor infos, then the layout of
// the data section. Everything the file says is checked before it is used; errors read
// "gguf: FILE: ITEM: what (expected X, got Y)" where ITEM is the header, a key or a tensor.
// Unlike ggml, any aligned, in-bounds, non-overlapping tensor layout is accepted (§1.8), and
// nested arrays are read up to kMaxArrayDepth.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "cursor.h"
#include "layout.h"
#include "strata/common/mapped_file.h"
#include "strata/gguf/gguf.h"

namespace strata::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxString = uint64_t{1} << 30;      // ggml's cap: 1 GiB
constexpr uint64_t kMaxArrayCount = uint64_t{1} << 30;  // ggml's cap: 2^30 elements
constexpr uint64_t kMaxCount = static_cast<uint64_t>(INT64_MAX);
// Smallest encodings, used to reject counts the remaining bytes cannot possibly hold before
// reserving memory for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // empty-key string + type + u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name + n_dims 0 + type + offset

uint64_t encoded_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: return 8;  // the length prefix
    case ValueType::Array: return 12;  // element type + count
  }
  return 1;
}

}  // namespace

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, std::string name, uint32_t shard)
      : bytes_(bytes), cur_(bytes.data(), bytes.size()), name_(std::move(name)), shard_(shard) {}

  Status run(File* out) {
    out->path_ = name_;
    out->data_ = bytes_.data();
    out->size_ = bytes_.size();
    out->metadata_.set_source(name_);
    STRATA_TRY(read_header(out));
    STRATA_TRY(read_kvs(out));
    STRATA_TRY(read_alignment(out));
    STRATA_TRY(read_tensor_infos(out));
    STRATA_TRY(place_data(out));
    return check_overlaps(*out);
  }

 private:
  Status fail(std::string_view item, std::string_view what) const {
    return Status::error(fmt::format("gguf: {}: {}: {}", name_, item, what));
  }
  Status truncated(std::string_view item, std::string_view what, uint64_t need) const {
    return fail(item, fmt::format("truncated {}: need {} bytes at offset {}, {} left", what, need, cur_.pos(),
                                  cur_.remaining()));
  }
  template <class T>
  Status read(std::string_view item, std::string_view what, T* out) {
    if (!cur_.read(out)) return truncated(item, what, sizeof(T));
    return Status::ok_status();
  }

  Status read_header(File* out);
  Status read_string(std::string_view item, std::string_view what, std::string* out);
  Status read_value(std::string_view item, ValueType type, int depth, Value* out);
  Status read_array(std::string_view item, int depth, Value* out);
  Status read_kvs(File* out);
  Status read_alignment(File* out);
  Status read_tensor_infos(File* out);
  Status read_tensor_info(uint64_t index, File* out);
  Status place_data(File* out);
  Status check_overlaps(const File& file) const;

  std::span<const uint8_t> bytes_;
  detail::Cursor cur_;
  std::string name_;
  uint32_t shard_;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
};

Status Parser::read_header(File* out) {
  uint32_t magic = 0, version = 0;
  STRATA_TRY(read("header", "magic", &magic));
  if (magic != kMagic) {
    return fail("header", fmt::format("bad magic 0x{:08x} (expected 0x{:08x}, \"GGUF\")", magic, kMagic));
  }
  STRATA_TRY(read("header", "version", &version));
  if (version == 0) return fail("header", "version 0 is invalid (expected 2 or 3)");
  if ((version & 0xffff) == 0) {
    // v3 written big-endian reads as 0x03000000: say so rather than "unsupported version".
    return fail("header", fmt::format("version 0x{:08x} has its low 16 bits zero: the file looks big-endian "
                                      "(other byte order), which is not supported (expected 2 or 3)",
                                      version));
  }
  if (version == 1) return fail("header", "version 1 is obsolete and not supported (expected 2 or 3)");
  if (version > 3) return fail("header", fmt::format("unsupported version {} (expected 2 or 3)", version));
  out->version_ = version;
  STRATA_TRY(read("header", "tensor count", &tensor_count_));
  STRATA_TRY(read("header", "kv count", &kv_count_));
  if (tensor_count_ > kMaxCount) return fail("header", fmt::format("negative tensor count {}", static_cast<int64_t>(tensor_count_)));
  if (kv_count_ > kMaxCount) return fail("header", fmt::format("negative kv count {}", static_cast<int64_t>(kv_count_)));
  if (kv_count_ > cur_.remaining() / kMinKvBytes) {
    return fail("header", fmt::format("kv count {} cannot fit in the {} bytes left (truncated or corrupt)",
                                      kv_count_, cur_.remaining()));
  }
  return Status::ok_status();
}

Status Parser::read_string(std::string_view item, std::string_view what, std::string* out) {
  uint64_t length = 0;
  // Messages are formatted only on failure: this runs once per token of a 248k vocabulary.
  if (!cur_.read(&length)) return truncated(item, fmt::format("{} length", what), sizeof length);
  if (length > kMaxString) {
    return fail(item, fmt::format("{} length {} is absurd (expected at most 1 GiB)", what, length));
  }
  if (!cur_.read_string(length, out)) return truncated(item, what, length);
  return Status::ok_status();
}

Status Parser::read_value(std::string_view item, ValueType type, int depth, Value* out) {
  switch (type) {
    case ValueType::U8: { uint8_t x{}; STRATA_TRY(read(item, "u8 value", &x)); *out = x; break; }
    case ValueType::I8: { int8_t x{}; STRATA_TRY(read(item, "i8 value", &x)); *out = x; break; }
    case ValueType::U16: { uint16_t x{}; STRATA_TRY(read(item, "u16 value", &x)); *out = x; break; }
    case ValueType::I16: { int16_t x{}; STRATA_TRY(read(item, "i16 value", &x)); *out = x; break; }
    case ValueType::U32: { uint32_t x{}; STRATA_TRY(read(item, "u32 value", &x)); *out = x; break; }
    case ValueType::I32: { int32_t x{}; STRATA_TRY(read(item, "i32 value", &x)); *out = x; break; }
    case ValueType::F32: { float x{}; STRATA_TRY(read(item, "f32 value", &x)); *out = x; break; }
    case ValueType::U64: { uint64_t x{}; STRATA_TRY(read(item, "u64 value", &x)); *out = x; break; }
    case ValueType::I64: { int64_t x{}; STRATA_TRY(read(item, "i64 value", &x)); *out = x; break; }
    case ValueType::F64: { double x{}; STRATA_TRY(read(item, "f64 value", &x)); *out = x; break; }
    case ValueType::Bool: {
      // The spec says 0 or 1; ggml takes any non-zero byte as true, and so do we.
      uint8_t x{}; STRATA_TRY(read(item, "bool value", &x)); *out = (x != 0); break;
    }
    case ValueType::String: {
      std::string s;
      STRATA_TRY(read_string(item, "string value", &s));
      *out = std::move(s);
      break;
    }
    case ValueType::Array: return read_array(item, depth + 1, out);
  }
  return Status::ok_status();
}

Status Parser::read_array(std::string_view item, int depth, Value* out) {
  if (depth > kMaxArrayDepth) {
    return fail(item, fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
  }
  uint32_t elem = 0;
  uint64_t count = 0;
  STRATA_TRY(read(item, "array element type", &elem));
  if (elem >= kValueTypeCount) {
    return fail(item, fmt::format("unknown array element type {} (expected 0..{})", elem, kValueTypeCount - 1));
  }
  STRATA_TRY(read(item, "array count", &count));
  ValueType elem_type = static_cast<ValueType>(elem);
  if (count > kMaxArrayCount) {
    return fail(item, fmt::format("array count {} is absurd (expected at most 2^30)", count));
  }
  if (count > cur_.remaining() / encoded_size(elem_type)) {
    return fail(item, fmt::format("truncated array: {} elements of {} cannot fit in the {} bytes left", count,
                                  value_type_name(elem_type), cur_.remaining()));
  }
  std::vector<Value> items(static_cast<size_t>(count));
  for (Value& v : items) STRATA_TRY(read_value(item, elem_type, depth, &v));
  *out = Value::array(elem_type, std::move(items));
  return Status::ok_status();
}

Status Parser::read_kvs(File* out) {
  for (uint64_t i = 0; i < kv_count_; ++i) {
    std::string key;
    std::string index_item = fmt::format("kv #{}", i);
    STRATA_TRY(read_string(index_item, "key", &key));
    if (key.empty()) return fail(index_item, "empty key");
    std::string item = fmt::format("key {}", detail::item_name(key));
    if (out->metadata_.has(key)) return fail(item, "duplicate key");
    uint32_t type = 0;
    STRATA_TRY(read(item, "value type", &type));
    if (type >= kValueTypeCount) {
      return fail(item, fmt::format("unknown value type {} (expected 0..{})", type, kValueTypeCount - 1));
    }
    Value value;
    STRATA_TRY(read_value(item, static_cast<ValueType>(type), 0, &value));
    STRATA_TRY(out->metadata_.add(std::move(key), std::move(value)));
  }
  return Status::ok_status();
}

Status Parser::read_alignment(File* out) {
  out->alignment_ = 32;
  if (const Value* v = out->metadata_.find("general.alignment")) {
    std::string problem = detail::check_alignment_value(*v);
    if (!problem.empty()) return fail("key general.alignment", problem);
    out->alignment_ = v->as<uint32_t>();
  }
  return Status::ok_status();
}

Status Parser::read_tensor_infos(File* out) {
  if (tensor_count_ > cur_.remaining() / kMinTensorInfoBytes) {
    return fail("header", fmt::format("tensor count {} cannot fit in the {} bytes left (truncated or corrupt)",
                                      tensor_count_, cur_.remaining()));
  }
  out->tensors_.reserve(static_cast<size_t>(tensor_count_));
  for (uint64_t i = 0; i < tensor_count_; ++i) STRATA_TRY(read_tensor_info(i, out));
  // Duplicate names: sort a list of pointers rather than build a map, to stay cheap on 1224 names.
  std::vector<const TensorInfo*> sorted;
  for (const TensorInfo& t : out->tensors_) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->name == sorted[i - 1]->name) {
      return fail(fmt::format("tensor {}", detail::item_name(sorted[i]->name)), "duplicate tensor name");
    }
  }
  return Status::ok_status();
}

Status Parser::read_tensor_info(uint64_t index, File* out) {
  TensorInfo t;
  std::string index_item = fmt::format("tensor #{}", index);
  STRATA_TRY(read_string(index_item, "name", &t.name));
  std::string item = fmt::format("tensor {}", detail::item_name(t.name));
  if (std::string problem = detail::check_tensor_name(t.name); !problem.empty()) {
    return fail(t.name.empty() ? index_item : item, problem);
  }
  STRATA_TRY(read(item, "n_dims", &t.n_dims));
  if (t.n_dims > kMaxDims) return fail(item, fmt::format("n_dims {} (expected at most {})", t.n_dims, kMaxDims));
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    uint64_t ne = 0;
    if (!cur_.read(&ne)) return truncated(item, fmt::format("ne[{}]", d), sizeof ne);
    // Stored as u64, read as i64 by ggml: values above INT64_MAX are negative dimensions.
    t.ne[d] = static_cast<int64_t>(ne);
  }
  uint32_t type = 0;
  STRATA_TRY(read(item, "type", &type));
  STRATA_TRY(read(item, "offset", &t.offset));
  auto size = detail::tensor_size(type, std::span<const int64_t>(t.ne.data(), t.n_dims));
  if (!size) return fail(item, size.error());
  t.type = static_cast<quant::Type>(type);
  t.n_elements = size->n_elements;
  t.nbytes = size->nbytes;
  t.shard = shard_;
  out->tensors_.push_back(std::move(t));
  return Status::ok_status();
}

Status Parser::place_data(File* out) {
  // ggml aligns the data section only when there are tensors; the canonical dump follows it.
  uint64_t end_of_infos = cur_.pos();
  out->data_offset_ = tensor_count_ > 0 ? detail::align_up(end_of_infos, out->alignment_) : end_of_infos;
  if (tensor_count_ > 0 && out->data_offset_ > out->size_) {
    return fail("data section", fmt::format("truncated: starts at {} but the file has {} bytes",
                                            out->data_offset_, out->size_));
  }
  for (TensorInfo& t : out->tensors_) {
    std::string item = fmt::format("tensor {}", detail::item_name(t.name));
    if (t.offset % out->alignment_ != 0) {
      return fail(item, fmt::format("misaligned offset {} (expected a multiple of {})", t.offset, out->alignment_));
    }
    uint64_t start = 0, end = 0;
    if (detail::add_overflows(out->data_offset_, t.offset, &start) || detail::add_overflows(start, t.nbytes, &end) ||
        end > out->size_) {
      return fail(item, fmt::format("data out of range or truncated: offset {} + {} bytes past data section {} "
                                    "(expected to end within the {}-byte file)",
                                    t.offset, t.nbytes, out->data_offset_, out->size_));
    }
    t.file_offset = start;
    t.data = out->data_ + start;
  }
  return Status::ok_status();
}

Status Parser::check_overlaps(const File& file) const {
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : file.tensors_) {
    if (t.nbytes > 0) by_offset.push_back(&t);  // an empty tensor occupies no bytes
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (cur.offset < prev.offset + prev.nbytes) {
      return fail(fmt::format("tensor {}", detail::item_name(cur.name)),
                  fmt::format("data [{}, {}) overlaps tensor {} at [{}, {})", cur.offset, cur.offset + cur.nbytes,
                              detail::item_name(prev.name), prev.offset, prev.offset + prev.nbytes));
    }
  }
  return Status::ok_status();
}

Result<File> File::parse(std::span<const uint8_t> bytes, std::string name, uint32_t shard) {
  File file;
  Parser parser(bytes, std::move(name), shard);
  STRATA_TRY(parser.run(&file));
  return file;
}

Result<File> File::open(const std::string& path, uint32_t shard) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return Status::error("gguf: " + mapped.error());
  auto owner = std::make_shared<MappedFile>(std::move(mapped.value()));
  auto file = parse(std::span<const uint8_t>(owner->data(), owner->size()), path, shard);
  if (!file) return file.status();
  file->owner_ = std::move(owner);
  return std::move(file.value());
}

}  // namespace strata::gguf
