"""The serving engine (attnzoo.engine: LLM / Engine over the C++ scheduler) on tiny random checkpoints, a Llama-family
model and a Qwen3-Next hybrid (recurrent Gated DeltaNet state beside paged attention): 64 requests of mixed lengths
at once, each greedy output identical to Model.generate run alone on a separately loaded copy; seeded sampling
(n > 1 included) identical to Model.generate with the sample's seed; a pool too small for everyone (preemption and
recompute, every request completes); abort frees every block."""
import re
import time

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import test_model_llama as llama  # noqa: E402
import test_model_qwen3_next as qwen3_next  # noqa: E402
from attnzoo.engine import LLM, Engine, SamplingParams  # noqa: E402
from attnzoo.model import Model  # noqa: E402

MODELS = {"qwen3": (llama, "qwen3"), "qwen3_next": (qwen3_next, "dense_layer_types")}


@pytest.fixture(scope="module", params=list(MODELS))
def checkpoint(request, tmp_path_factory):
    module, kind = MODELS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    module._build(kind, directory)
    return request.param, str(directory), module.VOCAB


def _prompts(vocab, count, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 120, size=count)
    return [rng.integers(0, vocab, size=int(n)).tolist() for n in lengths]


def _alone(reference, ids, params, sample=0):
    return list(reference.generate(np.array(ids, dtype=np.int32), max_new_tokens=params.max_tokens,
                                   temperature=params.temperature, top_p=params.top_p, top_k=params.top_k,
                                   repetition_penalty=params.repetition_penalty,
                                   seed=None if params.seed is None else params.seed + sample))


def test_64_concurrent_greedy_requests_match_running_alone(checkpoint):
    name, directory, vocab = checkpoint
    llm = LLM(Model.load(directory), max_num_batched_tokens=256)
    prompts = _prompts(vocab, 64, seed=1)
    params = [SamplingParams(temperature=0, max_tokens=4 + i % 13) for i in range(64)]
    outs = llm.generate(prompts, params)
    reference = Model.load(directory)
    for i, (ids, p, out) in enumerate(zip(prompts, params, outs)):
        assert out.prompt_token_ids == ids
        assert out.outputs[0].token_ids == _alone(reference, ids, p), f"{name} request {i}"
        assert out.outputs[0].finish_reason in ("stop", "length")
        assert out.usage["completion_tokens"] == len(out.outputs[0].token_ids)
        assert out.metrics["arrival"] <= out.metrics["first_token"] <= out.metrics["finish"]
    stats = llm.engine.stats()
    assert stats["finished_requests"] == 64 and stats["running_requests"] == 0
    assert stats["free_blocks"] == stats["num_blocks"]
    llm.stop()


def test_seeded_sampling_is_reproducible_and_matches_alone(checkpoint):
    name, directory, vocab = checkpoint
    prompts = _prompts(vocab, 6, seed=2)
    params = SamplingParams(temperature=0.8, top_p=0.9, repetition_penalty=1.1, max_tokens=10, seed=77, n=3)
    first = LLM(Model.load(directory)).generate(prompts, params)
    # Another batch composition (one at a time, tiny steps) gives the same tokens.
    llm = LLM(Model.load(directory), max_num_batched_tokens=16)
    again = [llm.generate([p], params)[0] for p in prompts]
    reference = Model.load(directory)
    for ids, a, b in zip(prompts, first, again):
        assert [o.token_ids for o in a.outputs] == [o.token_ids for o in b.outputs]
        for i, o in enumerate(a.outputs):
            assert o.index == i
            assert o.token_ids == _alone(reference, ids, params, sample=i), f"{name} sample {i}"


def test_preemption_under_a_tiny_pool_completes_every_request(checkpoint):
    name, directory, vocab = checkpoint
    pool = Model.load(directory, block_size=4).pool_stats()
    # Every state slot (hybrids), and about 64 blocks of 4 tokens (a quarter of what is left goes to state
    # snapshots on hybrids): 12 requests of up to 64 tokens (16 blocks) cannot all run at once.
    model = Model.load(directory, block_size=4,
                       kv_cache_bytes=pool["state_slots"] * pool["state_slot_bytes"] + 64 * pool["block_bytes"])
    assert 16 <= model.pool_stats()["num_blocks"] <= 64
    llm = LLM(model, max_num_batched_tokens=64)
    prompts = _prompts(vocab, 12, seed=3)
    prompts = [p[:40] for p in prompts]
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    outs = llm.generate(prompts, params)
    stats = llm.engine.stats()
    assert stats["preemptions"] > 0
    assert sum(o.metrics["preemptions"] for o in outs) == stats["preemptions"]
    reference = Model.load(directory)
    for ids, out in zip(prompts, outs):
        assert len(out.outputs[0].token_ids) == 24
        want = list(reference.generate(np.array(ids, dtype=np.int32), max_new_tokens=24, temperature=0,
                                       eos_token_id=[]))
        assert out.outputs[0].token_ids == want
    assert stats["free_blocks"] == stats["num_blocks"]


def test_abort_frees_every_block_and_logprobs_are_reported(checkpoint):
    name, directory, vocab = checkpoint
    model = Model.load(directory)
    baseline = model.pool_stats()["free_blocks"]
    engine = Engine(model)
    streams = [engine.add_request(p, SamplingParams(max_tokens=100, ignore_eos=True, logprobs=2, n=2))
               for p in _prompts(vocab, 5, seed=4)]
    first = streams[0].next()
    assert first["samples"] and len(first["samples"][0]["top_logprobs"][0]) == 2
    for s in streams:
        s.abort()
    for s in streams:
        reasons = {}
        for out in s:
            for smp in out["samples"]:
                if smp["finish_reason"]:
                    reasons[smp["index"]] = smp["finish_reason"]
        assert reasons == {0: "abort", 1: "abort"}
    deadline = time.monotonic() + 10
    while engine.stats()["free_blocks"] != baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.stats()["free_blocks"] == baseline
    assert engine.stats()["aborted_requests"] == 5
    engine.stop()
    with pytest.raises(ValueError, match="prompt"):
        Engine(model).add_request([vocab + 5], SamplingParams())


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    """A random Llama with a small trained byte-level BPE tokenizer (test_chat_cli's), so outputs have text."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from test_chat_cli import _tokenizer, _write_checkpoint
    tok = _tokenizer()
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, bos_token_id=1,
                      eos_token_id=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    directory = tmp_path_factory.mktemp("text_model")
    _write_checkpoint(str(directory), model, tok)
    return str(directory)


def test_text_and_stop_strings_match_model_generate(text_model):
    reference = Model.load(text_model)
    llm = LLM(Model.load(text_model))
    prompts = ["the quick brown fox", "hello world", "the lazy dog jumps"]
    full = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=30))
    for prompt, out in zip(prompts, full):
        want = reference.generate(prompt, max_new_tokens=30, temperature=0)
        assert out.outputs[0].text == want
        assert len(want) > 8
        # A stop string taken from the middle of the text ends it just before its first occurrence.
        stop = want[5:8]
        cut = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=30, stop=[stop]))[0].outputs[0]
        assert cut.text == reference.generate(prompt, max_new_tokens=30, temperature=0, stop=[stop])
        assert cut.text == want[:want.index(stop)]
        assert cut.finish_reason == "stop"
    # stop_token_ids end a sample like EOS: the id is the last token, its text is not shown.
    ids = full[0].outputs[0].token_ids
    out = llm.generate([prompts[0]], SamplingParams(temperature=0, max_tokens=30, stop_token_ids=[ids[3]]))[0]
    assert out.outputs[0].token_ids == ids[:ids.index(ids[3]) + 1]
    assert out.outputs[0].finish_reason == "stop"


_NO_GPU = r"asked, but (no GPU is usable here|this build has no CUDA|this machine has \d+ GPU)"


def test_device_is_chosen_at_load_and_a_gpu_it_cannot_reach_is_refused_by_name(checkpoint):
    _, directory, _ = checkpoint
    model = Model.load(directory, device="cpu")
    assert model.device == "cpu" and Model.load(directory).device == "cpu"  # "auto": the CPU until verified
    with pytest.raises(ValueError, match=r"device: cuda:7 " + _NO_GPU):
        Model.load(directory, device="cuda:7")
    with pytest.raises(ValueError, match="device: expected cpu, cuda or cuda:N, got 'tpu'"):
        Model.load(directory, device="tpu")
    with pytest.raises(ValueError, match=r"gpu_memory_utilization: must be a fraction in \(0, 1\]"):
        Model.load(directory, gpu_memory_utilization=0)
    assert Engine(directory, device="cpu").model.device == "cpu"
    with pytest.raises(ValueError, match="device: the model was loaded on cpu, 'cuda' asked"):
        Engine(model, device="cuda")
    # Without a GPU the load stops at the device; with one, at the first feature the GPU runner lacks (this
    # checkpoint's head_dim), or it loads there.
    try:
        LLM(directory, device="cuda")
    except ValueError as e:
        assert re.search(r"device: (cuda:0 " + _NO_GPU + "|.* runs on the CPU only so far)", str(e)), str(e)


def test_unseeded_requests_draw_afresh_and_small_temperatures_are_raised(checkpoint):
    """vLLM's SamplingParams: seed None (the default) or -1 draws a fresh seed per request; a temperature in
    (0, 0.01) is raised to 0.01 with a warning."""
    name, directory, vocab = checkpoint
    llm = LLM(Model.load(directory))
    prompt = _prompts(vocab, 1, seed=9)[0]
    texts = [tuple(llm.generate([prompt], SamplingParams(temperature=1.0, max_tokens=24, seed=s))[0]
                   .outputs[0].token_ids) for s in (None, None, -1, 5, 5)]
    assert len(set(texts[:3])) == 3, name
    assert texts[3] == texts[4]
    with pytest.warns(UserWarning, match="temperature"):
        low = llm.generate([prompt], SamplingParams(temperature=1e-40, max_tokens=8, seed=3))[0].outputs[0]
    floor = llm.generate([prompt], SamplingParams(temperature=0.01, max_tokens=8, seed=3))[0].outputs[0]
    assert low.token_ids == floor.token_ids and low.finish_reason == "length"
    with pytest.raises(ValueError, match="seed"):
        llm.generate([prompt], SamplingParams(seed=-2))
    llm.stop()
