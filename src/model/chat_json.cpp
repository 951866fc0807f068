// JSON on both sides of the chat format: reading an OpenAI-style request into ChatMessage,
// and writing JSON the way the template's tojson does (Python's json.dumps with
// ensure_ascii=False, as HF transformers installs it in its Jinja environment).
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "strata/model/chat.h"

namespace strata::model {
namespace {

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);  // Python writes these in lower-case hex
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// float.__repr__: the shortest digits that round-trip, in fixed notation when the decimal
// exponent is in [-4, 16), else d.ddde+XX; a whole number in fixed notation gets ".0".
void dump_double(double v, std::string& out) {
  if (std::isnan(v)) { out += "NaN"; return; }
  if (std::isinf(v)) { out += v > 0 ? "Infinity" : "-Infinity"; return; }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e+05"
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  std::string body;
  if (exp10 < -4 || exp10 >= 16) {
    body = digits.substr(0, 1);
    if (digits.size() > 1) (body += '.') += digits.substr(1);
    body += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  } else if (exp10 < 0) {
    body = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  } else if (static_cast<size_t>(exp10) + 1 >= digits.size()) {
    body = digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
  } else {
    body = digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
  }
  if (negative) out += '-';
  out += body;
}

void dump(const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::value_t::null: out += "null"; break;
    case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case Json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case Json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case Json::value_t::number_float: dump_double(v.get<double>(), out); break;
    case Json::value_t::string: dump_string(v.get_ref<const std::string&>(), out); break;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const Json& item : v) {
        if (!first) out += ", ";
        first = false;
        dump(item, out);
      }
      out += ']';
      break;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        dump_string(key, out);
        out += ": ";
        dump(item, out);
      }
      out += '}';
      break;
    }
    default: out += "null"; break;  // binary / discarded never come from parsed JSON
  }
}

// Message content: a string, null, or a list of text parts (joined, as the template's
// render_content does). Images and video are refused: Strata has no vision tower.
Result<std::string> content_text(const Json& c, size_t index) {
  if (c.is_null()) return std::string();
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return Status::error(fmt::format("chat: messages[{}].content: expected a string, null or a list", index));
  std::string out;
  for (const Json& part : c) {
    if (part.is_object() && part.contains("text") && part["text"].is_string()) {
      out += part["text"].get<std::string>();
    } else {
      return Status::error(fmt::format("chat: messages[{}].content: only text parts are supported", index));
    }
  }
  return out;
}

Result<ToolCall> tool_call_from_json(const Json& j, size_t index) {
  const Json& f = j.contains("function") ? j["function"] : j;
  if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) {
    return Status::error(fmt::format("chat: messages[{}].tool_calls: a call needs function.name", index));
  }
  ToolCall call{f["name"].get<std::string>(), Json::object()};
  if (f.contains("arguments")) {
    const Json& a = f["arguments"];
    if (a.is_string()) {
      // OpenAI sends the arguments as a JSON string; the template writes an object.
      Json parsed = Json::parse(a.get<std::string>(), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        return Status::error(fmt::format("chat: messages[{}].tool_calls: arguments is not a JSON object", index));
      }
      call.arguments = std::move(parsed);
    } else if (a.is_object()) {
      call.arguments = a;
    } else if (!a.is_null()) {
      return Status::error(fmt::format("chat: messages[{}].tool_calls: arguments must be an object", index));
    }
  }
  return call;
}

Result<ChatMessage> message_from_json(const Json& j, size_t index) {
  if (!j.is_object() || !j.contains("role") || !j["role"].is_string()) {
    return Status::error(fmt::format("chat: messages[{}]: expected an object with a string role", index));
  }
  ChatMessage m;
  m.role = j["role"].get<std::string>();
  if (j.contains("content")) {
    Result<std::string> text = content_text(j["content"], index);
    if (!text) return text.status();
    m.content = std::move(*text);
  }
  if (j.contains("reasoning_content") && j["reasoning_content"].is_string()) {
    m.reasoning_content = j["reasoning_content"].get<std::string>();
  }
  if (j.contains("tool_calls") && j["tool_calls"].is_array()) {
    for (const Json& c : j["tool_calls"]) {
      Result<ToolCall> call = tool_call_from_json(c, index);
      if (!call) return call.status();
      m.tool_calls.push_back(std::move(*call));
    }
  }
  return m;
}

template <class T>
Status read_option(const Json& r, const char* key, T& out) {
  if (!r.contains(key) || r[key].is_null()) return Status::ok_status();
  try {
    out = r[key].get<T>();
  } catch (const Json::exception&) {
    return Status::error(fmt::format("chat: request field {} has the wrong type", key));
  }
  return Status::ok_status();
}

}  // namespace

std::string python_json_dumps(const Json& value) {
  std::string out;
  dump(value, out);
  return out;
}

Result<ChatRequest> chat_request_from_json(const Json& r) {
  if (!r.is_object() || !r.contains("messages") || !r["messages"].is_array()) {
    return Status::error("chat: request: expected an object with a messages array");
  }
  ChatRequest req;
  for (size_t i = 0; i < r["messages"].size(); ++i) {
    Result<ChatMessage> m = message_from_json(r["messages"][i], i);
    if (!m) return m.status();
    req.messages.push_back(std::move(*m));
  }
  if (r.contains("tools") && r["tools"].is_array()) {
    for (const Json& t : r["tools"]) req.options.tools.push_back(t);
  }
  STRATA_TRY(read_option(r, "add_generation_prompt", req.options.add_generation_prompt));
  STRATA_TRY(read_option(r, "enable_thinking", req.options.enable_thinking));
  STRATA_TRY(read_option(r, "reasoning_effort", req.options.reasoning_effort));
  STRATA_TRY(read_option(r, "preserve_thinking", req.options.preserve_thinking));
  return req;
}

}  // namespace strata::model
