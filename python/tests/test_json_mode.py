"""JSON mode (response_format json_object) and logit_bias end to end, through the Python engine and `attnzoo serve`
driven by the openai client, on a tiny random Llama whose byte-level BPE holds every byte and many JSON pieces.

JSON mode: at temperature 1.0 over 40 seeds every sample that ends "stop" is one JSON object (json.loads) and every
"length" one is a prefix of one (test_json_recognizer's independent oracle); the same requests without it give
text json.loads refuses, so the checks can fail. Greedy JSON-mode answers are the same alone and beside other
requests (batch invariance). logit_bias: -100 on the greedy token changes the answer, +100 forces a token."""
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import attnzoo  # noqa: E402
from attnzoo.engine import LLM, SamplingParams  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from test_chat_cli import SPECIALS, _write_checkpoint, needs_cli  # noqa: E402
from test_json_recognizer import viable  # noqa: E402

EOS = 2
SEEDS = 40
TRAINING = [json.dumps({"name": "fox", "age": 3, "tags": ["quick", "brown"], "ok": True, "n": None,
                        "nested": {"x": -1.5e3, "y": [1, 2, {"z": "lazy dog"}]}}, indent=i) for i in (None, 2)]


def _tokenizer():
    from tokenizers import decoders, models, pre_tokenizers, trainers
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TRAINING * 50, trainer)
    return tok


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = _tokenizer()
    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
                      bos_token_id=1, eos_token_id=EOS, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    path = tmp_path_factory.mktemp("json_llama")
    _write_checkpoint(path, model, tok)
    return str(path)


@pytest.fixture(scope="module")
def llm(checkpoint):
    engine = LLM(Model.load(checkpoint))
    yield engine
    engine.stop()


PROMPT = "Answer in JSON: the fox"


def _is_object(text):
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def check_sampled_answers(llm, response_format, whole, prefix):
    """SEEDS samples of PROMPT at temperature 1.0 under response_format: each that ends "stop" is a text `whole`
    passes and ends as its document closes, not at an EOS; each that ends "length" fills max_tokens with a text
    `prefix` passes; at least a quarter stop."""
    params = [SamplingParams(temperature=1.0, seed=s, max_tokens=160, response_format=response_format)
              for s in range(SEEDS)]
    outs = [o.outputs[0] for o in llm.generate([PROMPT] * SEEDS, params)]
    stops = 0
    for s, o in enumerate(outs):
        assert o.finish_reason in ("stop", "length"), s
        if o.finish_reason == "stop":
            stops += 1
            assert whole(o.text), (s, o.text)
            assert o.token_ids[-1] != EOS
        else:
            assert len(o.token_ids) == 160 and prefix(o.text), (s, o.text)
    assert stops >= SEEDS // 4, f"only {stops} of {SEEDS} samples closed their document"


def test_sampled_json_mode_answers_are_json_objects(llm):
    check_sampled_answers(llm, "json_object", _is_object, lambda text: viable(text.encode()))
    # The same requests unconstrained: the model does not write JSON by itself, so the checks above can fail.
    free = [SamplingParams(temperature=1.0, seed=s, max_tokens=160) for s in range(SEEDS)]
    texts = [o.outputs[0].text for o in llm.generate([PROMPT] * SEEDS, free)]
    assert not any(_is_object(t) for t in texts)
    assert sum(viable(t.encode()) for t in texts) < SEEDS // 4


def test_json_mode_dict_form_and_n_samples(llm):
    out = llm.generate(PROMPT, SamplingParams(temperature=1.0, seed=7, n=4, max_tokens=160,
                                              response_format={"type": "json_object"}))[0]
    assert len(out.outputs) == 4
    for o in out.outputs:
        assert _is_object(o.text) if o.finish_reason == "stop" else viable(o.text.encode())
    with pytest.raises(ValueError, match="response_format"):
        llm.generate(PROMPT, SamplingParams(response_format="json_schema"))


def test_greedy_json_mode_is_batch_invariant(checkpoint):
    previous = attnzoo.batch_invariant()
    attnzoo.set_batch_invariant(True)
    try:
        llm = LLM(Model.load(checkpoint), max_num_batched_tokens=64)
        greedy = SamplingParams(temperature=0, max_tokens=120, response_format="json_object")
        alone = llm.generate(PROMPT, greedy)[0].outputs[0]
        others = [SamplingParams(temperature=1.0, seed=s, max_tokens=40 + s,
                                 response_format="json_object" if s % 2 else "text") for s in range(12)]
        prompts = ["x" * (5 + 7 * s) for s in range(12)]
        mixed = llm.generate(prompts[:6] + [PROMPT] + prompts[6:], others[:6] + [greedy] + others[6:])[6]
        assert mixed.outputs[0].token_ids == alone.token_ids
        assert mixed.outputs[0].text == alone.text
        llm.stop()
    finally:
        attnzoo.set_batch_invariant(previous)


def test_logit_bias_changes_and_forces_greedy_tokens(llm):
    plain = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=5))[0].outputs[0]
    first = plain.token_ids[0]
    banned = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=5, logit_bias={first: -100}))[0]
    assert banned.outputs[0].token_ids[0] != first
    forced = 300 if first != 300 else 301
    out = llm.generate(PROMPT, SamplingParams(temperature=0.8, seed=1, max_tokens=5, logit_bias={str(forced): 100},
                                              logprobs=0))[0].outputs[0]
    assert out.token_ids == [forced] * 5
    for token, logprob in out.logprobs:  # the raw logits' log-probabilities: far from certain for a random model
        assert token == forced and logprob < -0.5
    for bad in ({"x": 1}, {0: 101}, {10 ** 6: 1}):
        with pytest.raises(ValueError, match="logit_bias"):
            llm.generate(PROMPT, SamplingParams(logit_bias=bad))


def test_skip_special_tokens_leaves_them_out_of_the_text_only(llm, checkpoint):
    """A special token forced by logit_bias: its ids either way, its spelling in the text only with
    skip_special_tokens=False (vLLM's default is to leave them out)."""
    special = tokenizers.Tokenizer.from_file(f"{checkpoint}/tokenizer.json").token_to_id("<|im_start|>")
    params = dict(temperature=0, max_tokens=3, logit_bias={special: 100})
    skipped = llm.generate(PROMPT, SamplingParams(**params))[0].outputs[0]
    kept = llm.generate(PROMPT, SamplingParams(**params, skip_special_tokens=False))[0].outputs[0]
    assert skipped.token_ids == kept.token_ids == [special] * 3
    assert skipped.text == "" and kept.text == "<|im_start|>" * 3


# The server: the OpenAI request shapes, streamed and not, and the errors naming the field.

@pytest.fixture(scope="module")
def server(checkpoint):
    from test_serve import ServerProcess
    s = ServerProcess(checkpoint, "--kv-cache-memory", str(64 << 20))
    yield s
    assert s.stop() == 0


@needs_cli
def test_server_json_mode_completions_chat_and_stream(server):
    pytest.importorskip("openai")
    client = server.client()
    done = 0
    for seed in range(6):
        r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=160, temperature=1.0, seed=seed, n=2,
                                      extra_body={"response_format": {"type": "json_object"}})
        for c in r.choices:
            assert _is_object(c.text) if c.finish_reason == "stop" else viable(c.text.encode()), c.text
            done += c.finish_reason == "stop"
        chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "JSON please"}],
                                              max_tokens=160, temperature=1.0, seed=seed,
                                              response_format={"type": "json_object"})
        c = chat.choices[0]
        assert _is_object(c.message.content) if c.finish_reason == "stop" else viable(c.message.content.encode())
        done += c.finish_reason == "stop"
        stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "JSON please"}],
                                                max_tokens=160, temperature=1.0, seed=seed, stream=True,
                                                response_format={"type": "json_object"})
        text, reason = "", None
        for chunk in stream:
            for ch in chunk.choices:
                text += ch.delta.content or ""
                reason = ch.finish_reason or reason
        assert text == c.message.content  # the same seed streamed and not
        assert reason == c.finish_reason
    assert done >= 4
    text_format = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=4, temperature=0,
                                             extra_body={"response_format": {"type": "text"}})
    plain = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=4, temperature=0)
    assert text_format.choices[0].text == plain.choices[0].text


@needs_cli
def test_server_logit_bias(server, llm):
    pytest.importorskip("openai")
    client = server.client()
    greedy = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=3))[0].outputs[0]
    plain = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3, temperature=0)
    assert plain.choices[0].text == greedy.text
    banned = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3, temperature=0,
                                       logit_bias={str(greedy.token_ids[0]): -100})
    assert banned.choices[0].text != plain.choices[0].text
    forced = 300 if greedy.token_ids[0] != 300 else 301
    want = llm.engine.tokenizer.decode([forced] * 3)
    out = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3, temperature=0.7, seed=2,
                                    logit_bias={str(forced): 100})
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=3,
                                          temperature=0, logit_bias={str(forced): 100})
    assert out.choices[0].text == want
    assert chat.choices[0].message.content == want


@needs_cli
@pytest.mark.parametrize("body,field,message", [
    ({"logit_bias": [1, 2]}, "logit_bias", "must be an object"),
    ({"logit_bias": {"abc": 1}}, "logit_bias", "keys must be token ids"),
    ({"logit_bias": {"1000000": 1}}, "logit_bias", "keys must be token ids"),
    ({"logit_bias": {"5": 100.5}}, "logit_bias", "[-100, 100]"),
    ({"logit_bias": {"5": "x"}}, "logit_bias", "[-100, 100]"),
    ({"logit_bias": {str(i): 1 for i in range(1025)}}, "logit_bias", "at most 1024 entries"),
    ({"response_format": {"type": "json_schema", "json_schema": {}}}, "response_format",
     "response_format.json_schema.schema: missing"),
    ({"response_format": {"type": "xml"}}, "response_format", "must be text, json_object or json_schema"),
    ({"response_format": "json_object"}, "response_format", "must be an object"),
    ({"tools": [{"type": "function"}]}, "tools", "only /v1/chat/completions takes tools"),
])
def test_server_refuses_bad_fields_by_name(server, body, field, message):
    status, text = server.raw("POST", "/v1/completions",
                              json.dumps({"model": "tiny", "prompt": "hi", "max_tokens": 2, **body}),
                              {"Content-Type": "application/json"})
    assert status == 400, text
    err = json.loads(text)["error"]
    assert err["param"] == field and message in err["message"], err


def test_json_mode_and_logit_bias_decode_without_speculation(checkpoint, llm):
    """Speculation is off for shaped requests (their guesses would need the same mask / bias): under prompt lookup
    they give exactly the tokens they give without it, and propose no guess, while a plain request still does."""
    spec = LLM(Model.load(checkpoint), speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    try:
        shaped = [SamplingParams(temperature=0, max_tokens=60, response_format="json_object"),
                  SamplingParams(temperature=0, max_tokens=30, logit_bias={"40": 3.0})]
        for p in shaped:
            assert spec.generate(PROMPT, p)[0].outputs[0].token_ids == llm.generate(PROMPT, p)[0].outputs[0].token_ids
        assert spec.engine.stats()["spec_decode_num_draft_tokens"] == 0
        spec.generate([5, 6, 7, 5, 6, 7, 5, 6, 7], SamplingParams(temperature=0, max_tokens=30))
        assert spec.engine.stats()["spec_decode_num_draft_tokens"] > 0
    finally:
        spec.stop()
