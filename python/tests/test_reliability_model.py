"""Issue 16 for models and generation: token ids that do not fit or lie outside the vocabulary, config values
refused at load naming the key, the context window (max_position_embeddings) bounding generation in Python and
the CLI alike, SIGINT / SIGTERM in `attnzoo generate`, `inspect` on sizes that overflow, and sequences used from
several Python threads (one sequence: a clear error; different sequences: parallel and correct)."""
import json
import os
import signal
import subprocess
import threading
import time
import _thread

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.generate import generate  # noqa: E402
from attnzoo.model import Model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = 300
POSITIONS = 64


def _cli():
    for path in (os.environ.get("ATTNZOO_CLI"), os.path.join(ROOT, "build", "attnzoo")):
        if path and os.access(path, os.X_OK):
            return path
    pytest.skip("attnzoo CLI not built (set ATTNZOO_CLI)")


def _save(directory, positions):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=positions, eos_token_id=None, bos_token_id=None)
    checks.save_random_model("reliability", config, directory, lambda m: None)
    from tokenizers import decoders, models, pre_tokenizers, trainers
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20, trainer)
    tok.save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("reliability_small"), POSITIONS)


def test_token_ids_that_do_not_fit_or_lie_outside_the_vocabulary(small):
    m = Model.load(str(small))
    with pytest.raises(ValueError, match="ids: value 4294967301 does not fit in int32"):
        m.forward([2**32 + 5])
    with pytest.raises(ValueError, match="ids: value 4294967301"):
        m.forward(torch.tensor([2**32 + 5]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        m.forward([VOCAB])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        m.forward([-1])


@pytest.mark.parametrize("native", [True, False])
def test_generation_stops_at_max_position_embeddings(small, native):
    m = Model.load(str(small))
    ids = checks.prompt(VOCAB, 10)
    new = generate(m, None, ids, max_new_tokens=10**9, temperature=0, eos_token_id=[], native=native)
    assert len(ids) + len(new) == POSITIONS
    with pytest.raises(ValueError, match="max_position_embeddings"):
        generate(m, None, checks.prompt(VOCAB, POSITIONS + 1), max_new_tokens=1, eos_token_id=[], native=native)


def test_cli_generate_announces_the_context_limit_and_refuses_long_prompts(small):
    r = subprocess.run([_cli(), "generate", "-m", str(small), "-p", "the quick brown", "-n", "1000000000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # -n past the context is announced and lowered: the run ends at the model's last position, never beyond.
    assert "-n lowered to 61" in r.stderr and "context of 64 tokens" in r.stderr, r.stderr
    assert "generated 61 tokens" in r.stderr, r.stderr
    r = subprocess.run([_cli(), "generate", "-m", str(small), "-p", "the quick brown fox " * 40, "-n", "4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "max_position_embeddings" in r.stderr, r.stderr
    r = subprocess.run([_cli(), "generate", "-m", str(small), "-p", "x", "--seed", "-2"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "--seed" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def long_context(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("reliability_long"), 1 << 20)


def test_ctrl_c_ends_native_generation_between_tokens(long_context, sigint_raises):
    m = Model.load(str(long_context))
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        generate(m, None, checks.prompt(VOCAB, 8), max_new_tokens=10**6, temperature=0, eos_token_id=[], native=True)
    timer.join()
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_generate_ends_cleanly_on_a_signal(long_context, sig, code):
    d = long_context
    p = subprocess.Popen([_cli(), "generate", "-m", str(d), "-p", "the quick brown", "-n", "1000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert "stop: cancelled" in err and "[attnzoo] prompt" in err


def test_one_sequence_from_two_threads_is_an_error_and_stays_usable(long_context):
    """While one thread's forward runs on a sequence, another thread's forward on it raises ValueError naming
    `sequences` (before, it corrupted the caches: double free or different logits). Whatever the interleaving,
    the calls that succeeded leave the sequence exactly as if they had run alone, one after another."""
    m = Model.load(str(long_context), enable_prefix_caching=False)
    seq = m.new_sequence()
    warm = checks.prompt(VOCAB, 4, seed=1)
    m.forward(warm, seq)
    long_ids = checks.prompt(VOCAB, 4096, seed=2)  # long enough that the other thread's calls land inside it
    done, lock = [], threading.Lock()              # successful calls, in the order they ran
    errors = []

    def call(ids):
        try:
            m.forward(ids, seq, last_only=True)
            with lock:
                done.append(ids)
        except ValueError as e:
            errors.append(str(e))

    started = threading.Event()
    long_call = threading.Thread(target=lambda: (started.set(), call(long_ids)))
    long_call.start()
    started.wait()
    tries = 0
    while long_call.is_alive() and not errors:
        call(np.array([7], dtype=np.int64))
        tries += 1
    long_call.join()
    assert errors, f"no call ever overlapped the long one ({tries} tries)"
    assert all("sequences" in e for e in errors), errors
    assert 1 <= len(done) <= tries + 1

    # Still usable, and equal to a fresh sequence given the accepted calls in order.
    probe = np.array([3, 5], dtype=np.int64)
    got = m.forward(probe, seq)
    ref = m.new_sequence()
    for ids in [warm] + done:
        m.forward(ids, ref, last_only=True)
    np.testing.assert_allclose(got, m.forward(probe, ref), rtol=1e-5, atol=1e-5)
    assert seq.length == ref.length == len(warm) + sum(len(ids) for ids in done) + len(probe)


def test_different_sequences_on_different_threads_stay_parallel_and_correct(small):
    m = Model.load(str(small))
    prompts = [checks.prompt(VOCAB, 12 + 3 * i, seed=10 + i) for i in range(4)]
    steps = [checks.prompt(VOCAB, 6, seed=20 + i) for i in range(4)]

    def run(i):
        seq = m.new_sequence()
        rows = [m.forward(prompts[i], seq)]
        rows += [m.forward(steps[i][t:t + 1], seq) for t in range(len(steps[i]))]
        return np.concatenate(rows)

    want = [run(i) for i in range(4)]  # one thread, one sequence at a time
    got = [None] * 4
    barrier = threading.Barrier(4)

    def worker(i):
        barrier.wait()
        got[i] = run(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_allclose(got[i], want[i], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("key, value", [("rms_norm_eps", -1), ("sliding_window", -5), ("num_hidden_layers", 1e9),
                                        ("layer_types", ["full_attention", "banana"])])
def test_config_values_are_refused_at_load_naming_the_key(small, tmp_path, key, value):
    d = edits.copy_with(small, tmp_path / "bad", config_edit=lambda c: c.update({key: value}))
    with pytest.raises(ValueError, match=key):
        Model.load(str(d))



@pytest.mark.parametrize("edit, message", [
    ({"head_dim": 17}, "head_dim: must be even for rotary position embeddings, got 17"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 0}}, "rope_theta: must be positive"),
])
def test_config_values_checked_by_the_layers_name_the_file(small, tmp_path, edit, message):
    """Checks made where the layers are built (not by the config reader) still say which file and key."""
    d = edits.copy_with(small, tmp_path / "bad", config_edit=lambda c: c.update(edit))
    with pytest.raises(ValueError) as e:
        Model.load(str(d))
    assert str(e.value).startswith(f"{d / 'config.json'}: {message}"), str(e.value)


def test_generation_config_values_name_the_file(small, tmp_path):
    """A bad temperature in generation_config.json is the file's, not the --temperature flag's."""
    import shutil
    d = tmp_path / "m"
    shutil.copytree(small, d)
    (d / "generation_config.json").write_text(json.dumps({"do_sample": True, "temperature": -1}))
    r = subprocess.run([_cli(), "generate", "-m", str(d), "-p", "the quick", "-n", "2"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0, r.stderr
    assert f"attnzoo: error: {d / 'generation_config.json'}: temperature: must be" in r.stderr, r.stderr

def test_inspect_reports_sizes_that_do_not_fit(tmp_path):
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 1 << 24,
           "hidden_size": 1 << 20, "intermediate_size": 1 << 22, "moe_intermediate_size": 1 << 22,
           "num_hidden_layers": 4096, "num_attention_heads": 128, "num_key_value_heads": 128,
           "n_routed_experts": 65536, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 0,
           "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
           "v_head_dim": 128, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = subprocess.run([_cli(), "inspect", "--config", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "does not fit in 64 bits" in r.stderr, (r.stdout, r.stderr)
    assert "-9" not in r.stdout
    r = subprocess.run([_cli(), "inspect", "--config", "/dev/zero"], capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and "not a regular file" in r.stderr
