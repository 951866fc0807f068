// The GGUF container, read side (spec/quant-formats.md §1). One file or a whole split set
// is opened, validated strictly once, and then trusted: metadata is parsed into values,
// tensor data stays in the mmap and TensorInfo::data points straight into it (zero copy).
//
//   auto model = gguf::Model::open("qwen-00001-of-00004.gguf");   // any shard, or one file
//   if (!model) return model.status();
//   Result<uint32_t> n_expert = model->metadata().get_u32("qwen4exp.expert_count");
//   const gguf::TensorInfo* t = model->find("blk.0.ffn_down_exps.weight");
//
// Every error names the file, the item (key, tensor, shard) and what was expected vs found:
// "gguf: key qwen4exp.expert_count: expected u32, got string in FILE".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "strata/common/status.h"
#include "strata/quant/types.h"

namespace strata::gguf {

// ---------------------------------------------------------------------------------------
// Metadata values
// ---------------------------------------------------------------------------------------

// On-disk value type codes (§1.4). The order of Value's variant follows these codes, so
// Value::type() is the variant index.
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;

// "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64".
std::string_view value_type_name(ValueType t);

// Arrays may nest (the spec allows it, ggml does not); the reader bounds the depth.
inline constexpr int kMaxArrayDepth = 8;

class Value;
struct Array;

// The C++ type behind each ValueType, for templates (get_array<T>, Value::array<T>).
template <class T> constexpr std::optional<ValueType> value_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return ValueType::U8;
  else if constexpr (std::is_same_v<T, int8_t>) return ValueType::I8;
  else if constexpr (std::is_same_v<T, uint16_t>) return ValueType::U16;
  else if constexpr (std::is_same_v<T, int16_t>) return ValueType::I16;
  else if constexpr (std::is_same_v<T, uint32_t>) return ValueType::U32;
  else if constexpr (std::is_same_v<T, int32_t>) return ValueType::I32;
  else if constexpr (std::is_same_v<T, float>) return ValueType::F32;
  else if constexpr (std::is_same_v<T, bool>) return ValueType::Bool;
  else if constexpr (std::is_same_v<T, std::string>) return ValueType::String;
  else if constexpr (std::is_same_v<T, Array>) return ValueType::Array;
  else if constexpr (std::is_same_v<T, uint64_t>) return ValueType::U64;
  else if constexpr (std::is_same_v<T, int64_t>) return ValueType::I64;
  else if constexpr (std::is_same_v<T, double>) return ValueType::F64;
  else return std::nullopt;
}

struct Array {
  ValueType elem_type = ValueType::U8;
  std::vector<Value> items;  // all of elem_type
  bool operator==(const Array&) const = default;
};

class Value {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, Array, uint64_t, int64_t, double>;

  Value() = default;
  template <class T>
    requires(value_type_of<T>().has_value())
  Value(T v) : storage_(std::move(v)) {}  // NOLINT: implicit, so set("k", uint32_t{4}) reads well
  Value(const char* s) : storage_(std::string(s)) {}  // NOLINT

  ValueType type() const { return static_cast<ValueType>(storage_.index()); }
  const Storage& storage() const { return storage_; }

  template <class T> bool is() const { return std::holds_alternative<T>(storage_); }
  template <class T> const T& as() const { return std::get<T>(storage_); }  // asserts via throw

  // Typed array helpers for writers: Value::array<uint64_t>({1, 2, 3}).
  template <class T>
  static Value array(const std::vector<T>& items);
  static Value array(ValueType elem_type, std::vector<Value> items);

  bool operator==(const Value&) const = default;  // exact: same type and value

 private:
  Storage storage_;
};

template <class T>
Value Value::array(const std::vector<T>& items) {
  static_assert(value_type_of<T>().has_value(), "not a GGUF value type");
  Array a;
  a.elem_type = *value_type_of<T>();
  a.items.reserve(items.size());
  for (const T& item : items) a.items.emplace_back(Value(T(item)));
  Value v;
  v.storage_ = std::move(a);
  return v;
}

struct KeyValue {
  std::string key;
  Value value;
};

// The key/value records of one file, in file order, with typed getters. Getters are strict
// about the type (a u32 key stored as i32 is an error naming both) except get_uint /
// get_int_array, which accept any integer type whose values fit.
class Metadata {
 public:
  Metadata() = default;
  explicit Metadata(std::string source) : source_(std::move(source)) {}

  // Adds a record; rejects an empty or duplicate key (names the key and source).
  Status add(std::string key, Value value);
  void set(std::string key, Value value);  // insert or replace (writers)
  bool erase(std::string_view key);

  const std::vector<KeyValue>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const Value* find(std::string_view key) const;  // nullptr when absent
  const std::string& source() const { return source_; }  // the file, for messages
  void set_source(std::string source) { source_ = std::move(source); }

  Result<uint8_t> get_u8(std::string_view key) const;
  Result<int8_t> get_i8(std::string_view key) const;
  Result<uint16_t> get_u16(std::string_view key) const;
  Result<int16_t> get_i16(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<double> get_f64(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  // Any integer type, value >= 0 (e.g. split.tensors.count is i32, others write u64).
  Result<uint64_t> get_uint(std::string_view key) const;

  // The array itself (any element type, nested included), without a copy.
  Result<const Array*> get_array_value(std::string_view key) const;
  // A flat array whose element type is exactly T.
  template <class T> Result<std::vector<T>> get_array(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<uint64_t>> get_u64_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  // Any integer element type, converted to int64 (u64 values above INT64_MAX are an error).
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

 private:
  Result<const Value*> lookup(std::string_view key, ValueType want) const;
  Status type_error(std::string_view key, std::string_view want, const Value& got) const;

  std::string source_;
  std::vector<KeyValue> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

template <class T>
Result<std::vector<T>> Metadata::get_array(std::string_view key) const {
  static_assert(value_type_of<T>().has_value(), "not a GGUF value type");
  auto arr = get_array_value(key);
  if (!arr) return arr.status();
  if ((*arr)->elem_type != *value_type_of<T>()) {
    return type_error(key, std::string("array[") + std::string(value_type_name(*value_type_of<T>())) + "]",
                      *find(key));
  }
  std::vector<T> out;
  out.reserve((*arr)->items.size());
  for (const Value& v : (*arr)->items) out.push_back(v.as<T>());
  return out;
}

// ---------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------

inline constexpr uint32_t kMaxDims = 4;
inline constexpr size_t kMaxTensorName = 63;   // bytes; ggml keeps names in char[64] with a NUL

struct TensorInfo {
  std::string name;
  quant::Type type = quant::Type::F32;
  uint32_t n_dims = 1;                    // as stored (1..4)
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // ggml order: ne[0] is the row length
  uint64_t n_elements = 0;
  uint64_t nbytes = 0;                    // exact data size, without padding
  uint32_t shard = 0;                     // index into Model::shards()
  uint64_t offset = 0;                    // relative to the shard's data section
  uint64_t file_offset = 0;               // absolute offset in the shard file
  const uint8_t* data = nullptr;          // zero-copy view into the shard's mmap

  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(nbytes)}; }
  // Bytes of one row of ne[0] elements, and the number of rows (ne1*ne2*ne3; the reader
  // checked that this product fits in int64).
  uint64_t row_bytes() const { return quant::row_bytes(type, static_cast<uint64_t>(ne[0])).value_or(0); }
  uint64_t n_rows() const {
    return static_cast<uint64_t>(ne[1]) * static_cast<uint64_t>(ne[2]) * static_cast<uint64_t>(ne[3]);
  }
};

// ---------------------------------------------------------------------------------------
// One GGUF file
// ---------------------------------------------------------------------------------------

class File {
 public:
  // mmap and validate a file. shard is recorded in each TensorInfo (0 for a single file).
  static Result<File> open(const std::string& path, uint32_t shard = 0);
  // Parse and validate bytes already in memory (fuzzer, tests). The bytes are not copied
  // and must outlive the File; name is used in messages.
  static Result<File> parse(std::span<const uint8_t> bytes, std::string name, uint32_t shard = 0);

  File() = default;
  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t size() const { return size_; }
  const uint8_t* data() const { return data_; }
  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

 private:
  friend class Parser;
  friend class Model;  // sets each tensor's shard index once the set is known
  std::shared_ptr<void> owner_;  // the MappedFile when opened from a path (keeps views alive)
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
};

// ---------------------------------------------------------------------------------------
// A model: one file, or a split set `<prefix>-0000K-of-0000N.gguf` (§1.10)
// ---------------------------------------------------------------------------------------

class Model {
 public:
  // Opens a single file, or the whole split set when path names any one of its shards
  // (split.count > 1, or a name of the form <prefix>-0000K-of-0000N.gguf). Checks every
  // shard is present, split.no/split.count agree, tensor names are unique across shards
  // and the total equals split.tensors.count.
  static Result<Model> open(const std::string& path);

  // Shard 0's metadata: the model's keys live there (later shards carry only split.*).
  const Metadata& metadata() const { return shards_.front().metadata(); }
  const std::vector<File>& shards() const { return shards_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // shard order
  const std::string& path() const { return shards_.front().path(); }

  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  Result<const TensorInfo*> tensor(std::string_view name) const;  // error names the tensor

 private:
  std::vector<File> shards_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// Split-set naming: split_path("out/m", 1, 4) == "out/m-00002-of-00004.gguf" (no is 0-based).
std::string split_path(std::string_view prefix, uint32_t no, uint32_t count);
struct SplitName {
  std::string prefix;
  uint32_t no = 0;     // 0-based
  uint32_t count = 0;
};
// Parses "<prefix>-0000K-of-0000N.gguf"; nullopt when the name does not have that form.
std::optional<SplitName> parse_split_path(std::string_view path);

// The canonical text dump of a file (tests/data/gguf-samples/*.expected.txt without the
// '#' lines): version, alignment, data_offset, each kv, each tensor.
std::string dump_canonical(const File& file);

}  // namespace strata::gguf
