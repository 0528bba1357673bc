"""Tool calling on /v1/chat/completions (tools, tool_choice, message.tool_calls) end to end: `attnzoo serve` on a
tiny random Llama that carries Qwen2.5's chat template (which renders tools and Hermes <tool_call> blocks), driven
by the openai client.

A named tool_choice at temperature 1.0 over many seeds gives one call of that function whose arguments json.loads
and test_json_schema's independent validator passes against the function's parameters; the same requests with
tool_choice "auto" (free text from a random model) give no call at all, so the check can fail. "required" with two
tools calls both of them over the seeds (one or more calls per answer), each with arguments that validate against
that tool's parameters, and streams the same calls. A follow-up turn holding an assistant tool_calls message and a tool result is rendered as
transformers' apply_chat_template(messages, tools=tools) renders it: same prompt length and the same greedy answer
as the transformers model gives on transformers' ids. Bad tools are refused with a 400 naming the field."""
import json
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from test_chat_cli import SPECIALS, _hf_greedy_until, _write_checkpoint, needs_cli  # noqa: E402
from test_json_schema import valid  # noqa: E402

EOS, IM_END = 2, 4
HERE = os.path.dirname(__file__)
QWEN = open(os.path.join(HERE, "data", "chat_templates", "Qwen-Qwen2.5-7B-Instruct.jinja")).read()
WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "days": {"type": "integer"},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "hourly": {"type": "boolean"}},
    "required": ["city", "unit"]}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}, "required": ["zone"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a zone", "parameters": TIME}}]
TRAINING = [json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "celsius",
                                                             "hourly": True}}, indent=i) for i in (None, 2)]
SEEDS = 24
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def _tokenizer(special_tags=False):
    from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TRAINING * 50, trainer)
    # As in Qwen2.5's tokenizer: added tokens that are not special (they stay in decoded text); some checkpoints
    # mark them special, which the server must not drop from an "auto" answer.
    tok.add_tokens([AddedToken("<tool_call>", special=special_tags), AddedToken("</tool_call>", special=special_tags)])
    return tok


def _checkpoint(tmp_path_factory, special_tags=False):
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = _tokenizer(special_tags)
    torch.manual_seed(5)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
                      bos_token_id=1, eos_token_id=EOS, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    path = tmp_path_factory.mktemp("tool_llama")
    _write_checkpoint(path, model, tok, template=QWEN, eos_token="<|im_end|>")
    return str(path)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory)


@pytest.fixture(scope="module")
def server(checkpoint):
    from test_serve import ServerProcess
    s = ServerProcess(checkpoint, "--kv-cache-memory", str(64 << 20))
    yield s
    assert s.stop() == 0


@needs_cli
@pytest.mark.parametrize("special_tags", [False, True])
def test_auto_answers_keep_the_tag(tmp_path_factory, special_tags):
    """logit_bias forces <tool_call> three times: not a call (no JSON), so the answer is that text, also where the
    tag is a special token (which plain chat leaves out, as tool_choice "none" does)."""
    pytest.importorskip("openai")
    from test_serve import ServerProcess
    path = _checkpoint(tmp_path_factory, special_tags)
    tag = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json")).token_to_id("<tool_call>")
    s = ServerProcess(path, "--kv-cache-memory", str(64 << 20))
    try:
        client = s.client()
        for choice in ("auto", "none"):
            r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice=choice,
                                               max_tokens=3, temperature=0, logit_bias={str(tag): 100})
            c = r.choices[0]
            dropped = special_tags and choice == "none"
            assert c.message.content == ("" if dropped else "<tool_call>" * 3), (choice, c.message.content)
            assert c.finish_reason == "length" and not _calls(c)
    finally:
        assert s.stop() == 0


def _calls(choice):
    return choice.message.tool_calls or []


def _streamed(client, **kw):
    """One streamed chat answer gathered: its content, its calls (each call's deltas joined by index, as clients
    accumulate them: the first names it, the others add to its arguments) and its finish_reason."""
    from types import SimpleNamespace
    content, calls, reason = "", [], None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            content += ch.delta.content or ""
            for d in ch.delta.tool_calls or []:
                if d.index == len(calls):
                    calls.append(SimpleNamespace(index=d.index, id=d.id, type=d.type, function=SimpleNamespace(
                        name=d.function.name, arguments=d.function.arguments or "")))
                else:
                    calls[d.index].function.arguments += d.function.arguments or ""
            reason = ch.finish_reason or reason
    return content, calls, reason


@needs_cli
def test_named_tool_choice_gives_valid_calls(server):
    pytest.importorskip("openai")
    client = server.client()
    named = {"type": "function", "function": {"name": "get_weather"}}
    made, ids = 0, set()
    for seed in range(SEEDS):
        r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice=named,
                                           max_tokens=200, temperature=1.0, seed=seed)
        c = r.choices[0]
        if c.finish_reason == "length":
            assert not _calls(c) and c.message.content  # a cut call is no call: its text comes back as content
            continue
        assert c.finish_reason == "tool_calls", c
        calls = _calls(c)
        assert len(calls) == 1 and c.message.content is None
        assert calls[0].type == "function" and calls[0].function.name == "get_weather"
        assert calls[0].id.startswith("call_") and calls[0].id not in ids
        ids.add(calls[0].id)
        args = json.loads(calls[0].function.arguments)
        assert valid(args, WEATHER, WEATHER), (seed, args)
        made += 1
    assert made >= SEEDS // 2, f"only {made} of {SEEDS} calls finished"
    # The same requests left to the model ("auto"): a random model never writes a call of its own.
    for seed in range(SEEDS):
        r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, max_tokens=60,
                                           temperature=1.0, seed=seed)
        assert not _calls(r.choices[0]) and r.choices[0].finish_reason != "tool_calls"


@needs_cli
def test_required_tool_choice_and_streaming(server):
    pytest.importorskip("openai")
    client = server.client()
    names = set()
    # Which function a random model picks is up to its seed: past 8 seeds, more run until both were called.
    for seed in range(32):
        if seed >= 8 and names == {"get_weather", "get_time"}:
            break
        r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice="required",
                                           max_tokens=200, temperature=1.0, seed=seed)
        c = r.choices[0]
        if c.finish_reason == "length":
            continue
        assert c.finish_reason == "tool_calls" and len(_calls(c)) >= 1  # one or more, as vLLM's "required"
        for call in _calls(c):
            schema = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]
            assert valid(json.loads(call.function.arguments), schema, schema), (seed, call.function)
            names.add(call.function.name)
        # Streamed, the same seed gives the same calls, their arguments byte for byte.
        content, streamed, reason = _streamed(client, model="tiny", messages=QUESTION, tools=TOOLS,
                                              tool_choice="required", max_tokens=200, temperature=1.0, seed=seed)
        assert reason == "tool_calls" and content == ""
        assert [(t.function.name, t.function.arguments) for t in streamed] == \
            [(t.function.name, t.function.arguments) for t in _calls(c)]
    assert names == {"get_weather", "get_time"}, names


@needs_cli
def test_tool_result_turn_renders_as_transformers(server, checkpoint):
    pytest.importorskip("openai")
    from transformers import AutoTokenizer, LlamaForCausalLM
    messages = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}]
    # transformers' reference takes the arguments as an object, as vLLM hands them to the template.
    hf_messages = json.loads(json.dumps(messages))
    hf_messages[1]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris", "unit": "celsius"}
    tok = AutoTokenizer.from_pretrained(checkpoint)
    ids = tok.apply_chat_template(hf_messages, tools=TOOLS, add_generation_prompt=True, tokenize=True,
                                return_dict=False)
    text = tok.apply_chat_template(hf_messages, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert "<tool_response>" in text and '"name": "get_weather"' in text and "<tools>" in text
    model = LlamaForCausalLM.from_pretrained(checkpoint).eval()
    expected = tok.decode(_hf_greedy_until(model, ids, {EOS, IM_END}, 12), skip_special_tokens=True)
    client = server.client()
    for choice in ("none", "auto"):
        r = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, tool_choice=choice,
                                           max_tokens=12, temperature=0)
        assert r.usage.prompt_tokens == len(ids)
        assert r.choices[0].message.content == expected
    # Without tools= the prompt is another one (no <tools> block): the comparison above can fail.
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens != len(ids)


@needs_cli
@pytest.mark.parametrize("extra,param,message", [
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools", "tools[0].function.name"),
    ({"tools": [{"type": "code_interpreter"}]}, "tools", "tools[0]"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"d": {"type": "string", "format": "hostname"}}}}}]}, "tools",
     'tools[0].function.parameters at #/properties/d/format: format "hostname" is not supported'),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "nope"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice", "needs tools"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice",
     "response_format"),
    ({"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]}, "tools",
     "at most 128 tools, got 129"),
    ({"functions": [{"name": "f"}]}, "functions", "not supported"),
    ({"function_call": "auto"}, "function_call", "not supported"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {
        "name": "f", "arguments": "{not json"}}]}]}, "messages", "arguments"),
])
def test_bad_tool_requests_are_refused_by_name(server, extra, param, message):
    body = {"model": "tiny", "messages": QUESTION, "max_tokens": 2, **extra}
    status, text = server.raw("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    assert status == 400, text
    err = json.loads(text)["error"]
    assert err["param"] == param and message in err["message"], err
    status, text = server.raw("POST", "/v1/completions", json.dumps({"model": "tiny", "prompt": "hi", "tools": TOOLS}),
                              {"Content-Type": "application/json"})
    assert status == 400 and json.loads(text)["error"]["param"] == "tools", text
