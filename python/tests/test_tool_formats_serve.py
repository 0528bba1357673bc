"""The Llama 3.x JSON and Mistral [TOOL_CALLS] tool-call formats end to end: `attnzoo serve` on tiny random Llamas
that carry the published Llama-3.1-8B-Instruct and Mistral-7B-Instruct-v0.3 chat templates (their special tokens
special in the tokenizer, as in the real ones), driven by the openai client.

A named tool_choice at temperature 1.0 over many seeds gives one call of that function whose arguments json.loads
and test_json_schema's independent validator passes against the function's parameters; Mistral's call ids are 9
letters and digits (its template refuses any other id). The next turn, holding that call and a tool result, is
rendered as transformers' apply_chat_template(messages, tools=tools) renders it: the same prompt length and the
same greedy answer and the same first-token log-probabilities as the transformers model gives on transformers'
ids. "auto" answers that are no call stay
content (a forced <|python_tag|> / [TOOL_CALLS] special token included). serve --tool-call-parser is refused for a
template that renders no tools."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from test_chat_cli import CHATML, _hf_greedy_until, needs_cli  # noqa: E402
from test_json_schema import valid  # noqa: E402
from test_tool_calls_serve import TIME, TOOLS, WEATHER, _calls, _streamed  # noqa: E402

HERE = os.path.dirname(__file__)
TEMPLATES = os.path.join(HERE, "data", "chat_templates")
SEEDS = 16
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
CALL = {"city": "Paris", "days": 3, "unit": "celsius", "hourly": True}

LLAMA = {
    "template": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "specials": ["<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                 "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"],
    "bos": "<|begin_of_text|>", "eos": "<|eot_id|>", "marker": "<|python_tag|>",
    "training": [json.dumps({"name": "get_weather", "parameters": CALL}, indent=i) for i in (None, 4)],
}
MISTRAL = {
    "template": "mistralai-Mistral-7B-Instruct-v0.3.jinja",
    "specials": ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                 "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
    "bos": "<s>", "eos": "</s>", "marker": "[TOOL_CALLS]",
    "training": [json.dumps([{"name": "get_weather", "arguments": CALL}])],
}


def _checkpoint(directory, fmt):
    """A tiny random Llama in `directory` whose tokenizer has fmt's special tokens and chat template (also the
    section and pythonic formats' checkpoint, test_tool_sections_serve)."""
    from tokenizers import decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=fmt["specials"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(fmt["training"] * 50, trainer)
    bos, eos = tok.token_to_id(fmt["bos"]), tok.token_to_id(fmt["eos"])
    torch.manual_seed(7)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
                      bos_token_id=bos, eos_token_id=eos, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).eval().save_pretrained(directory)
    tok.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(TEMPLATES, fmt["template"]), encoding="utf-8") as f:
        template = f.read()
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"chat_template": template, "bos_token": fmt["bos"], "eos_token": fmt["eos"],
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    return str(directory)


@pytest.fixture(scope="module", params=["llama3_json", "mistral"])
def served(request, tmp_path_factory):
    pytest.importorskip("openai")
    from test_serve import ServerProcess
    fmt = LLAMA if request.param == "llama3_json" else MISTRAL
    path = _checkpoint(tmp_path_factory.mktemp(request.param), fmt)
    s = ServerProcess(path, "--kv-cache-memory", str(64 << 20))
    yield request.param, fmt, path, s
    assert s.stop() == 0


def _check_id(name, call_id):
    if name == "mistral":
        assert len(call_id) == 9 and call_id.isalnum() and call_id.isascii(), call_id
    else:
        assert call_id.startswith("call_"), call_id


@needs_cli
def test_named_and_required_choices_give_valid_calls(served):
    name, _, _, server = served
    client = server.client()
    made, ids = 0, set()
    for seed in range(SEEDS):
        r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice=NAMED,
                                           max_tokens=200, temperature=1.0, seed=seed)
        c = r.choices[0]
        if c.finish_reason == "length":
            assert not _calls(c) and c.message.content
            continue
        assert c.finish_reason == "tool_calls", c
        calls = _calls(c)
        assert len(calls) == 1 and c.message.content is None
        assert calls[0].function.name == "get_weather"
        _check_id(name, calls[0].id)
        assert calls[0].id not in ids
        ids.add(calls[0].id)
        args = json.loads(calls[0].function.arguments)
        assert valid(args, WEATHER, WEATHER), (seed, args)
        made += 1
    assert made >= SEEDS // 2, f"only {made} of {SEEDS} calls finished"
    names = set()
    for seed in range(32):
        if names == {"get_weather", "get_time"}:
            break
        r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice="required",
                                           max_tokens=200, temperature=1.0, seed=seed)
        c = r.choices[0]
        if c.finish_reason == "length":
            continue
        for call in _calls(c):  # one or more, as vLLM's "required"
            schema = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]
            assert valid(json.loads(call.function.arguments), schema, schema), (seed, call.function)
            names.add(call.function.name)
        content, streamed, reason = _streamed(client, model="tiny", messages=QUESTION, tools=TOOLS,
                                              tool_choice="required", max_tokens=200, temperature=1.0, seed=seed)
        assert content == "" and reason == "tool_calls"
        assert [(t.function.name, t.function.arguments) for t in streamed] == \
            [(t.function.name, t.function.arguments) for t in _calls(c)]
        for t in streamed:
            _check_id(name, t.id)
    assert names == {"get_weather", "get_time"}, names


@needs_cli
def test_auto_answers_without_a_call_are_content(served):
    """A random model writes no call of its own; logit_bias forcing the format's special marker gives an answer
    that begins like calls but holds none, so it comes back whole as content, the marker kept."""
    _, fmt, path, server = served
    client = server.client()
    for seed in range(8):
        r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, max_tokens=30,
                                           temperature=1.0, seed=seed)
        assert not _calls(r.choices[0]) and r.choices[0].finish_reason != "tool_calls"
    marker = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json")).token_to_id(fmt["marker"])
    for stream in (False, True):
        kw = dict(model="tiny", messages=QUESTION, tools=TOOLS, max_tokens=3, temperature=0,
                  logit_bias={str(marker): 100})
        if stream:
            content, calls, reason = _streamed(client, **kw)
            assert not calls
        else:
            c = client.chat.completions.create(**kw).choices[0]
            assert not _calls(c)
            content, reason = c.message.content, c.finish_reason
        assert content == fmt["marker"] * 3 and reason == "length", (stream, content)


@needs_cli
def test_tool_result_turn_renders_as_transformers(served):
    """The call the server made, sent back with a tool result, renders as transformers renders it (Mistral's
    template raises on an id that is not 9 characters long, so the server's ids must be usable as they are)."""
    name, fmt, path, server = served
    from transformers import AutoTokenizer, LlamaForCausalLM
    client = server.client()
    call = None
    for seed in range(SEEDS):
        c = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice=NAMED,
                                           max_tokens=200, temperature=1.0, seed=seed).choices[0]
        if c.finish_reason == "tool_calls":
            call = _calls(c)[0]
            break
    assert call is not None
    messages = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "{\"temp\": 21}"}]
    hf_messages = json.loads(json.dumps(messages))
    hf_messages[1]["tool_calls"][0]["function"]["arguments"] = json.loads(call.function.arguments)
    tok = AutoTokenizer.from_pretrained(path)
    ids = tok.apply_chat_template(hf_messages, tools=TOOLS, add_generation_prompt=True, tokenize=True,
                                return_dict=False)
    text = tok.apply_chat_template(hf_messages, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    if name == "mistral":
        assert "[TOOL_CALLS] [" in text and f'"id": "{call.id}"' in text and "[TOOL_RESULTS]" in text
    else:
        assert '{"name": "get_weather", "parameters": ' in text and "ipython<|end_header_id|>" in text
    model = LlamaForCausalLM.from_pretrained(path).eval()
    eos = {tok.convert_tokens_to_ids(fmt["eos"])}
    expected = tok.decode(_hf_greedy_until(model, ids, eos, 12), skip_special_tokens=True)
    with torch.no_grad():
        first = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1).topk(5).values.tolist()
    for choice in ("none", "auto"):
        r = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, tool_choice=choice,
                                           max_tokens=12, temperature=0, logprobs=True, top_logprobs=5)
        assert r.usage.prompt_tokens == len(ids)
        # The first token's distribution on a random model moves with any prompt id: the prompts are the same ids.
        ours = sorted((t.logprob for t in r.choices[0].logprobs.content[0].top_logprobs), reverse=True)
        assert ours == pytest.approx(first, abs=2e-5), (ours, first)  # a one-digit change moves it 5e-4
        if choice == "none":
            assert r.choices[0].message.content == expected
    r = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens != len(tok.apply_chat_template(QUESTION, tools=TOOLS, add_generation_prompt=True))
    if name == "mistral":
        # Another server's id: Mistral's template refuses it, a 400 naming messages and the template's reason.
        messages[1]["tool_calls"][0]["id"] = messages[2]["tool_call_id"] = "call_1"
        status, text = server.raw("POST", "/v1/chat/completions",
                                  json.dumps({"model": "tiny", "messages": messages, "tools": TOOLS, "max_tokens": 2}),
                                  {"Content-Type": "application/json"})
        err = json.loads(text)["error"]
        assert status == 400 and err["param"] == "messages" and "length 9" in err["message"], text


@needs_cli
def test_tool_call_parser_flag(tmp_path):
    from test_serve import CLI
    # A ChatML template renders no tools: the flag is refused at start-up, naming itself and the model.
    path = _checkpoint(tmp_path, LLAMA)
    with open(os.path.join(path, "tokenizer_config.json")) as f:
        config = json.load(f)
    config["chat_template"] = CHATML
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    r = subprocess.run([CLI, "serve", "-m", path, "--port", "0", "--tool-call-parser", "llama3_json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--tool-call-parser llama3_json" in r.stderr and path in r.stderr, r.stderr
    r = subprocess.run([CLI, "serve", "-m", path, "--tool-call-parser", "granite"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "--tool-call-parser" in r.stderr and "granite" in r.stderr, r.stderr
