// GGUF writer: the strict layout (§1.8) that both ggml's reader and ours accept. The header,
// metadata and tensor infos are built in memory (small); tensor data is streamed straight to
// the file, tensor by tensor, and all-zero tensors become holes. The file is written under a
// temporary name and renamed at the end, so a failed write never leaves a plausible-looking
// partial file at the destination.
#include "strata/gguf/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "layout.h"

namespace strata::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;

// Little-endian serialisation of header, metadata and tensor infos into memory.
class Encoder {
 public:
  template <class T>
  void put(T x) {
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void put_value(const Value& v) {
    std::visit(
        [this](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(x);
          } else if constexpr (std::is_same_v<T, Array>) {
            put<uint32_t>(static_cast<uint32_t>(x.elem_type));
            put<uint64_t>(x.items.size());
            for (const Value& item : x.items) put_value(item);
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(x ? 1 : 0);
          } else {
            put<T>(x);
          }
        },
        v.storage());
  }
  std::vector<uint8_t> bytes;
};

// Arrays must be homogeneous: the encoding has one element type per array.
std::string check_array(const Value& v, int depth) {
  if (v.type() != ValueType::Array) return {};
  if (depth >= kMaxArrayDepth) return fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth);
  const Array& a = v.as<Array>();
  for (const Value& item : a.items) {
    if (item.type() != a.elem_type) {
      return fmt::format("array of {} holds a {}", value_type_name(a.elem_type), value_type_name(item.type()));
    }
    if (std::string problem = check_array(item, depth + 1); !problem.empty()) return problem;
  }
  return {};
}

// Buffered POSIX output that can also skip forward, leaving a hole.
class FileOut : public TensorSink {
 public:
  explicit FileOut(std::string path) : path_(std::move(path)) {}
  ~FileOut() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return error("cannot create");
    return Status::ok_status();
  }
  Status write(const void* data, size_t size) override {
    const auto* p = static_cast<const uint8_t*>(data);
    pos_ += size;
    if (buffer_.size() + size > kBuffer) STRATA_TRY(flush());
    if (size >= kBuffer) return write_all(p, size);
    buffer_.insert(buffer_.end(), p, p + size);
    return Status::ok_status();
  }
  Status skip(uint64_t size) {
    STRATA_TRY(flush());
    if (::lseek(fd_, static_cast<off_t>(size), SEEK_CUR) < 0) return error("cannot seek");
    pos_ += size;
    return Status::ok_status();
  }
  // Flushes and sets the length: a hole at the very end is only materialised by ftruncate.
  Status finish() {
    STRATA_TRY(flush());
    if (::ftruncate(fd_, static_cast<off_t>(pos_)) != 0) return error("cannot set length");
    if (::close(fd_) != 0) {
      fd_ = -1;
      return error("cannot close");
    }
    fd_ = -1;
    return Status::ok_status();
  }
  uint64_t pos() const { return pos_; }

 private:
  static constexpr size_t kBuffer = size_t{4} << 20;

  Status error(std::string_view what) const {
    return Status::error(fmt::format("gguf: {}: {}: {}", path_, what, std::strerror(errno)));
  }
  Status flush() {
    Status s = write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
    return s;
  }
  Status write_all(const uint8_t* p, size_t size) {
    while (size > 0) {
      ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return error("write failed");
      p += n;
      size -= static_cast<size_t>(n);
    }
    return Status::ok_status();
  }

  std::string path_;
  int fd_ = -1;
  uint64_t pos_ = 0;
  std::vector<uint8_t> buffer_;
};

// Counts what a stream callback writes, so a wrong length is an error and not a shifted file.
class CountingSink : public TensorSink {
 public:
  CountingSink(FileOut* out, uint64_t limit) : out_(out), limit_(limit) {}
  Status write(const void* data, size_t size) override {
    if (size > limit_ - written_) {
      return Status::error(fmt::format("wrote more than the tensor's {} bytes", limit_));
    }
    written_ += size;
    return out_->write(data, size);
  }
  uint64_t written() const { return written_; }

 private:
  FileOut* out_;
  uint64_t limit_;
  uint64_t written_ = 0;
};

bool is_split_key(std::string_view key) { return key.starts_with("split."); }

}  // namespace

TensorData TensorData::copy(std::span<const uint8_t> bytes) {
  return own(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}
TensorData TensorData::own(std::vector<uint8_t> bytes) {
  TensorData d;
  d.kind = Kind::Bytes;
  d.owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  d.borrowed = *d.owned;
  return d;
}
TensorData TensorData::borrow(std::span<const uint8_t> bytes) {
  TensorData d;
  d.kind = Kind::Bytes;
  d.borrowed = bytes;
  return d;
}
TensorData TensorData::from_stream(std::function<Status(TensorSink&)> fn) {
  TensorData d;
  d.kind = Kind::Stream;
  d.stream = std::move(fn);
  return d;
}
TensorData TensorData::zeros() { return TensorData{}; }

Writer::Writer(uint32_t alignment) : alignment_(alignment) {}

Status Writer::add_tensor(std::string name, quant::Type type, std::vector<int64_t> ne, TensorData data,
                          uint32_t shard) {
  auto fail = [&](std::string_view what) {
    return Status::error(fmt::format("gguf writer: tensor {}: {}", detail::item_name(name), what));
  };
  if (std::string problem = detail::check_tensor_name(name); !problem.empty()) return fail(problem);
  if (ne.empty()) return fail("no dimensions (expected 1 to 4)");
  for (const Pending& p : tensors_) {
    if (p.info.name == name) return fail("duplicate tensor name");
  }
  auto size = detail::tensor_size(static_cast<uint32_t>(type), ne);
  if (!size) return fail(size.error());
  if (data.kind == TensorData::Kind::Bytes && data.borrowed.size() != size->nbytes) {
    return fail(fmt::format("{} bytes of data (expected {})", data.borrowed.size(), size->nbytes));
  }
  Pending p;
  p.info.name = std::move(name);
  p.info.type = type;
  p.info.n_dims = static_cast<uint32_t>(ne.size());
  for (size_t i = 0; i < ne.size(); ++i) p.info.ne[i] = ne[i];
  p.info.n_elements = size->n_elements;
  p.info.nbytes = size->nbytes;
  p.info.shard = shard;
  p.data = std::move(data);
  tensors_.push_back(std::move(p));
  return Status::ok_status();
}

Status Writer::check_metadata() const {
  if (!detail::is_power_of_two(alignment_)) {
    return Status::error(fmt::format("gguf writer: alignment {} is not a power of two", alignment_));
  }
  for (const KeyValue& kv : metadata_.entries()) {
    if (std::string problem = check_array(kv.value, 0); !problem.empty()) {
      return Status::error(fmt::format("gguf writer: key {}: {}", kv.key, problem));
    }
  }
  if (const Value* v = metadata_.find("general.alignment")) {
    if (v->type() != ValueType::U32 || v->as<uint32_t>() != alignment_) {
      return Status::error(fmt::format("gguf writer: key general.alignment: disagrees with the writer's "
                                       "alignment {} (set it through Writer(alignment))",
                                       alignment_));
    }
  }
  return Status::ok_status();
}

Status Writer::write(const std::string& path) const {
  STRATA_TRY(check_metadata());
  // split.* keys belong to write_split: copying a shard's metadata must not make a single
  // file claim to be part of a set.
  std::vector<const KeyValue*> kvs;
  for (const KeyValue& kv : metadata_.entries()) {
    if (!is_split_key(kv.key)) kvs.push_back(&kv);
  }
  KeyValue align{"general.alignment", Value(alignment_)};
  if (alignment_ != 32 && !metadata_.has("general.alignment")) kvs.push_back(&align);
  std::vector<const Pending*> tensors;
  for (const Pending& p : tensors_) tensors.push_back(&p);
  return write_file(path, kvs, tensors);
}

Result<std::vector<std::string>> Writer::write_split(const std::string& prefix, uint32_t n_shards) const {
  STRATA_TRY(check_metadata());
  if (n_shards == 0 || n_shards > 99999) {
    return Status::error(fmt::format("gguf writer: {} shards (expected 1..99999)", n_shards));
  }
  if (tensors_.size() > static_cast<size_t>(INT32_MAX)) {
    return Status::error("gguf writer: too many tensors for split.tensors.count (i32)");
  }
  for (const Pending& p : tensors_) {
    if (p.info.shard >= n_shards) {
      return Status::error(fmt::format("gguf writer: tensor {}: shard {} (expected < {})", p.info.name,
                                       p.info.shard, n_shards));
    }
  }
  std::vector<std::string> paths;
  for (uint32_t s = 0; s < n_shards; ++s) {
    std::vector<const KeyValue*> kvs;
    if (s == 0) {
      for (const KeyValue& kv : metadata_.entries()) {
        if (!is_split_key(kv.key)) kvs.push_back(&kv);
      }
    }
    // Every shard is a complete file and needs its own alignment key.
    KeyValue align{"general.alignment", Value(alignment_)};
    if (alignment_ != 32 && (s != 0 || !metadata_.has("general.alignment"))) kvs.push_back(&align);
    KeyValue no{"split.no", Value(static_cast<uint16_t>(s))};
    KeyValue count{"split.count", Value(static_cast<uint16_t>(n_shards))};
    KeyValue total{"split.tensors.count", Value(static_cast<int32_t>(tensors_.size()))};
    kvs.insert(kvs.end(), {&no, &count, &total});
    std::vector<const Pending*> tensors;
    for (const Pending& p : tensors_) {
      if (p.info.shard == s) tensors.push_back(&p);
    }
    paths.push_back(split_path(prefix, s, n_shards));
    STRATA_TRY(write_file(paths.back(), kvs, tensors));
  }
  return paths;
}

namespace {

Status write_zeros(FileOut& out, uint64_t n) {
  static const std::vector<uint8_t> kZeros(1 << 16, 0);
  while (n > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, kZeros.size()));
    STRATA_TRY(out.write(kZeros.data(), chunk));
    n -= chunk;
  }
  return Status::ok_status();
}

}  // namespace

Status Writer::write_data(const std::string& path, const std::vector<uint8_t>& head,
                          const std::vector<const Pending*>& tensors) const {
  FileOut out(path);
  STRATA_TRY(out.open());
  STRATA_TRY(out.write(head.data(), head.size()));
  for (const Pending* p : tensors) {
    const TensorInfo& t = p->info;
    if (p->data.kind == TensorData::Kind::Bytes) {
      STRATA_TRY(out.write(p->data.borrowed.data(), p->data.borrowed.size()));
    } else if (p->data.kind == TensorData::Kind::Stream) {
      CountingSink sink(&out, t.nbytes);
      Status s = p->data.stream(sink);
      if (s.ok() && sink.written() != t.nbytes) {
        s = Status::error(fmt::format("stream wrote {} bytes (expected {})", sink.written(), t.nbytes));
      }
      if (!s.ok()) return Status::error(fmt::format("gguf writer: {}: tensor {}: {}", path, t.name, s.message()));
    } else {
      STRATA_TRY(out.skip(t.nbytes));
    }
    STRATA_TRY(write_zeros(out, detail::align_up(t.nbytes, alignment_) - t.nbytes));
  }
  return out.finish();
}

Status Writer::write_file(const std::string& path, const std::vector<const KeyValue*>& kvs,
                          const std::vector<const Pending*>& tensors) const {
  // Offsets: the running sum of padded sizes, checked for overflow (sizes are < 2^63 each).
  std::vector<uint64_t> offsets;
  uint64_t data_size = 0;
  for (const Pending* p : tensors) {
    offsets.push_back(data_size);
    uint64_t padded = detail::align_up(p->info.nbytes, alignment_);
    if (detail::add_overflows(data_size, padded, &data_size) || data_size > uint64_t{INT64_MAX}) {
      return Status::error(fmt::format("gguf writer: {}: data section exceeds 2^63 bytes", path));
    }
  }
  Encoder enc;
  enc.put<uint32_t>(kMagic);
  enc.put<uint32_t>(version_);
  enc.put<uint64_t>(tensors.size());
  enc.put<uint64_t>(kvs.size());
  for (const KeyValue* kv : kvs) {
    enc.put_string(kv->key);
    enc.put<uint32_t>(static_cast<uint32_t>(kv->value.type()));
    enc.put_value(kv->value);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i]->info;
    enc.put_string(t.name);
    enc.put<uint32_t>(t.n_dims);
    for (uint32_t d = 0; d < t.n_dims; ++d) enc.put<uint64_t>(static_cast<uint64_t>(t.ne[d]));
    enc.put<uint32_t>(static_cast<uint32_t>(t.type));
    enc.put<uint64_t>(offsets[i]);
  }
  enc.bytes.resize(detail::align_up(enc.bytes.size(), alignment_), 0);

  std::string tmp = path + ".tmp";
  Status written = write_data(tmp, enc.bytes, tensors);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::error(fmt::format("gguf writer: {}: cannot rename from {}: {}", path, tmp, std::strerror(errno)));
  }
  return Status::ok_status();
}

}  // namespace strata::gguf
