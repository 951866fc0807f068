// Chat rendering on hand-checked cases, the reply parser, and Python-compatible JSON. The
// full comparison with the Jinja template over many conversations is the oracle suite's
// job (tests/oracle/test_chat_template.py).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strata/model/chat.h"

namespace strata::model {
namespace {

std::string render(const std::vector<ChatMessage>& m, const ChatOptions& o) {
  Result<std::string> r = render_chat(m, o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r : std::string();
}

TEST(Chat, ThinkingOffNoSystem) {
  ChatOptions o;
  o.enable_thinking = false;
  EXPECT_EQ(render({{"user", "Hi"}}, o),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(Chat, EffortLevels) {
  ChatOptions o;  // thinking on, default effort xhigh
  std::string xhigh = render({{"system", " Be terse. "}, {"user", "Hi"}}, o);
  EXPECT_TRUE(xhigh.starts_with("<|im_start|>system\nReasoning effort is set to xhigh."));
  EXPECT_NE(xhigh.find("final answer.\n\nBe terse.<|im_end|>\n"), std::string::npos);
  EXPECT_TRUE(xhigh.ends_with("<|im_start|>assistant\n<think>\n"));
  o.reasoning_effort = "high";
  EXPECT_EQ(render({{"user", "Hi"}}, o).substr(0, 60), render({{"user", "Hi"}}, ChatOptions{}).substr(0, 60));
  o.reasoning_effort = "medium";
  EXPECT_EQ(render({{"user", "Hi"}}, o), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  o.reasoning_effort = "low";
  EXPECT_NE(render({{"user", "Hi"}}, o).find("Reasoning effort is set to low."), std::string::npos);
  o.reasoning_effort = "max";
  EXPECT_FALSE(render_chat(std::vector<ChatMessage>{{"user", "Hi"}}, o).ok());
}

TEST(Chat, AssistantHistoryAndPreserveThinking) {
  ChatOptions o;
  o.reasoning_effort = "medium";
  o.add_generation_prompt = false;
  std::vector<ChatMessage> m = {{"user", "First"},
                                {"assistant", "Old answer", std::string("old trace")},
                                {"user", "Second"},
                                {"assistant", "New answer", std::string(" new trace\n")}};
  EXPECT_EQ(render(m, o),
            "<|im_start|>user\nFirst<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nold trace\n</think>\n\nOld answer<|im_end|>\n"
            "<|im_start|>user\nSecond<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nnew trace\n</think>\n\nNew answer<|im_end|>\n");
  o.preserve_thinking = false;
  std::string dropped = render(m, o);
  EXPECT_EQ(dropped.find("old trace"), std::string::npos);
  EXPECT_NE(dropped.find("<|im_start|>assistant\nOld answer<|im_end|>"), std::string::npos);
  EXPECT_NE(dropped.find("new trace"), std::string::npos);
}

TEST(Chat, ToolCallsAndResults) {
  ChatOptions o;
  o.enable_thinking = false;
  o.tools.push_back(Json::parse(R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}})"));
  ChatMessage call{"assistant", "", std::nullopt, {}};
  call.tool_calls.push_back({"get_weather", Json::parse(R"({"city":"Paris","days":3,"opts":{"u":"C"}})")});
  call.tool_calls.push_back({"get_weather", Json::parse(R"({"city":"Oslo"})")});
  std::vector<ChatMessage> m = {{"user", "Weather?"}, call, {"tool", "sunny"}, {"tool", "rain"}};
  std::string out = render(m, o);
  EXPECT_NE(out.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                     "\"parameters\": {\"type\": \"object\"}}}\n</tools>"),
            std::string::npos);
  EXPECT_NE(out.find("<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=get_weather>\n"
                     "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
                     "<parameter=opts>\n{\"u\": \"C\"}\n</parameter>\n</function>\n</tool_call>\n<tool_call>"),
            std::string::npos);
  EXPECT_NE(out.find("<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n"
                     "</tool_response><|im_end|>\n"),
            std::string::npos);
}

TEST(Chat, TemplateErrors) {
  ChatOptions o;
  EXPECT_FALSE(render_chat(std::vector<ChatMessage>{}, o).ok());
  EXPECT_FALSE(render_chat(std::vector<ChatMessage>{{"assistant", "x"}}, o).ok());  // no user query
  EXPECT_FALSE(render_chat(std::vector<ChatMessage>{{"user", "a"}, {"system", "b"}}, o).ok());
  EXPECT_FALSE(render_chat(std::vector<ChatMessage>{{"robot", "a"}, {"user", "b"}}, o).ok());
}

TEST(ChatReply, ReasoningContentAndToolCalls) {
  std::vector<Json> tools = {Json::parse(R"({"type":"function","function":{"name":"f","parameters":{
      "type":"object","properties":{"zip":{"type":"string"},"n":{"type":"integer"}}}}})")};
  AssistantReply r = parse_assistant_reply(
      "Let me think.\n</think>\n\nCalling.\n\n<tool_call>\n<function=f>\n<parameter=zip>\n02139\n</parameter>\n"
      "<parameter=n>\n5\n</parameter>\n<parameter=x>\n{\"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>",
      /*thinking_open=*/true, tools);
  EXPECT_EQ(r.reasoning, "Let me think.");
  EXPECT_TRUE(r.reasoning_closed);
  EXPECT_EQ(r.content, "Calling.");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "f");
  EXPECT_EQ(r.tool_calls[0].arguments["zip"], "02139");  // schema says string
  EXPECT_EQ(r.tool_calls[0].arguments["n"], 5);
  EXPECT_EQ(r.tool_calls[0].arguments["x"], Json::parse(R"({"a":[1,2]})"));

  AssistantReply cut = parse_assistant_reply("still thinking", true);
  EXPECT_FALSE(cut.reasoning_closed);
  EXPECT_EQ(cut.reasoning, "still thinking");

  AssistantReply plain = parse_assistant_reply("<think>\nhm\n</think>\n\nHello", false);
  EXPECT_EQ(plain.reasoning, "hm");
  EXPECT_EQ(plain.content, "Hello");
  AssistantReply multi = parse_assistant_reply(
      "<tool_call>\n<function=a>\n<parameter=t>\nline 1\nline 2\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=b>\n</function>\n</tool_call>",
      false);
  ASSERT_EQ(multi.tool_calls.size(), 2u);
  EXPECT_EQ(multi.tool_calls[0].arguments["t"], "line 1\nline 2");
  EXPECT_EQ(multi.tool_calls[1].name, "b");
}

TEST(ChatReply, RenderParseRoundTrip) {
  ChatOptions o;
  o.add_generation_prompt = false;
  o.reasoning_effort = "medium";
  ChatMessage a{"assistant", "Sure.", std::string("plan"), {}};
  a.tool_calls.push_back({"run", Json::parse(R"({"cmd":"ls -la","flags":[1,2.5,true,null]})")});
  std::string rendered = render({{"user", "go"}, a}, o);
  std::string prefix = "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n<think>\n";
  ASSERT_TRUE(rendered.starts_with(prefix));
  std::string reply = rendered.substr(prefix.size(), rendered.size() - prefix.size() - std::string("<|im_end|>\n").size());
  AssistantReply r = parse_assistant_reply(reply, true);
  ChatMessage back{"assistant", r.content, r.reasoning, r.tool_calls};
  EXPECT_EQ(render({{"user", "go"}, back}, o), rendered);
}

TEST(PythonJson, MatchesJsonDumps) {
  // Expected strings are Python 3.11's json.dumps(value, ensure_ascii=False).
  EXPECT_EQ(python_json_dumps(Json::parse(R"({"b":1,"a":[true,false,null],"s":"\u00e9\n\"\u0001"})")),
            "{\"b\": 1, \"a\": [true, false, null], \"s\": \"\xC3\xA9\\n\\\"\\u0001\"}");
  EXPECT_EQ(python_json_dumps(Json(1.0)), "1.0");
  EXPECT_EQ(python_json_dumps(Json(0.1)), "0.1");
  EXPECT_EQ(python_json_dumps(Json(1e16)), "1e+16");
  EXPECT_EQ(python_json_dumps(Json(1e15)), "1000000000000000.0");
  EXPECT_EQ(python_json_dumps(Json(1.5e-5)), "1.5e-05");
  EXPECT_EQ(python_json_dumps(Json(0.0001)), "0.0001");
  EXPECT_EQ(python_json_dumps(Json(-2.5)), "-2.5");
  EXPECT_EQ(python_json_dumps(Json(123456789.125)), "123456789.125");
  EXPECT_EQ(python_json_dumps(Json(-7)), "-7");
  EXPECT_EQ(python_json_dumps(Json::object()), "{}");
  EXPECT_EQ(python_json_dumps(Json::array()), "[]");
}

}  // namespace
}  // namespace strata::model
