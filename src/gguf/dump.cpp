// The canonical text dump (tests/data/gguf-samples/*.expected.txt): one line per fact, so
// two readers can be compared with diff. Floats are C %a (exact), strings are quoted with
// non-printable bytes as \xNN, arrays print their element type and count, then the values.
// Nested arrays, which the reference reader cannot produce, print as [type[n] values].
#include <cstdio>

#include <fmt/format.h>

#include "layout.h"
#include "strata/gguf/gguf.h"

namespace strata::gguf {

namespace {

// The dump's short type names ("str", "arr"); value_type_name is for messages.
std::string_view dump_type_name(ValueType t) {
  if (t == ValueType::String) return "str";
  if (t == ValueType::Array) return "arr";
  return value_type_name(t);
}

std::string hex_float(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

void append_value(std::string* out, const Value& v);

void append_array_body(std::string* out, const Array& a) {
  *out += fmt::format("{}[{}]", dump_type_name(a.elem_type), a.items.size());
  for (const Value& item : a.items) {
    out->push_back(' ');
    if (item.type() == ValueType::Array) {
      out->push_back('[');
      append_array_body(out, item.as<Array>());
      out->push_back(']');
    } else {
      append_value(out, item);
    }
  }
}

void append_value(std::string* out, const Value& v) {
  std::visit(
      [out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          *out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          *out += hex_float(static_cast<double>(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          *out += '"' + detail::escape_bytes(x) + '"';
        } else if constexpr (std::is_same_v<T, Array>) {
          append_array_body(out, x);
        } else {
          // Widen first so u8/i8 print as numbers, not characters.
          if constexpr (std::is_signed_v<T>) {
            *out += fmt::format("{}", static_cast<int64_t>(x));
          } else {
            *out += fmt::format("{}", static_cast<uint64_t>(x));
          }
        }
      },
      v.storage());
}

}  // namespace

std::string dump_canonical(const File& file) {
  std::string out;
  out += fmt::format("version {}\nalignment {}\ndata_offset {}\n", file.version(), file.alignment(),
                     file.data_offset());
  for (const KeyValue& kv : file.metadata().entries()) {
    out += fmt::format("kv {} {} ", detail::escape_bytes(kv.key), dump_type_name(kv.value.type()));
    append_value(&out, kv.value);
    out.push_back('\n');
  }
  for (const TensorInfo& t : file.tensors()) {
    out += fmt::format("tensor {} type {} ne {} {} {} {} offset {} nbytes {}\n", detail::escape_bytes(t.name),
                       static_cast<uint32_t>(t.type), t.ne[0], t.ne[1], t.ne[2], t.ne[3], t.offset, t.nbytes);
  }
  return out;
}

}  // namespace strata::gguf
