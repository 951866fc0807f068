// Reading the model's reply: the reasoning before </think>, the visible content, and the
// <tool_call> blocks in the XML format that the template's tool preamble asks for:
//
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//
// The parser is lenient about what a sampled reply may get wrong (a missing closing tag at
// the end of a cut-short reply, extra blank lines) and exact about what the template
// writes, so that parse then render gives back the rendered turn.
#include <string>
#include <string_view>

#include "strata/model/chat.h"

namespace strata::model {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

// The JSON schema type of one parameter, from the request's tool list ("" if unknown).
std::string schema_type(std::span<const Json> tools, const std::string& function, const std::string& param) {
  for (const Json& tool : tools) {
    const Json& f = tool.contains("function") ? tool["function"] : tool;
    if (!f.is_object() || f.value("name", std::string()) != function) continue;
    if (!f.contains("parameters") || !f["parameters"].is_object()) return {};
    const Json& props = f["parameters"].value("properties", Json::object());
    if (!props.is_object() || !props.contains(param) || !props[param].is_object()) return {};
    const Json& type = props[param].value("type", Json());
    if (type.is_string()) return type.get<std::string>();
    // ["string", "null"] and the like: text wins when it is allowed at all.
    if (type.is_array()) {
      for (const Json& t : type) {
        if (t == "string") return "string";
      }
    }
    return {};
  }
  return {};
}

Json typed_value(std::string_view raw, const std::string& type) {
  if (type != "string") {
    Json parsed = Json::parse(raw.begin(), raw.end(), nullptr, false);
    if (!parsed.is_discarded()) return parsed;
  }
  return Json(std::string(raw));
}

// One <function=...> body: its name and parameters.
ToolCall parse_call(std::string_view body, std::span<const Json> tools) {
  ToolCall call;
  size_t f = body.find("<function=");
  if (f == std::string_view::npos) return call;
  size_t name_end = body.find('>', f);
  if (name_end == std::string_view::npos) return call;
  call.name = std::string(strip(body.substr(f + 10, name_end - f - 10)));
  size_t pos = name_end + 1;
  while (true) {
    size_t p = body.find("<parameter=", pos);
    if (p == std::string_view::npos) break;
    size_t key_end = body.find('>', p);
    if (key_end == std::string_view::npos) break;
    std::string key(strip(body.substr(p + 11, key_end - p - 11)));
    size_t value_start = key_end + 1;
    size_t value_end = body.find("</parameter>", value_start);
    size_t next = value_end == std::string_view::npos ? body.size() : value_end + 12;
    if (value_end == std::string_view::npos) {
      value_end = body.find("</function>", value_start);
      if (value_end == std::string_view::npos) value_end = body.size();
    }
    std::string_view value = body.substr(value_start, value_end - value_start);
    // The template writes "\nVALUE\n": exactly one newline on each side belongs to it.
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    call.arguments[key] = typed_value(value, schema_type(tools, call.name, key));
    pos = next;
  }
  return call;
}

}  // namespace

AssistantReply parse_assistant_reply(std::string_view text, bool thinking_open, std::span<const Json> tools) {
  AssistantReply r;
  std::string_view rest = text;
  if (!thinking_open && strip(rest).starts_with("<think>")) {
    rest = strip(rest).substr(7);
    thinking_open = true;
  }
  if (thinking_open) {
    size_t close = rest.find("</think>");
    if (close == std::string_view::npos) {
      r.reasoning = std::string(strip(rest));
      return r;
    }
    r.reasoning = std::string(strip(rest.substr(0, close)));
    r.reasoning_closed = true;
    rest = rest.substr(close + 8);
  }
  size_t call = rest.find("<tool_call>");
  r.content = std::string(strip(rest.substr(0, call)));
  while (call != std::string_view::npos) {
    size_t body = call + 11;
    size_t end = rest.find("</tool_call>", body);
    size_t body_end = end == std::string_view::npos ? rest.size() : end;
    ToolCall parsed = parse_call(rest.substr(body, body_end - body), tools);
    if (!parsed.name.empty()) r.tool_calls.push_back(std::move(parsed));
    if (end == std::string_view::npos) break;
    call = rest.find("<tool_call>", end + 12);
  }
  return r;
}

}  // namespace strata::model
