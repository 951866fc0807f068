// The native renderer of the Qwen3.5/3.8 chat template (format in include/strata/model/chat.h).
// Each block below names the template section it reproduces; the fixture
// tests/oracle/chat_template_qwen38.jinja is the same structure in Jinja, and the oracle
// test renders both on the same conversations.
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "strata/model/chat.h"

namespace strata::model {
namespace {

constexpr std::string_view kXHighInstruction =
    "Reasoning effort is set to xhigh. Please think carefully through the task, validate key "
    "assumptions, consider plausible alternatives, and prioritize correctness, consistency, and "
    "clarity in the final answer.";
constexpr std::string_view kLowInstruction =
    "Reasoning effort is set to low. Keep your thinking brief and focused, moving directly to the "
    "conclusion without unnecessary elaboration.";

// The model was trained to call tools against exactly this text; the reply parser reads
// back the format it describes.
constexpr std::string_view kToolsPreamble = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr std::string_view kToolsRules =
    "\n</tools>"
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
    "block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
    "specified\n- You may provide optional reasoning for your function call in natural language "
    "BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
    "question like normal with your current knowledge and do not tell the user about function "
    "calls\n</IMPORTANT>";

// Jinja's trim filter: Python's str.strip(), which strips Unicode whitespace. Only ASCII
// whitespace and the few multi-byte White_Space characters Python knows are handled here,
// enough for every str.isspace() character.
bool space_at_end(std::string_view s, size_t& len);
bool space_at_start(std::string_view s, size_t& len);

std::string_view trim(std::string_view s) {
  size_t len;
  while (!s.empty() && space_at_start(s, len)) s.remove_prefix(len);
  while (!s.empty() && space_at_end(s, len)) s.remove_suffix(len);
  return s;
}

// Python's str.isspace() code points beyond ASCII, as UTF-8.
constexpr std::string_view kUnicodeSpaces[] = {
    "\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82",
    "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88",
    "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F",
    "\xE3\x80\x80"};

bool ascii_space(char c) {
  // str.isspace() in ASCII: \t \n \v \f \r, space, and the separators 0x1C..0x1F.
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F);
}

bool space_at_start(std::string_view s, size_t& len) {
  if (ascii_space(s[0])) return len = 1, true;
  for (std::string_view u : kUnicodeSpaces) {
    if (s.starts_with(u)) return len = u.size(), true;
  }
  return false;
}

bool space_at_end(std::string_view s, size_t& len) {
  if (ascii_space(s.back())) return len = 1, true;
  for (std::string_view u : kUnicodeSpaces) {
    if (s.ends_with(u)) return len = u.size(), true;
  }
  return false;
}

// The effort block at the top of the template: thinking on resolves the effort (default
// xhigh, "high" aliased to it) and picks the instruction; thinking off has none.
Result<std::string_view> reasoning_instruction(const ChatOptions& o) {
  if (!o.enable_thinking) return std::string_view{};
  std::string_view effort = o.reasoning_effort;
  if (effort.empty() || effort == "high") effort = "xhigh";
  if (effort == "xhigh") return kXHighInstruction;
  if (effort == "low") return kLowInstruction;
  if (effort == "medium") return std::string_view{};
  return Status::error(fmt::format(
      "chat: unexpected reasoning effort '{}' (supported: xhigh (default), high, medium, low)", o.reasoning_effort));
}

// The system turn: the effort instruction, then the tool block, then the first message's
// text when it is a system message.
Status render_system(std::span<const ChatMessage> messages, const ChatOptions& o, std::string& out) {
  Result<std::string_view> instruction = reasoning_instruction(o);
  if (!instruction) return instruction.status();
  std::string_view system = messages[0].role == "system" ? trim(messages[0].content) : std::string_view{};
  if (!o.tools.empty()) {
    out += "<|im_start|>system\n";
    if (!instruction->empty()) (out += *instruction) += "\n\n";
    out += kToolsPreamble;
    for (const Json& tool : o.tools) (out += '\n') += python_json_dumps(tool);
    out += kToolsRules;
    if (!system.empty()) (out += "\n\n") += system;
    out += "<|im_end|>\n";
  } else if (!system.empty() || !instruction->empty()) {
    out += "<|im_start|>system\n";
    out += *instruction;
    if (!instruction->empty() && !system.empty()) out += "\n\n";
    (out += system) += "<|im_end|>\n";
  }
  return Status::ok_status();
}

// The template's backward scan: the last user message that is not a wrapped tool result.
// Assistant turns after it keep their reasoning even when preserve_thinking is off.
Result<size_t> last_query_index(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role != "user") continue;
    std::string_view c = trim(messages[i].content);
    if (!(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) return i;
  }
  return Status::error("chat: no user query found in messages");
}

Status render_tool_calls(const ChatMessage& m, std::string_view content, std::string& out) {
  for (size_t j = 0; j < m.tool_calls.size(); ++j) {
    const ToolCall& call = m.tool_calls[j];
    if (call.name.empty()) return Status::error(fmt::format("chat: tool call {} has no function name", j));
    if (j > 0) {
      out += '\n';
    } else if (!content.empty()) {
      out += "\n\n";
    }
    (out += "<tool_call>\n<function=") += call.name;
    out += ">\n";
    if (call.arguments.is_object()) {
      for (const auto& [key, value] : call.arguments.items()) {
        (out += "<parameter=") += key;
        out += ">\n";
        out += value.is_string() ? value.get_ref<const std::string&>() : python_json_dumps(value);
        out += "\n</parameter>\n";
      }
    }
    out += "</function>\n</tool_call>";
  }
  return Status::ok_status();
}

}  // namespace

Result<std::string> render_chat(std::span<const ChatMessage> messages, const ChatOptions& o) {
  if (messages.empty()) return Status::error("chat: no messages provided");
  std::string out;
  STRATA_TRY(render_system(messages, o, out));
  Result<size_t> last_query = last_query_index(messages);
  if (!last_query) return last_query.status();

  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string_view content = trim(m.content);
    if (m.role == "system") {
      if (i != 0) return Status::error(fmt::format("chat: message {}: a system message must be at the beginning", i));
    } else if (m.role == "user") {
      ((out += "<|im_start|>user\n") += content) += "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant\n";
      if (o.preserve_thinking || i > *last_query) {
        std::string_view reasoning = m.reasoning_content ? trim(*m.reasoning_content) : std::string_view{};
        ((out += "<think>\n") += reasoning) += "\n</think>\n\n";
      }
      out += content;
      STRATA_TRY(render_tool_calls(m, content, out));
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      // A run of tool results is one user turn.
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      ((out += "\n<tool_response>\n") += content) += "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    } else {
      return Status::error(fmt::format("chat: message {}: unexpected role '{}'", i, m.role));
    }
  }
  if (o.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    out += o.enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n";
  }
  return out;
}

bool chat_template_is_family(std::string_view t) {
  for (std::string_view marker : {"<|im_start|>", "<think>", "<tool_call>", "<function=", "<parameter=",
                                  "<tool_response>"}) {
    if (t.find(marker) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace strata::model
