"""scripts/gpu_serve_check.sh, the GPU machine's serving proof, run whole on the CPU before the GPU sees it: the same
script with --device cpu on test_serve's tiny Llama and small numbers starts `attnzoo serve`, waits for it, runs
both `bench serve` datasets, writes gpu_serve.{log,json} and stops the server, leaving no process behind; and when
a bench step fails, the server is stopped all the same and the script says it failed."""
import json
import os
import signal
import subprocess
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("openai")

from procfs import live_args  # noqa: E402
from test_chat_cli import CLI, needs_cli  # noqa: E402
from test_serve import checkpoint  # noqa: E402,F401  (its session fixture)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_serve_check.sh")


def run_check(model, out_dir, **env):
    """Runs the script in its own process group (a hung run is killed whole, its server with it); returns
    (exit status, gpu_serve.json, gpu_serve.log)."""
    small = dict(GPU_SERVE_MODEL=model, GPU_SERVE_DEVICE="cpu", GPU_SERVE_PROMPTS="6", GPU_SERVE_RATE="20",
                 GPU_SERVE_INPUT_LEN="24", GPU_SERVE_OUTPUT_LEN="5", GPU_SERVE_PREFIX_LEN="64", GPU_SERVE_PREFIXES="2",
                 GPU_SERVE_PREFIX_PROMPTS="8", GPU_SERVE_BUDGET_S="150",
                 GPU_SERVE_ARGS=f"--kv-cache-memory {64 << 20} --max-num-seqs 16")
    environ = {**os.environ, **small, **env}
    proc = subprocess.Popen(["bash", SCRIPT, os.path.dirname(CLI), str(out_dir)], env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        proc.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    with open(out_dir / "gpu_serve.json") as f:
        doc = json.load(f)
    return proc.returncode, doc, (out_dir / "gpu_serve.log").read_text()


def server_pids(log):
    """The pids of the servers the script started (it logs each)."""
    return [int(line.split()[3]) for line in log.splitlines() if line.startswith("=== server pid ")]


def gone(pid, model):
    """No live `attnzoo serve` of this model under that pid (pids are reused quickly on a busy machine: another
    process there is not ours)."""
    args = live_args(pid)
    return args is None or not (b"serve" in args and model.encode() in args)


def test_prefix_ttft_compares_whole_hits_with_misses_and_counts_partial_ones_apart():
    from attnzoo.bench.serve import prefix_ttft

    def result(ttft, cached):
        usage = None if cached is None else {"prompt_tokens_details": {"cached_tokens": cached}}
        return {"start": 10.0, "times": [10.0 + ttft, 11.0], "usage": usage}

    # 2048-token prefix: 2048 and 1024 cached are hits, 16 a partial one, 0 a miss, no usage unknown.
    ok = [result(0.5, 0), result(0.3, 0), result(0.04, 2048), result(0.06, 2048), result(0.05, 1024),
          result(0.2, 16), result(0.1, None)]
    p = prefix_ttft(ok, 2048)
    assert (p["hit_requests"], p["miss_requests"], p["partial_requests"], p["unknown_requests"]) == (3, 2, 1, 1)
    assert p["hit_ttft_ms"]["median"] == pytest.approx(50) and p["miss_ttft_ms"]["median"] == pytest.approx(400)
    assert p["ttft_speedup"] == pytest.approx(8)
    assert prefix_ttft(ok[:2], 2048)["ttft_speedup"] is None  # no hit: no ratio


@needs_cli
def test_the_serve_proof_runs_on_the_cpu(checkpoint, tmp_path):  # noqa: F811
    rc, doc, log = run_check(checkpoint, tmp_path)
    assert rc == 0, log
    assert sorted(os.listdir(tmp_path)) == ["gpu_serve.json", "gpu_serve.log"]
    steps = {s["step"]: s["exit"] for s in doc["steps"]}
    assert steps == {"serve-start": 0, "serve-random": 0, "serve-shared-prefix": 0, "serve-stop": 0,
                     "serve-nocache-start": 0, "serve-shared-prefix-nocache": 0, "serve-nocache-stop": 0}
    random_doc, prefix_doc = doc["serve_random"], doc["serve_shared_prefix"]
    assert random_doc["completed"] == 6 and random_doc["failed"] == 0 and random_doc["request_rate"] == 20
    assert random_doc["total_output_tokens"] == 6 * 5
    assert random_doc["ttft_ms"]["median"] > 0 and random_doc["tpot_ms"]["median"] > 0
    assert prefix_doc["completed"] == 8 and prefix_doc["total_input_tokens"] == 8 * (64 + 64)
    p = prefix_doc["prefix_ttft"]
    # Two groups: each group's first request is a miss; the cache serves 64 tokens (4 whole blocks) to the rest
    # that arrive after their group's first prefill, so there are hits.
    assert p["prefix_len"] == 64 and p["miss_requests"] >= 2 and p["hit_requests"] >= 1
    assert p["hit_requests"] + p["miss_requests"] + p["partial_requests"] + p["unknown_requests"] == 8
    assert p["unknown_requests"] == 0
    assert p["ttft_speedup"] == pytest.approx(p["miss_ttft_ms"]["median"] / p["hit_ttft_ms"]["median"])
    assert doc["proof"]["random_all_completed"] is True
    assert doc["proof"]["prefix_ttft_speedup"] == p["ttft_speedup"]
    # The same prompts on the server without a prefix cache: every one cold.
    cold = doc["serve_shared_prefix_no_caching"]
    assert cold["completed"] == 8 and cold["total_input_tokens"] == prefix_doc["total_input_tokens"]
    assert cold["prefix_ttft"]["miss_requests"] == 8 and cold["prefix_ttft"]["ttft_speedup"] is None
    assert doc["proof"]["prefix_ttft_speedup_vs_no_caching"] == pytest.approx(
        cold["ttft_ms"]["median"] / p["hit_ttft_ms"]["median"])
    assert "Serving Benchmark Result" in log and "TTFT speedup of a hit" in log and "attnzoo serve: ready" in log
    pids = server_pids(log)
    assert len(pids) == 2 and all(gone(pid, checkpoint) for pid in pids)


@needs_cli
def test_a_failed_bench_still_stops_the_server(checkpoint, tmp_path):  # noqa: F811
    rc, doc, log = run_check(checkpoint, tmp_path, GPU_SERVE_RATE="-1")  # serve.py refuses the rate
    assert rc == 1
    steps = {s["step"]: s["exit"] for s in doc["steps"]}
    assert steps["serve-start"] == 0 and steps["serve-random"] != 0 and steps["serve-shared-prefix"] != 0
    assert steps["serve-stop"] == 0
    assert doc["serve_random"] is None and doc["proof"]["random_all_completed"] is False
    assert doc["proof"]["prefix_ttft_speedup"] is None
    assert [s["step"] for s in doc["steps"]][-1] == "serve-stop"  # no run without a prefix cache after it
    pids = server_pids(log)
    assert len(pids) == 1 and gone(pids[0], checkpoint)


@needs_cli
def test_a_server_that_cannot_start_is_recorded_and_nothing_runs(tmp_path):
    rc, doc, log = run_check(str(tmp_path / "no-such-model"), tmp_path / "out")
    assert rc == 1
    steps = {s["step"]: s["exit"] for s in doc["steps"]}
    assert list(steps) == ["serve-start"] and steps["serve-start"] not in (0, None)
    assert "no-such-model" in log  # the server's own error, in the log


@needs_cli
def test_a_run_killed_at_its_limit_leaves_no_server(checkpoint, tmp_path):  # noqa: F811
    """As gpu_check.sh's step `serve` runs it: under `timeout -k`, here cut in the middle of a long random run. The
    signal goes to the whole process group, so the server dies with the script and cannot hold the GPU (or its
    port) through the steps after it."""
    small = dict(GPU_SERVE_MODEL=checkpoint, GPU_SERVE_DEVICE="cpu", GPU_SERVE_PROMPTS="2000", GPU_SERVE_RATE="20",
                 GPU_SERVE_INPUT_LEN="24", GPU_SERVE_OUTPUT_LEN="5", GPU_SERVE_BUDGET_S="150", GPU_SERVE_STOP_S="30",
                 GPU_SERVE_ARGS=f"--kv-cache-memory {64 << 20} --max-num-seqs 16")
    proc = subprocess.run(["timeout", "-k", "3", "20", "bash", SCRIPT, os.path.dirname(CLI), str(tmp_path)],
                          env={**os.environ, **small}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120, start_new_session=True)
    # 124: the script ended on SIGTERM; -9: the SIGKILL 3 s later, which timeout sends its own group, itself included.
    assert proc.returncode in (124, -9), proc.stdout
    log = (tmp_path / "gpu_serve.log").read_text()
    assert "=== serve-random (limit" in log, log  # cut while the load ran, not before the server was up
    pids = server_pids(log)
    assert len(pids) == 1
    for _ in range(50):  # the group's SIGKILL lands 3 s after the SIGTERM at the latest
        if gone(pids[0], checkpoint):
            break
        time.sleep(0.1)
    assert gone(pids[0], checkpoint), f"server {pids[0]} outlived its script"
