// Chat formatting for the Qwen3.5/3.8 family: a native renderer that produces exactly what
// the family's Jinja chat template (tokenizer.chat_template) produces, and the reader of the
// model's replies (<think> reasoning, <tool_call> blocks).
//
// The prompt the model sees (ChatML with thinking; spec/gguf-layout.md §6):
//
//   <|im_start|>system\n[effort instruction\n\n][# Tools ... </IMPORTANT>][\n\n]system<|im_end|>\n
//   <|im_start|>user\n...<|im_end|>\n
//   <|im_start|>assistant\n<think>\nreasoning\n</think>\n\ncontent
//       [\n\n]<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call><|im_end|>\n
//   <|im_start|>user\n<tool_response>\nRESULT\n</tool_response><|im_end|>\n   (tool turns, runs merged)
//   <|im_start|>assistant\n<think>\n                                          (generation prompt)
//
// It is checked character for character against the template rendered by jinja2 with
// HF transformers' environment (tests/oracle/test_chat_template.py). The template in the
// GGUF is not interpreted: a fine-tune that ships a different template needs this file
// changed (chat_template_is_family() tells whether the GGUF's template looks like ours).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/common/status.h"

namespace strata::model {

using Json = nlohmann::ordered_json;  // ordered: parameters and tool fields keep their order

struct ToolCall {
  std::string name;
  Json arguments = Json::object();  // one <parameter=...> per key, in order
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_, std::optional<std::string> reasoning = std::nullopt,
              std::vector<ToolCall> calls = {})
      : role(std::move(role_)), content(std::move(content_)), reasoning_content(std::move(reasoning)),
        tool_calls(std::move(calls)) {}

  std::string role;     // "system" (first only), "user", "assistant", "tool"
  std::string content;  // text; the template trims it
  std::optional<std::string> reasoning_content;  // assistant: the <think> text
  std::vector<ToolCall> tool_calls;              // assistant
};

struct ChatOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;
  // "" is the template's default (xhigh); "high" is its alias for xhigh; "medium" adds no
  // instruction; "low" adds the brief-thinking one. Only read when thinking is on.
  std::string reasoning_effort;
  // Keep <think> blocks of assistant turns before the last user query (the 3.8 default).
  bool preserve_thinking = true;
  std::vector<Json> tools;  // OpenAI-style definitions, written with tojson
};

// The prompt text. Errors are the template's own raise_exception cases: no messages, no
// user query, a system message that is not first, an unknown role or effort, a tool call
// without a name.
Result<std::string> render_chat(std::span<const ChatMessage> messages, const ChatOptions& options);

// A request in JSON: {"messages": [...], "tools": [...], "add_generation_prompt": bool,
// "enable_thinking": bool, "reasoning_effort": str, "preserve_thinking": bool}. Message
// content may be a string, null, or a list of {"type": "text", "text": ...} parts; tool
// call arguments may be an object or a JSON string holding one (OpenAI's form).
struct ChatRequest {
  std::vector<ChatMessage> messages;
  ChatOptions options;
};
Result<ChatRequest> chat_request_from_json(const Json& request);

// What the model wrote after the generation prompt, split into its parts.
struct AssistantReply {
  std::string reasoning;             // trimmed, as the template would store it
  std::string content;               // trimmed, without the tool calls
  std::vector<ToolCall> tool_calls;  // parsed <tool_call> blocks, in order
  bool reasoning_closed = false;     // </think> was seen (false: the reply was cut short)
};

// `thinking_open`: the prompt ended inside <think> (enable_thinking with a generation
// prompt), so the reply starts with reasoning. Parameter values are typed by the tool's
// JSON schema when `tools` has it (a "string" property stays text); otherwise a value
// that parses as JSON is taken as JSON, and anything else as text.
AssistantReply parse_assistant_reply(std::string_view text, bool thinking_open,
                                     std::span<const Json> tools = {});

// Python's json.dumps(value, ensure_ascii=False): ", " and ": " separators, keys in order,
// non-ASCII kept, floats as repr() writes them. This is what the template's tojson gives.
std::string python_json_dumps(const Json& value);

// True when a GGUF chat template has this family's markers (ChatML turns, <think>, the XML
// tool-call format), so that render_chat's output is the model's expected prompt.
bool chat_template_is_family(std::string_view chat_template);

}  // namespace strata::model
