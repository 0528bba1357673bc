"""Speculative decoding on tiny random checkpoints (dense Qwen3, Qwen3-MoE, a Mistral with sliding windows, a
Gemma 3 with sliding layers beside a full one (their own block tables giving blocks back), the Qwen3-Next hybrid
of Gated DeltaNet and attention, pure Mamba-2): greedy output over 200 tokens is token for token the plain
greedy output, with n-gram prompt lookup and with a draft model (another checkpoint sharing the
vocabulary, so the target rolls back often), recurrent state rolled back by checkpoint + recompute and by
per-token checkpoints alike; the serving engine with speculation gives the same text as without."""
import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import test_model_gemma as gemma  # noqa: E402
import test_model_llama as llama  # noqa: E402
import test_model_mamba2 as mamba2  # noqa: E402
import test_model_qwen3_next as qwen3_next  # noqa: E402
from attnzoo import _core  # noqa: E402
from test_engine import text_model  # noqa: E402,F401  (the fixture: a random Llama with a trained tokenizer)

# target kind -> (module, kind, draft module, draft kind); each draft shares its target's vocabulary.
MODELS = {
    "dense": (llama, "qwen3", llama, "qwen3_moe"),
    "moe": (llama, "qwen3_moe", llama, "qwen3"),
    "sliding_window": (llama, "mistral_swa", llama, "qwen3"),
    "mixed_windows": (gemma, "gemma3", llama, "qwen3"),
    "hybrid": (qwen3_next, "moe_interval", mamba2, "g1_conv4"),
    "mamba2": (mamba2, "g1_conv4", qwen3_next, "moe_interval"),
}
NEW_TOKENS = 200


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    dirs = {}

    def get(module, kind):
        if (module, kind) not in dirs:
            directory = tmp_path_factory.mktemp(kind)
            module._build(kind, directory)
            dirs[(module, kind)] = str(directory)
        return dirs[(module, kind)]
    return get


def _prompt(vocab):
    # A repeated stretch gives prompt lookup something to find.
    rng = np.random.default_rng(5)
    part = rng.integers(0, vocab, size=16)
    return np.concatenate([part, rng.integers(0, vocab, size=4), part[:10]]).astype(np.int32)


def _generate(model, ids, **spec):
    return _core.generate(model, ids, None, 0.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 0, NEW_TOKENS, [], [], None, **spec)


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_output_is_identical_with_speculation(built, name):
    module, kind, draft_module, draft_kind = MODELS[name]
    k = 4
    target = _core.Model.load(built(module, kind), max_rollback_tokens=k + 1)
    draft = _core.Model.load(built(draft_module, draft_kind), max_rollback_tokens=k + 1)
    ids = _prompt(module.VOCAB)
    want = _generate(target, ids)
    assert len(want["tokens"]) == NEW_TOKENS
    runs = {
        "ngram": dict(speculative="ngram", num_speculative_tokens=k, prompt_lookup_min=1, prompt_lookup_max=3),
        "draft": dict(speculative="draft", num_speculative_tokens=k, draft_model=draft),
        "self-draft": dict(speculative="draft", num_speculative_tokens=k, draft_model=target),
    }
    if name in ("hybrid", "mamba2"):
        runs["draft, per-token checkpoints"] = dict(runs["draft"], checkpoint_each_token=True)
    for label, spec in runs.items():
        got = _generate(target, ids, **spec)
        assert list(got["tokens"]) == list(want["tokens"]), f"{name} {label}"
        assert got["num_draft_tokens"] > 0, f"{name} {label}: nothing was proposed"
        if label == "self-draft":  # the target drafting for itself is always right
            assert got["num_accepted_tokens"] == got["num_draft_tokens"]
            assert got["decode_steps"] < NEW_TOKENS / 2
        if label == "draft":  # an unrelated random model: rollbacks happen
            assert got["num_accepted_tokens"] < got["num_draft_tokens"]
    # Every sequence and checkpoint slot went back to the pool.
    stats = target.pool_stats()
    assert stats["free_blocks"] == stats["num_blocks"]
    assert stats["free_state_slots"] == stats["state_slots"]


def test_bad_options_are_named(built):
    target = _core.Model.load(built(llama, "qwen3"))
    ids = _prompt(llama.VOCAB)
    with pytest.raises(ValueError, match="speculative"):
        _generate(target, ids, speculative="eagle", num_speculative_tokens=2)
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        _generate(target, ids, speculative="ngram", num_speculative_tokens=0)
    with pytest.raises(ValueError, match="draft_model"):
        _generate(target, ids, speculative="draft", num_speculative_tokens=2)
    other = _core.Model.load(built(mamba2, "g1_conv4"))  # vocabulary 160 against 320: another tokenizer
    with pytest.raises(ValueError, match="draft_model"):
        _generate(target, ids, speculative="draft", num_speculative_tokens=2, draft_model=other)


@pytest.mark.parametrize("name", ["dense", "hybrid"])
def test_serving_engine_greedy_is_identical_with_speculation(built, name):
    from attnzoo.engine import LLM, SamplingParams
    from attnzoo.model import Model
    module, kind, draft_module, draft_kind = MODELS[name]
    prompts = [_prompt(module.VOCAB)[: 12 + 3 * i].tolist() for i in range(6)]
    params = [SamplingParams(temperature=0, max_tokens=20 + 5 * i) for i in range(6)]
    plain = LLM(Model.load(built(module, kind))).generate(prompts, params)
    configs = {
        "ngram": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1},
        "draft": {"method": "draft_model", "model": built(draft_module, draft_kind), "num_speculative_tokens": 3},
    }
    for label, config in configs.items():
        llm = LLM(Model.load(built(module, kind)), max_num_batched_tokens=64, speculative_config=config)
        got = llm.generate(prompts, params)
        for i, (a, b) in enumerate(zip(plain, got)):
            assert b.outputs[0].token_ids == a.outputs[0].token_ids, f"{name} {label} request {i}"
        stats = llm.engine.stats()
        assert stats["spec_decode_num_draft_tokens"] > 0
        assert 0 <= stats["spec_decode_num_accepted_tokens"] <= stats["spec_decode_num_draft_tokens"]
        assert sum(stats["spec_decode_num_accepted_tokens_per_pos"]) == stats["spec_decode_num_accepted_tokens"]
        assert stats["spec_decode_acceptance_rate"] == pytest.approx(
            stats["spec_decode_num_accepted_tokens"] / stats["spec_decode_num_draft_tokens"])
        assert stats["spec_decode_mean_acceptance_length"] == pytest.approx(
            1 + stats["spec_decode_num_accepted_tokens"] / stats["spec_decode_num_drafts"])
        assert stats["free_blocks"] == stats["num_blocks"]
        llm.stop()
    with pytest.raises(ValueError, match="speculative_config"):
        LLM(Model.load(built(module, kind)), speculative_config={"method": "ngram", "k": 3})


def test_serving_engine_text_is_identical_with_speculation(text_model):
    directory = text_model
    from attnzoo.engine import LLM, SamplingParams
    from attnzoo.model import Model
    prompts = ["the cat sat on the mat and the cat sat on the", "once upon a time there was a"]
    params = SamplingParams(temperature=0, max_tokens=40)
    plain = LLM(Model.load(directory)).generate(prompts, params)
    spec = LLM(Model.load(directory), speculative_config={"method": "ngram", "num_speculative_tokens": 4,
                                                         "prompt_lookup_max": 3})
    got = spec.generate(prompts, params)
    assert [o.outputs[0].text for o in got] == [o.outputs[0].text for o in plain]
    assert all(o.outputs[0].text for o in got)
    spec.stop()


def test_cli_generate_prints_the_same_text_with_speculation(text_model, built):
    import os
    import subprocess
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    cli = os.environ.get("ATTNZOO_CLI", os.path.join(root, "build", "attnzoo"))
    if not os.access(cli, os.X_OK):
        pytest.skip(f"attnzoo CLI not built at {cli}")

    def run(*args):
        return subprocess.run([cli, "generate", "-m", text_model, "-p", "the cat sat on the mat and the cat", "-n", "40",
                               *args], capture_output=True, text=True, timeout=120)
    plain = run()
    assert plain.returncode == 0, plain.stderr
    for args in (["--speculative", "ngram", "--num-speculative-tokens", "3", "--prompt-lookup-max", "2"],
                 ["--speculative", "draft", "--num-speculative-tokens", "2", "--draft-model", text_model]):
        spec = run(*args)
        assert spec.returncode == 0, spec.stderr
        assert spec.stdout == plain.stdout
        assert "guesses accepted" in spec.stderr and "mean acceptance length" in spec.stderr
    # chat: one proposer for the conversation (a draft keeps what it computed of the shared history).
    turns = "the cat sat on the mat\nand the cat sat again\n/exit\n"
    chat = [subprocess.run([cli, "chat", "-m", text_model, "-n", "30", *extra], input=turns, capture_output=True,
                           text=True, timeout=120)
            for extra in ([], ["--speculative", "draft", "--num-speculative-tokens", "3", "--draft-model", text_model])]
    assert chat[0].returncode == 0 and chat[1].returncode == 0, chat[1].stderr
    assert chat[1].stdout == chat[0].stdout and chat[0].stdout.count(">") >= 3
    for args, message in (
            (["--speculative", "draft", "--num-speculative-tokens", "2"], "--draft-model"),
            (["--num-speculative-tokens", "2"], "--speculative"),
            (["--speculative", "medusa", "--num-speculative-tokens", "2"], "--speculative"),
            (["--speculative", "ngram", "--num-speculative-tokens", "2", "--prompt-lookup-min", "3",
              "--prompt-lookup-max", "2"], "prompt_lookup_max"),
            (["--speculative", "ngram", "--num-speculative-tokens", "2", "--draft-model", text_model], "--draft-model"),
            (["--speculative", "draft", "--num-speculative-tokens", "2", "--draft-model",
              built(mamba2, "g1_conv4")], "draft_model")):
        bad = run(*args)
        assert bad.returncode != 0 and message in bad.stderr, (args, bad.stderr)


def test_model_generate_takes_vllms_speculative_config(built):
    from attnzoo.model import Model
    target = Model.load(built(qwen3_next, "moe_interval"))
    draft = Model.load(built(mamba2, "g1_conv4"))
    ids = _prompt(qwen3_next.VOCAB)
    want = target.generate(ids, max_new_tokens=60)
    for config in ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2},
                   {"method": "draft_model", "model": draft, "num_speculative_tokens": 2}):
        assert target.generate(ids, max_new_tokens=60, speculative_config=config) == want
    with pytest.raises(ValueError, match="speculative_config"):
        target.generate(ids, max_new_tokens=4, speculative_config={"method": "ngram", "k": 2})
    with pytest.raises(ValueError, match="speculative_config"):
        target.generate(ids, max_new_tokens=4, native=False, speculative_config={"method": "ngram",
                                                                                 "num_speculative_tokens": 2})


def test_bench_speculative_row(text_model, built):
    from attnzoo.bench.speculative import format_row, speculative_row
    from attnzoo.model import Model
    model = Model.load(text_model)
    with pytest.raises(ValueError, match="max_position_embeddings"):  # the summarise request: 700+ tiny tokens
        speculative_row(model, "ngram", gen=24)
    ids = model.tokenizer.encode("the cat sat on the mat and the cat sat on the mat and the cat")
    row = speculative_row(model, "ngram", num_speculative_tokens=3, gen=24, prompt_ids=ids)
    assert row["identical"] and row["prompt_tokens"] == len(ids) and 1 <= row["tokens"] <= 24
    assert row["num_draft_tokens"] > 0 and 0 <= row["acceptance_rate"] <= 1
    assert row["mean_acceptance_length"] == pytest.approx(1 + row["num_accepted_tokens"] / row["num_drafts"])
    assert "identical" in format_row(row)
    row = speculative_row(model, "draft", num_speculative_tokens=2, draft_model=text_model, gen=16, prompt_ids=ids)
    assert row["identical"] and row["acceptance_rate"] > 0.9  # the model drafting for itself
    with pytest.raises(ValueError, match="draft_model"):
        speculative_row(model, "draft", gen=4)


def test_sliding_window_speculation_through_the_public_api_needs_no_rollback_option(built):
    # A Mistral with a 12-token window over 4-token blocks gives blocks back as it grows; speculation must keep
    # k + 1 tokens of them for its rollbacks without the caller setting max_rollback_tokens.
    from attnzoo.engine import LLM, SamplingParams
    from attnzoo.model import Model
    directory = built(llama, "mistral_swa")
    ids = _prompt(llama.VOCAB)
    want = Model.load(directory, block_size=4).generate(ids, max_new_tokens=NEW_TOKENS)
    assert len(want) == NEW_TOKENS
    config = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    assert Model.load(directory, block_size=4).generate(ids, max_new_tokens=NEW_TOKENS,
                                                         speculative_config=config) == want
    llm = LLM(Model.load(directory, block_size=4), speculative_config=config)
    got = llm.generate([ids.tolist()], SamplingParams(temperature=0, max_tokens=NEW_TOKENS))
    assert list(got[0].outputs[0].token_ids) == list(want)
    stats = llm.engine.stats()
    assert stats["spec_decode_num_draft_tokens"] > stats["spec_decode_num_accepted_tokens"]  # rollbacks happened
    llm.stop()
