// Metadata values and typed getters. Getters are strict about the stored type because a key
// written with the wrong type is a converter bug worth surfacing, not coercing; get_uint and
// get_int_array are the deliberate exceptions for keys whose type varies between converters.
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "layout.h"
#include "strata/gguf/gguf.h"

namespace strata::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

Value Value::array(ValueType elem_type, std::vector<Value> items) {
  Array a;
  a.elem_type = elem_type;
  a.items = std::move(items);
  Value v;
  v.storage_ = std::move(a);
  return v;
}

Status Metadata::add(std::string key, Value value) {
  if (key.empty()) return Status::error(fmt::format("gguf: empty key in {}", source_));
  if (index_.count(key) != 0) {
    return Status::error(fmt::format("gguf: key {}: duplicate key in {}", detail::item_name(key), source_));
  }
  index_.emplace(key, entries_.size());
  entries_.push_back({std::move(key), std::move(value)});
  return Status::ok_status();
}

void Metadata::set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].value = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.push_back({std::move(key), std::move(value)});
}

bool Metadata::erase(std::string_view key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].key, i);
  return true;
}

const Value* Metadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].value;
}

Status Metadata::type_error(std::string_view key, std::string_view want, const Value& got) const {
  std::string got_name(value_type_name(got.type()));
  if (got.type() == ValueType::Array) {
    got_name = fmt::format("array[{}]", value_type_name(got.as<Array>().elem_type));
  }
  return Status::error(fmt::format("gguf: key {}: expected {}, got {} in {}", key, want, got_name, source_));
}

Result<const Value*> Metadata::lookup(std::string_view key, ValueType want) const {
  const Value* v = find(key);
  if (v == nullptr) return Status::error(fmt::format("gguf: key {}: missing in {}", key, source_));
  if (v->type() != want) return type_error(key, value_type_name(want), *v);
  return v;
}

namespace {
template <class T>
Result<T> get_scalar(const Result<const Value*>& v) {
  if (!v) return v.status();
  return v.value()->as<T>();
}
}  // namespace

Result<uint8_t> Metadata::get_u8(std::string_view k) const { return get_scalar<uint8_t>(lookup(k, ValueType::U8)); }
Result<int8_t> Metadata::get_i8(std::string_view k) const { return get_scalar<int8_t>(lookup(k, ValueType::I8)); }
Result<uint16_t> Metadata::get_u16(std::string_view k) const { return get_scalar<uint16_t>(lookup(k, ValueType::U16)); }
Result<int16_t> Metadata::get_i16(std::string_view k) const { return get_scalar<int16_t>(lookup(k, ValueType::I16)); }
Result<uint32_t> Metadata::get_u32(std::string_view k) const { return get_scalar<uint32_t>(lookup(k, ValueType::U32)); }
Result<int32_t> Metadata::get_i32(std::string_view k) const { return get_scalar<int32_t>(lookup(k, ValueType::I32)); }
Result<uint64_t> Metadata::get_u64(std::string_view k) const { return get_scalar<uint64_t>(lookup(k, ValueType::U64)); }
Result<int64_t> Metadata::get_i64(std::string_view k) const { return get_scalar<int64_t>(lookup(k, ValueType::I64)); }
Result<float> Metadata::get_f32(std::string_view k) const { return get_scalar<float>(lookup(k, ValueType::F32)); }
Result<double> Metadata::get_f64(std::string_view k) const { return get_scalar<double>(lookup(k, ValueType::F64)); }
Result<bool> Metadata::get_bool(std::string_view k) const { return get_scalar<bool>(lookup(k, ValueType::Bool)); }
Result<std::string> Metadata::get_string(std::string_view k) const {
  return get_scalar<std::string>(lookup(k, ValueType::String));
}

namespace {
// Any integer value as int64 when it fits (u64 above INT64_MAX does not).
std::optional<int64_t> integer_value(const Value& v) {
  return std::visit(
      [](const auto& x) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(x);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(x);
        } else {
          return std::nullopt;
        }
      },
      v.storage());
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64:
      return true;
    default:
      return false;
  }
}
}  // namespace

Result<uint64_t> Metadata::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return Status::error(fmt::format("gguf: key {}: missing in {}", key, source_));
  if (v->type() == ValueType::U64) return v->as<uint64_t>();
  if (!is_integer_type(v->type())) return type_error(key, "an unsigned integer", *v);
  int64_t x = *integer_value(*v);
  if (x < 0) {
    return Status::error(fmt::format("gguf: key {}: expected a value >= 0, got {} in {}", key, x, source_));
  }
  return static_cast<uint64_t>(x);
}

Result<const Array*> Metadata::get_array_value(std::string_view key) const {
  auto v = lookup(key, ValueType::Array);
  if (!v) return v.status();
  return &(*v)->as<Array>();
}

Result<std::vector<std::string>> Metadata::get_string_array(std::string_view key) const {
  return get_array<std::string>(key);
}
Result<std::vector<uint64_t>> Metadata::get_u64_array(std::string_view key) const { return get_array<uint64_t>(key); }
Result<std::vector<float>> Metadata::get_f32_array(std::string_view key) const { return get_array<float>(key); }

Result<std::vector<int64_t>> Metadata::get_int_array(std::string_view key) const {
  auto arr = get_array_value(key);
  if (!arr) return arr.status();
  if (!is_integer_type((*arr)->elem_type)) return type_error(key, "array of integers", *find(key));
  std::vector<int64_t> out;
  out.reserve((*arr)->items.size());
  for (size_t i = 0; i < (*arr)->items.size(); ++i) {
    auto x = integer_value((*arr)->items[i]);
    if (!x) {
      return Status::error(fmt::format("gguf: key {}: element {} does not fit in int64 in {}", key, i, source_));
    }
    out.push_back(*x);
  }
  return out;
}

}  // namespace strata::gguf
