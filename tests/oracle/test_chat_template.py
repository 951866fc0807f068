"""Strata's native chat renderer against the family's Jinja template rendered by jinja2.

The template (chat_template_qwen38.jinja) is rendered the way HF transformers renders
tokenizer.chat_template: a sandboxed jinja2 environment with trim_blocks and lstrip_blocks,
loop controls, raise_exception, and tojson as json.dumps(ensure_ascii=False). Keyword
arguments are passed only when a conversation sets them, so the template sees them
undefined otherwise, as it does in apply_chat_template. `strata tokenize --chat REQ --text`
must print the same text for every conversation, and fail where the template raises.
"""
import json

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

import tokenizer_fixture as fx
from conftest import REPO, run_strata

TEMPLATE = (REPO / "tests" / "oracle" / "chat_template_qwen38.jinja").read_text()


def render_jinja(messages, tools=None, add_generation_prompt=True, **kwargs):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(TEMPLATE).render(messages=messages, tools=tools,
                                            add_generation_prompt=add_generation_prompt, **kwargs)


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city; returns °C.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
        "days": {"type": "integer"}, "units": {"type": "string", "enum": ["C", "F"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web.\nReturns <html> snippets & links.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"},
                                                    "filters": {"type": "object"}}}}}
RUN = {"type": "function", "function": {"name": "run_python", "parameters": {
    "type": "object", "properties": {"code": {"type": "string"}, "timeout": {"type": "number"}}}}}


def call(name, args, wrap=True):
    c = {"name": name, "arguments": args}
    return {"type": "function", "function": c} if wrap else c


U = lambda text: {"role": "user", "content": text}  # noqa: E731
A = lambda text, **kw: {"role": "assistant", "content": text, **kw}  # noqa: E731
S = lambda text: {"role": "system", "content": text}  # noqa: E731
T = lambda text: {"role": "tool", "content": text}  # noqa: E731

# (name, messages, tools, kwargs)
CONVERSATIONS = [
    ("single_default", [U("Hello!")], None, {}),
    ("thinking_off", [U("Hello!")], None, {"enable_thinking": False}),
    ("thinking_on_explicit", [U("Hello!")], None, {"enable_thinking": True}),
    ("effort_low", [U("Sum 2+2")], None, {"reasoning_effort": "low"}),
    ("effort_medium", [U("Sum 2+2")], None, {"reasoning_effort": "medium"}),
    ("effort_high_alias", [U("Sum 2+2")], None, {"reasoning_effort": "high"}),
    ("effort_xhigh", [U("Sum 2+2")], None, {"reasoning_effort": "xhigh"}),
    ("effort_ignored_when_off", [U("Hi")], None, {"enable_thinking": False, "reasoning_effort": "low"}),
    ("system_prompt", [S("You are a helpful assistant."), U("Hi")], None, {}),
    ("system_medium", [S("  Be terse.\n"), U("Hi")], None, {"reasoning_effort": "medium"}),
    ("system_thinking_off", [S("Be terse."), U("Hi")], None, {"enable_thinking": False}),
    ("empty_system", [S("   "), U("Hi")], None, {"reasoning_effort": "medium"}),
    ("multi_turn_reasoning",
     [U("What is 7*6?"), A("42.", reasoning_content="7*6 = 42"), U("And 6*7?"), A("Also 42.", reasoning_content=" same \n")],
     None, {"add_generation_prompt": False}),
    ("multi_turn_generation",
     [S("Math tutor."), U("What is 7*6?"), A("42.", reasoning_content="7*6 = 42"), U("Why?")], None, {}),
    ("preserve_false",
     [U("First"), A("Old answer", reasoning_content="old trace"), U("Second"), A("New", reasoning_content="new trace")],
     None, {"preserve_thinking": False, "add_generation_prompt": False}),
    ("preserve_true_explicit",
     [U("First"), A("Old answer", reasoning_content="old trace"), U("Second")], None, {"preserve_thinking": True}),
    ("history_without_reasoning", [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke")], None,
     {"enable_thinking": False}),
    ("think_markup_in_content", [U("Q"), A("<think>literal</think>Visible")], None, {"add_generation_prompt": False}),
    ("tools_no_calls", [U("Weather in Paris?")], [WEATHER], {}),
    ("tools_with_system", [S("Use tools when needed."), U("Weather in Paris?")], [WEATHER, SEARCH],
     {"reasoning_effort": "low"}),
    ("tools_thinking_off", [U("Weather in Paris?")], [WEATHER], {"enable_thinking": False}),
    ("tool_call_and_result",
     [U("Weather in Paris?"), A("", tool_calls=[call("get_weather", {"city": "Paris", "days": 3})]),
      T('{"temp": 21.5, "sky": "clear"}')], [WEATHER], {}),
    ("tool_call_with_content",
     [U("Weather in Zürich?"), A("Let me check.", reasoning_content="need the tool",
                                 tool_calls=[call("get_weather", {"city": "Zürich", "units": "C"})]),
      T("18 °C, rain"), A("It is 18 °C and raining in Zürich.")], [WEATHER], {"add_generation_prompt": False}),
    ("parallel_calls_and_results",
     [U("Weather in Oslo and Rome?"),
      A(None, tool_calls=[call("get_weather", {"city": "Oslo"}), call("get_weather", {"city": "Rome", "days": 2})]),
      T("Oslo: 3 °C"), T("Rome: 19 °C")], [WEATHER], {"enable_thinking": False}),
    ("argument_types",
     [U("Search"), A("", tool_calls=[call("search", {
         "query": "line one\nline two <b>&amp;</b>", "limit": 2.5, "exact": True, "cursor": None,
         "tags": ["a", "ü", 3], "filters": {"lang": "日本語", "min": 1e-5, "max": 1e16, "n": -7}})]),
      T("[]")], [SEARCH], {}),
    ("unwrapped_call",
     [U("Run it"), A("", tool_calls=[call("run_python", {"code": "print('hi')", "timeout": 10}, wrap=False)]),
      T("hi\n")], [RUN], {"reasoning_effort": "medium"}),
    ("multi_step_tools",
     [U("Find and run"), A("", reasoning_content="search first", tool_calls=[call("search", {"query": "x"})]),
      T("found code"), A("", reasoning_content="now run", tool_calls=[call("run_python", {"code": "1+1"})]),
      T("2")], [SEARCH, RUN], {"preserve_thinking": False}),
    ("wrapped_tool_response_user",
     [U("Go"), A("", tool_calls=[call("search", {"query": "q"})]),
      U("<tool_response>\nresult\n</tool_response>"), A("Done", reasoning_content="r")],
     [SEARCH], {"preserve_thinking": False, "add_generation_prompt": False}),
    ("content_parts",
     [S([{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two."}]),
      U([{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}])], None, {}),
    ("unicode_content", [S("Réponds en français 🇫🇷"), U("你好，世界！ مرحبا 👨‍👩‍👧 café\u0301")], None,
     {"reasoning_effort": "low"}),
    ("whitespace_trim", [U("\u3000 padded \x1c\n"), A("\t answer \u00a0", reasoning_content="\n\n think \n")], None,
     {"add_generation_prompt": False, "enable_thinking": False}),
    ("no_generation_prompt", [U("Hi"), A("Hello")], None, {"add_generation_prompt": False}),
    ("long_conversation",
     [S("sys")] + [m for i in range(6) for m in (U(f"question {i}"), A(f"answer {i}", reasoning_content=f"r{i}"))]
     + [U("last")], None, {"preserve_thinking": False}),
    ("empty_user", [U("")], None, {"enable_thinking": False}),
    ("assistant_prefill_style", [U("Hi"), A("Partial", reasoning_content="x")], None,
     {"add_generation_prompt": False, "reasoning_effort": "medium"}),
]

ERRORS = [
    ("no_messages", [], None, {}),
    ("system_not_first", [U("a"), S("b")], None, {}),
    ("no_user_query", [S("sys"), A("x")], None, {}),
    ("bad_effort", [U("a")], None, {"reasoning_effort": "max"}),
    ("unknown_role", [{"role": "robot", "content": "x"}, U("a")], None, {}),
    ("call_without_name", [U("a"), A("", tool_calls=[{"function": {"name": "", "arguments": {}}}])], None, {}),
]


def request_json(messages, tools, kwargs):
    req = {"messages": messages, "add_generation_prompt": kwargs.get("add_generation_prompt", True)}
    if tools is not None:
        req["tools"] = tools
    for key in ("enable_thinking", "reasoning_effort", "preserve_thinking"):
        if key in kwargs:
            req[key] = kwargs[key]
    return req


def strata_render(strata_bin, tmp_path, name, messages, tools, kwargs, check=True):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(request_json(messages, tools, kwargs), ensure_ascii=False), encoding="utf-8")
    return run_strata(strata_bin, "tokenize", "--chat", path, "--text", check=check)


def test_there_are_at_least_30_conversations():
    assert len(CONVERSATIONS) >= 30


@pytest.mark.parametrize("name,messages,tools,kwargs", CONVERSATIONS, ids=[c[0] for c in CONVERSATIONS])
def test_render_matches_jinja(strata_bin, tmp_path, name, messages, tools, kwargs):
    expected = render_jinja(messages, tools, **kwargs)
    got = strata_render(strata_bin, tmp_path, name, messages, tools, kwargs).stdout
    assert got == expected


@pytest.mark.parametrize("name,messages,tools,kwargs", ERRORS, ids=[c[0] for c in ERRORS])
def test_template_errors_are_errors(strata_bin, tmp_path, name, messages, tools, kwargs):
    with pytest.raises(jinja2.exceptions.TemplateError):
        render_jinja(messages, tools, **kwargs)
    proc = strata_render(strata_bin, tmp_path, name, messages, tools, kwargs, check=False)
    assert proc.returncode != 0 and "chat:" in proc.stderr


def test_rendered_prompt_tokenizes_like_hf(strata_bin, tmp_path):
    """The rendered prompt through the tokenizer: control tokens become single ids."""
    tok, gguf_path = fx.trained_fixture()
    for name, messages, tools, kwargs in CONVERSATIONS[::5]:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(request_json(messages, tools, kwargs)), encoding="utf-8")
        out = json.loads(run_strata(strata_bin, "tokenize", "-m", gguf_path, "--chat", path, "--json").stdout)
        assert out["ids"] == tok.encode(render_jinja(messages, tools, **kwargs)).ids, name


def test_openai_string_arguments_are_parsed(strata_bin, tmp_path):
    """OpenAI clients send arguments as a JSON string; Strata renders them as the object."""
    messages = [U("Weather?"), A("", tool_calls=[call("get_weather", {"city": "Paris", "days": 2})]), T("sunny")]
    as_string = json.loads(json.dumps(messages))
    as_string[1]["tool_calls"][0]["function"]["arguments"] = json.dumps({"city": "Paris", "days": 2})
    expected = render_jinja(messages, [WEATHER])
    got = strata_render(strata_bin, tmp_path, "string_args", as_string, [WEATHER], {}).stdout
    assert got == expected


def test_jinja_environment_is_transformers(strata_bin, tmp_path):
    """The jinja2 environment above renders as HF transformers' apply_chat_template does, so the
    comparison is with what transformers would give the model."""
    transformers = pytest.importorskip("transformers")
    tok, _ = fx.trained_fixture()
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok)
    for name, messages, tools, kwargs in CONVERSATIONS:
        kw = dict(kwargs)
        agp = kw.pop("add_generation_prompt", True)
        expected = hf.apply_chat_template(messages, tools=tools, chat_template=TEMPLATE, tokenize=False,
                                          add_generation_prompt=agp, **kw)
        assert render_jinja(messages, tools, **kwargs) == expected, name
