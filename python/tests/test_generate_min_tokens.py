"""A minimum length, as transformers and vLLM have it: greedy output with ``min_new_tokens`` equals transformers'
``generate(min_new_tokens=...)`` on a tiny random Llama whose EOS greedy decoding reaches at its fifth token, in
the C++ loop and the Python loop, with speculation (n-gram and a draft) and on the serving engine (vLLM's
``SamplingParams.min_tokens``); the checkpoint's generation_config.json ``min_new_tokens`` and ``min_length`` (which
counts the prompt) are the defaults, as transformers reads them; stop strings do not end the text before the
minimum, on every path alike."""
import json
import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attnzoo.engine import LLM, SamplingParams  # noqa: E402
from attnzoo.generate import generate  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from test_engine import text_model  # noqa: E402,F401  (the fixture: a random Llama with a trained tokenizer)

NEW_TOKENS = 20
PROMPT = np.random.default_rng(1).integers(3, 300, size=24)


def _hf_greedy(model, ids, **kw):
    x = torch.tensor(np.asarray(ids, dtype=np.int64))[None]
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=NEW_TOKENS, do_sample=False,
                             pad_token_id=0, **kw)
    return out[0, x.shape[1]:].tolist()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(transformers model, its directory, the EOS id): the EOS is the token free greedy decoding says fifth."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)  # peaked distributions: greedy answers are not ties between near-equal logits
    free = _hf_greedy(model, PROMPT, min_new_tokens=NEW_TOKENS, eos_token_id=None)
    eos = free[4]
    model.config.eos_token_id = eos
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = 0
    directory = str(tmp_path_factory.mktemp("min_tokens_llama"))
    model.save_pretrained(directory, safe_serialization=True)
    return model, directory, eos


def _with_generation_config(built, directory, **values):
    """The checkpoint copied to `directory` with `values` added to its generation_config.json."""
    shutil.copytree(built[1], directory)
    path = os.path.join(directory, "generation_config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(values)
    with open(path, "w") as f:
        json.dump(config, f)
    return str(directory)


@pytest.mark.parametrize("native", [True, False])
def test_greedy_equals_transformers_min_new_tokens(built, native):
    hf, directory, eos = built
    model = Model.load(directory)
    free = _hf_greedy(hf, PROMPT)
    assert free[-1] == eos and len(free) <= 5  # without a minimum, EOS ends the answer early
    for minimum in (0, 3, 8, NEW_TOKENS - 1, NEW_TOKENS):
        want = _hf_greedy(hf, PROMPT, min_new_tokens=minimum)
        got = generate(model, None, PROMPT, max_new_tokens=NEW_TOKENS, min_new_tokens=minimum, native=native)
        assert got == want, minimum
        assert len(got) >= minimum and eos not in got[:minimum]
    assert len(_hf_greedy(hf, PROMPT, min_new_tokens=8)) > len(free)
    # max_new_tokens still wins, as in transformers (which only warns).
    assert generate(model, None, PROMPT, max_new_tokens=6, min_new_tokens=10, native=native) == \
        _hf_greedy(hf, PROMPT, min_new_tokens=NEW_TOKENS)[:6]
    with pytest.raises(ValueError, match="min_new_tokens: must be >= 0"):
        generate(model, None, PROMPT, max_new_tokens=4, min_new_tokens=-1, native=native)


@pytest.mark.parametrize("speculative", [{"method": "ngram", "num_speculative_tokens": 3},
                                         {"method": "draft_model", "num_speculative_tokens": 4}])
def test_speculation_keeps_the_minimum_exact(built, speculative):
    hf, directory, _ = built
    model = Model.load(directory)
    if speculative["method"] == "draft_model":
        speculative = {**speculative, "model": Model.load(directory)}
    for minimum in (3, 8, 15):
        got = model.generate(PROMPT, max_new_tokens=NEW_TOKENS, min_new_tokens=minimum, speculative_config=speculative)
        assert got == _hf_greedy(hf, PROMPT, min_new_tokens=minimum), minimum


def test_generation_config_min_new_tokens_and_min_length_are_the_defaults(built, tmp_path):
    eos = built[2]
    short = PROMPT[:20]
    for i, values in enumerate(({"min_new_tokens": 8}, {"min_length": len(PROMPT) + 8}, {"min_length": 4})):
        directory = _with_generation_config(built, tmp_path / str(i), **values)
        reference = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        model = Model.load(directory)
        for prompt in (PROMPT, short):
            want = _hf_greedy(reference, prompt)  # transformers reads the minimum from the file too
            assert model.generate(prompt, max_new_tokens=NEW_TOKENS) == want, (values, len(prompt))
            assert generate(model, None, prompt, max_new_tokens=NEW_TOKENS, native=False) == want, values
            # The caller's value wins over the file's, as transformers' argument does.
            assert model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=0) == \
                _hf_greedy(reference, prompt, min_new_tokens=0)
        # A list of prompts runs on the serving engine, each with its own minimum (min_length counts its prompt).
        prompts = [PROMPT, short]
        assert model.generate(prompts, max_new_tokens=NEW_TOKENS) == [_hf_greedy(reference, p) for p in prompts]
    assert len(_hf_greedy(reference, PROMPT)) <= 5 and eos in _hf_greedy(reference, PROMPT)  # min_length 4: no effect
    bad = _with_generation_config(built, tmp_path / "bad", min_new_tokens=-3)
    with pytest.raises(Exception, match="generation_config.json: min_new_tokens: must be >= 0"):
        Model.load(bad).generate(PROMPT, max_new_tokens=4)


def test_serving_engine_takes_vllms_min_tokens(built):
    hf, directory, eos = built
    llm = LLM(Model.load(directory), speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    try:
        for minimum in (0, 8, NEW_TOKENS):
            out = llm.generate([PROMPT], SamplingParams(temperature=0, max_tokens=NEW_TOKENS, min_tokens=minimum))
            assert out[0].outputs[0].token_ids == _hf_greedy(hf, PROMPT, min_new_tokens=minimum), minimum
        # ignore_eos: the EOS does not end the sample, and min_tokens still keeps it out of the first tokens.
        out = llm.generate([PROMPT], SamplingParams(temperature=0, max_tokens=NEW_TOKENS, min_tokens=10,
                                                    ignore_eos=True))
        assert eos not in out[0].outputs[0].token_ids[:10]
        with pytest.raises(ValueError, match=r"min_tokens: must be <= max_tokens \(4\), got 5"):
            llm.generate([PROMPT], SamplingParams(max_tokens=4, min_tokens=5))
        with pytest.raises(ValueError, match="min_tokens: must be >= 0"):
            llm.generate([PROMPT], SamplingParams(max_tokens=4, min_tokens=-1))
    finally:
        llm.stop()


def test_stop_strings_do_not_end_the_text_before_the_minimum(text_model):  # noqa: F811
    model = Model.load(text_model)
    prompt = "the quick brown fox"
    ids = model.tokenizer.encode(prompt)
    full = model.generate(prompt, max_new_tokens=30, temperature=0)
    stop = full[5:8]
    cut = model.generate(prompt, max_new_tokens=30, temperature=0, stop=stop)
    assert cut == full[:full.index(stop)]
    tokens = model.generate(ids, max_new_tokens=30, temperature=0)
    # The minimum is past every token whose text holds the stop string's first occurrence.
    minimum = next(k for k in range(1, 31) if stop in model.tokenizer.decode(tokens[:k], skip_special_tokens=True))
    native = model.generate(prompt, max_new_tokens=30, temperature=0, stop=stop, min_new_tokens=minimum)
    assert len(native) > len(cut) and native.startswith(full[:full.index(stop) + len(stop)])
    assert generate(model, model.tokenizer, prompt, max_new_tokens=30, temperature=0, stop=stop,
                    min_new_tokens=minimum, native=False) == native
    llm = LLM(Model.load(text_model))
    try:
        served = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=30, stop=[stop],
                                                       min_tokens=minimum))[0].outputs[0]
    finally:
        llm.stop()
    assert served.text == native
