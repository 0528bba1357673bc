"""Reasoning separated from the answer (`attnzoo serve --reasoning-parser qwen3|deepseek_r1`, vLLM's flag) end to
end: a tiny random Llama carrying Qwen3's chat template, whose vocabulary has <think> / </think> as added tokens,
driven by the openai client.

logit_bias makes both tags likely at temperature 1, so over the seeds the answers open, close, never close and
re-open blocks at random places. Each answer's raw text comes from /v1/completions on transformers'
apply_chat_template ids with the same seed (which the reasoning parser never touches), is split by `_split` below
(vLLM's rules written again in Python), and must equal message.reasoning_content / message.content; the streamed
deltas must add up to the same. chat_template_kwargs {"enable_thinking": false} renders as transformers'
apply_chat_template(..., enable_thinking=False) does (same prompt length, same greedy answer on transformers' ids).
The flag is refused for a model that knows no </think>, bad fields with a 400 naming them. `attnzoo chat
--reasoning-parser qwen3 --hide-thinking` prints the content of the same split of its greedy answer, and
Model.chat(reasoning_parser=...) returns serve's message fields for the same greedy answer."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from test_chat_cli import CLI, chat_cli_answer, SPECIALS, _hf_greedy_until, _write_checkpoint, needs_cli  # noqa: E402

pytestmark = needs_cli
EOS, IM_END = 2, 4
HERE = os.path.dirname(__file__)
QWEN3 = open(os.path.join(HERE, "data", "chat_templates", "Qwen-Qwen3-0.6B.jinja")).read()
QWEN25 = open(os.path.join(HERE, "data", "chat_templates", "Qwen-Qwen2.5-7B-Instruct.jinja")).read()
QUESTION = [{"role": "user", "content": "What is two plus two?"}]
SEEDS = 24


def _split(text, parser):
    """(reasoning or None, content) as vLLM's parsers read `text`, keeping text before <think> (see REASONING.md)."""
    if parser == "qwen3":
        s = text.find("<think>")
        e = text.find("</think>", s + 7) if s >= 0 else -1
        if e < 0:
            return None, text
        return text[s + 7:e], text[:s] + text[e + 8:]
    e = text.find("</think>")
    head, content = (text, "") if e < 0 else (text[:e], text[e + 8:])
    s = head.find("<think>")
    if s >= 0:
        head = head[:s] + head[s + 7:]
    return head, content


def _checkpoint(path, template=QWEN3, think_tags=True, special=False, tweak=None):
    from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # Every byte, so schema-held answers ({"sum": 4}) can be written.
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(['two plus two is four, so the answer is 4.\nuser assistant {"sum": 4}'] * 50, trainer)
    if think_tags:  # Qwen3's are added, not special; `special` checks the server still sees them where they are
        tok.add_tokens([AddedToken("<think>", special=special), AddedToken("</think>", special=special)])
    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                      bos_token_id=1, eos_token_id=EOS, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    if tweak:
        tweak(model, tok)
    _write_checkpoint(path, model, tok, template=template, eos_token="<|im_end|>")
    return str(path), tok


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("think_llama"))


def _server(path, parser):
    from test_serve import ServerProcess
    return ServerProcess(path, "--kv-cache-memory", str(64 << 20), "--reasoning-parser", parser)


def _bias(tok):
    return {str(tok.token_to_id("<think>")): 4, str(tok.token_to_id("</think>")): 4}


def _streamed(client, **kw):
    reasoning, content = "", ""
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            r = getattr(ch.delta, "reasoning_content", None)
            assert r is None or (isinstance(r, str) and r), ch.delta
            reasoning += r or ""
            content += ch.delta.content or ""
    return reasoning, content


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
def test_split_equals_vllm_rules_whole_and_streamed(checkpoint, parser):
    pytest.importorskip("openai")
    from transformers import AutoTokenizer
    path, tok = checkpoint
    ids = AutoTokenizer.from_pretrained(path).apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True,
                                                                  return_dict=False)
    s = _server(path, parser)
    try:
        client = s.client()
        kinds = set()
        for seed in range(SEEDS):
            n = 2 + seed % 8 * 3  # short answers often stop inside a block
            kw = dict(model="tiny", messages=QUESTION, max_tokens=n, temperature=1.0, seed=seed,
                      logit_bias=_bias(tok))
            raw = client.completions.create(model="tiny", prompt=ids, max_tokens=n, temperature=1.0, seed=seed,
                                            logit_bias=_bias(tok), extra_body={"stop_token_ids": [IM_END]})
            text = raw.choices[0].text
            reasoning, content = _split(text, parser)
            m = client.chat.completions.create(**kw).choices[0].message
            assert getattr(m, "reasoning_content", None) == reasoning, (seed, text)
            assert m.content == (content or None), (seed, text)
            kinds.add((reasoning is None, bool(content), "</think>" in text, text.count("<think>") > 1))
            got = _streamed(client, **kw)
            if parser == "qwen3" and reasoning is None and "<think>" in text:
                # vLLM's streamed qwen3: an unclosed block went out as reasoning, after the content before it.
                start = text.index("<think>")
                assert got == (text[start + 7:], text[:start]), (seed, text, got)
            else:
                assert got == (reasoning or "", content), (seed, text, got)
        # The seeds cover both closed and unclosed blocks, so the rules were exercised, not a single path.
        assert {k[2] for k in kinds} == {True, False} and {k[3] for k in kinds} == {True, False}, kinds
        # n > 1 with logprobs: each choice split on its own, its logprobs still those of every token it said.
        for seed in range(4):
            kw = dict(model="tiny", max_tokens=12, temperature=1.0, seed=seed, logit_bias=_bias(tok), n=3)
            raw = client.completions.create(prompt=ids, extra_body={"stop_token_ids": [IM_END]}, **kw)
            r = client.chat.completions.create(messages=QUESTION, logprobs=True, top_logprobs=2, **kw)
            for c in r.choices:
                text = raw.choices[c.index].text
                reasoning, content = _split(text, parser)
                assert (getattr(c.message, "reasoning_content", None), c.message.content) == (reasoning, content or None)
                entries = c.logprobs.content
                if entries and entries[-1].token == "<|im_end|>":
                    entries = entries[:-1]  # the stop has one
                # Each token's own string replaces a character split between tokens; its bytes add up to the text.
                assert bytes(b for t in entries for b in t.bytes).decode("utf-8", "replace") == text
    finally:
        assert s.stop() == 0


def test_schema_held_answers_have_no_reasoning(checkpoint):
    """A forced tool call and response_format hold the answer to a schema from its first token, so deepseek_r1
    (which calls an answer without </think> all reasoning) is off for them: the JSON stays content / calls."""
    pytest.importorskip("openai")
    path, tok = checkpoint
    s = _server(path, "deepseek_r1")
    try:
        client = s.client()
        schema = {"type": "object", "properties": {"sum": {"enum": [3, 4, 5]}}, "required": ["sum"]}
        tools = [{"type": "function", "function": {"name": "add", "parameters": schema}}]
        done = [0, 0]
        for seed in range(4):
            kw = dict(model="tiny", messages=QUESTION, max_tokens=160, temperature=1.0, seed=seed)
            m = client.chat.completions.create(response_format={"type": "json_schema", "json_schema": {
                "name": "s", "schema": schema}}, **kw).choices[0]
            assert getattr(m.message, "reasoning_content", None) is None
            if m.finish_reason == "stop":
                assert json.loads(m.message.content)["sum"] in (3, 4, 5)
                done[0] += 1
            c = client.chat.completions.create(tools=tools, tool_choice="required", **kw).choices[0]
            assert getattr(c.message, "reasoning_content", None) is None
            if c.finish_reason == "tool_calls":
                assert c.message.tool_calls[0].function.name == "add"
                done[1] += 1
        assert min(done) > 0, done
        # Free text under the same parser is reasoning: the requests above took the other path.
        m = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4, seed=0).choices[0].message
        assert m.reasoning_content is not None and m.content is None
    finally:
        assert s.stop() == 0


def test_special_think_tokens_are_still_seen(tmp_path):
    """Where the vocabulary marks <think> special, the text keeps it (skip_special_tokens off, as for <tool_call>):
    otherwise qwen3 would never see a block and every reasoning_content would be null."""
    pytest.importorskip("openai")
    path, tok = _checkpoint(tmp_path, special=True)
    s = _server(path, "qwen3")
    try:
        client = s.client()
        found = 0
        for seed in range(SEEDS):
            m = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=24, temperature=1.0,
                                               seed=seed, logit_bias=_bias(tok)).choices[0].message
            found += getattr(m, "reasoning_content", None) is not None
            assert "</think>" not in (getattr(m, "reasoning_content", None) or "")
        assert found > 0
    finally:
        assert s.stop() == 0


def test_enable_thinking_false_renders_as_transformers(checkpoint):
    pytest.importorskip("openai")
    from transformers import AutoTokenizer, LlamaForCausalLM
    path, _ = checkpoint
    hf = AutoTokenizer.from_pretrained(path)
    ids = hf.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True, return_dict=False,
                                 enable_thinking=False)
    assert "<think>\n\n</think>" in hf.decode(ids)
    model = LlamaForCausalLM.from_pretrained(path).eval()
    expected = hf.decode(_hf_greedy_until(model, ids, {EOS, IM_END}, 12), skip_special_tokens=True)
    s = _server(path, "qwen3")
    try:
        client = s.client()
        r = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=12, temperature=0,
                                           extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        assert r.usage.prompt_tokens == len(ids)
        assert (r.choices[0].message.content or "") + (r.choices[0].message.reasoning_content or "") == expected
        # Without the kwarg the prompt has no empty block: the comparison above can fail.
        r = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=1, temperature=0)
        assert r.usage.prompt_tokens != len(ids)
        for body, param in [({"chat_template_kwargs": [1]}, "chat_template_kwargs"),
                            ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs"),
                            ({"include_reasoning": "yes"}, "include_reasoning")]:
            status, text = s.raw("POST", "/v1/chat/completions",
                                 json.dumps({"model": "tiny", "messages": QUESTION, "max_tokens": 2, **body}),
                                 {"Content-Type": "application/json"})
            assert status == 400 and json.loads(text)["error"]["param"] == param, text
        # include_reasoning false: the field is left out.
        status, text = s.raw("POST", "/v1/chat/completions",
                             json.dumps({"model": "tiny", "messages": QUESTION, "max_tokens": 2,
                                         "include_reasoning": False}), {"Content-Type": "application/json"})
        assert status == 200 and "reasoning_content" not in json.loads(text)["choices"][0]["message"], text
    finally:
        assert s.stop() == 0


def test_flag_refused_for_a_model_without_think(tmp_path):
    path, _ = _checkpoint(tmp_path, template=QWEN25, think_tags=False)
    r = subprocess.run([CLI, "serve", "-m", path, "--port", "0", "--reasoning-parser", "qwen3"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "--reasoning-parser qwen3" in r.stderr and "</think>" in r.stderr, r.stderr
    r = subprocess.run([CLI, "serve", "-m", path, "--reasoning-parser", "granite"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "--reasoning-parser" in r.stderr, r.stderr


def _thinks_greedily(model, tok):
    """Peaked weights, then <think> takes over the row of the first greedy token and </think> that of the fourth:
    the greedy answer opens a block at once and closes it a few tokens on."""
    import attnzoo
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
        prompt = tok.encode(attnzoo.apply_chat_template(QWEN3, QUESTION, True), add_special_tokens=False).ids
        for tag, at in (("<think>", 1), ("</think>", 4)):
            won = _hf_greedy_until(model, prompt, {EOS, IM_END}, at)[-1]
            model.lm_head.weight[tok.token_to_id(tag)] = model.lm_head.weight[won] * 1.05


def test_chat_hides_or_shows_thinking(tmp_path):
    path, _ = _checkpoint(tmp_path, tweak=_thinks_greedily)

    def answer(*flags):
        return chat_cli_answer(path, QUESTION[0]["content"], *flags)

    raw = answer()
    reasoning, content = _split(raw, "qwen3")
    assert reasoning is not None and reasoning.strip(), raw  # the tweak worked: a closed block with text in it
    assert answer("--reasoning-parser", "qwen3", "--hide-thinking") == content
    assert answer("--reasoning-parser", "qwen3") == reasoning + content  # not a terminal: no escape codes
    r = subprocess.run([CLI, "chat", "-m", path, "--hide-thinking"], input="", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "--reasoning-parser" in r.stderr, r.stderr


@pytest.fixture(scope="module", params=[False, True], ids=["added_tags", "special_tags"])
def thinking(tmp_path_factory, request):
    """The greedy thinker, its tags added tokens (Qwen3's) or special ones (kept in the text all the same)."""
    path, tok = _checkpoint(tmp_path_factory.mktemp("thinking_llama"), special=request.param, tweak=_thinks_greedily)
    return path, request.param


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
def test_model_chat_reads_think_as_serve(thinking, parser):
    """Model.chat(reasoning_parser=...) on a greedy answer that opens a block at once and closes it: the reply and its
    reasoning_content are serve's message.content / reasoning_content for the same greedy answer, the stream gets
    the content only, and without the parser the reply is the raw text, split the same by the rules in Python."""
    pytest.importorskip("openai")
    import attnzoo
    path, special = thinking
    s = _server(path, parser)
    try:
        m = s.client().chat.completions.create(model="tiny", messages=QUESTION, max_tokens=12,
                                               temperature=0).choices[0].message
    finally:
        assert s.stop() == 0
    assert m.reasoning_content and m.reasoning_content.strip() and m.content, m  # the tweak worked: both fields
    model = attnzoo.Model.load(path)
    pieces = []
    reply = model.chat(QUESTION, max_new_tokens=12, do_sample=False, reasoning_parser=parser, stream=pieces.append)
    assert isinstance(reply, attnzoo.ChatReply)
    assert (str(reply), reply.reasoning_content) == (m.content, m.reasoning_content)
    assert "".join(pieces) == str(reply)
    plain = model.chat(QUESTION, max_new_tokens=12, do_sample=False)
    assert plain.reasoning_content is None
    if special:  # without a parser the special tags are dropped from the text, as before
        assert plain == reply.reasoning_content + reply, plain
    else:
        assert "</think>" in plain and _split(str(plain), parser) == (reply.reasoning_content, str(reply)), plain


def test_model_chat_refuses_parsers_it_cannot_honour(tmp_path):
    import attnzoo
    path, _ = _checkpoint(tmp_path, template=QWEN25, think_tags=False)
    model = attnzoo.Model.load(path)
    with pytest.raises(ValueError, match="reasoning_parser='qwen3'.*</think>"):
        model.chat(QUESTION, max_new_tokens=2, reasoning_parser="qwen3")
    with pytest.raises(ValueError, match="reasoning_parser: must be"):
        model.chat(QUESTION, max_new_tokens=2, reasoning_parser="granite")
    assert model.chat(QUESTION, max_new_tokens=2).reasoning_content is None  # no parser: as before
