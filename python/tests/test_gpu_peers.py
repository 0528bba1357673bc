"""scripts/gpu_peers.py, run whole on the CPU before the GPU sees it: the JSON `attnzoo bench kernels --device cuda
--json` writes (a small one, with a row our entry refused) goes in, every section runs with the script's device
lowered to the CPU and its CUDA-event timer replaced, and what a peer cannot do here (fla's Triton kernels, SDPA's
flash backend) must end up as a note in its row rather than an exception. The torch reference peers of Mamba-2 /
Mamba run for real."""
import importlib.util
import json
import os
import time

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_peers():
    spec = importlib.util.spec_from_file_location("gpu_peers", os.path.join(ROOT, "scripts", "gpu_peers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.DEVICE, module.GEMM_N = "cpu", 64

    def time_once(fn, warmup=0, reps=1):
        fn()
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    module.time_cuda = time_once
    return module


def row(kernel, dims, available=True, **extra):
    r = {"kernel": kernel, "dims": dims, "available": available,
         "error": None if available else "q: chunk_gated_delta_rule runs on the CPU only so far",
         "median_s": 1e-4 if available else None, "min_s": 1e-4 if available else None}
    r.update(extra)
    return r


OURS = {
    "device": "cuda:0 test", "copy_gbps": 4000.0,
    "prefill": [{"B": 1, "T": 32, "Hq": 2, "Hkv": 1, "D": 16, "causal": True, "median_s": 1e-4, "min_s": 1e-4,
                 "tflops": 0.1, "kernel": "sm90", "schedule": "static"},
                {"B": 1, "T": 32, "Hq": 2, "Hkv": 1, "D": 16, "causal": True, "median_s": 5e-5, "min_s": 5e-5,
                 "tflops": 0.2, "kernel": "sm90", "schedule": "dynamic"}],
    "decode": [{"B": 1, "context": 64, "Hq": 2, "Hkv": 1, "D": 16, "block_size": 16, "kv_dtype": "bfloat16",
                "cache_bytes": 4096, "median_s": 1e-5, "min_s": 1e-5, "gbps": 400.0}],
    "gated_delta_decode": [{"B": 2, "H": 2, "K": 16, "V": 16, "state_bytes": 8192, "median_s": 1e-5, "min_s": 1e-5,
                            "gbps": 800.0, "copy_fraction": 0.2}],
    "state_decode": [
        row("kda", {"B": 2, "H": 2, "K": 16, "V": 16}, state_bytes=8192, gbps=80.0, copy_fraction=0.02),
        row("mamba2", {"B": 2, "H": 4, "P": 8, "N": 16, "G": 2}, state_bytes=8192, gbps=80.0, copy_fraction=0.02),
        row("mamba", {"B": 2, "D": 8, "N": 16}, state_bytes=2048, gbps=20.0, copy_fraction=0.005),
        row("mamba_pool", {"B": 2, "D": 8, "N": 16, "slots": 4}, state_bytes=2048, gbps=18.0, copy_fraction=0.005),
        row("conv", {"B": 2, "D": 8, "W": 4}, state_bytes=384, gbps=4.0, copy_fraction=0.001),
        row("rwkv7", {"B": 2, "H": 2, "K": 16, "V": 16}, state_bytes=8192, gbps=80.0, copy_fraction=0.02),
    ],
    "chunk_prefill": [
        row("gated_delta_rule", {"B": 1, "T": 64, "H": 2, "K": 16, "V": 16}, False, tokens=64, flops=1e6,
            tflops=None, tokens_per_s=None),
        row("gla", {"B": 1, "T": 64, "H": 2, "K": 16, "V": 16}, tokens=64, flops=1e6, tflops=0.01,
            tokens_per_s=6.4e5),
        row("mamba2", {"B": 1, "T": 64, "H": 4, "P": 8, "N": 16, "G": 1}, tokens=64, flops=1e6, tflops=0.01,
            tokens_per_s=6.4e5),
        row("rwkv7", {"B": 1, "T": 64, "H": 2, "K": 16, "V": 16}, tokens=64, flops=1e6, tflops=0.01,
            tokens_per_s=6.4e5),
        row("rwkv7_recurrent", {"B": 1, "T": 64, "H": 2, "K": 16, "V": 16}, tokens=64, flops=1e6, tflops=0.005,
            tokens_per_s=3.2e5),
    ],
    "gemm": [
        row("gemm_ours", {"M": 64, "N": 96, "K": 128}, flops=1572864, tflops=0.0157),
        dict(row("gemm_cublaslt", {"M": 64, "N": 96, "K": 128}, False, flops=1572864, tflops=None),
             error="backend: cublaslt cannot run this problem: this build has no cuBLASLt"),
    ],
    "conv_prefill": [row("conv1d_prefill", {"B": 2, "T": 33, "D": 64, "W": 4}, bytes=16896, gbps=0.17,
                         copy_fraction=4e-5)],
}


def test_every_section_runs_and_every_peer_is_guarded(tmp_path, monkeypatch):
    peers = load_peers()
    (tmp_path / "ours.json").write_text(json.dumps(OURS))
    monkeypatch.setattr("sys.argv", ["gpu_peers.py", str(tmp_path / "ours.json"), str(tmp_path), "--budget-s", "120"])
    sdpa_calls = []
    sdpa_seconds = peers.sdpa_seconds
    monkeypatch.setattr(peers, "sdpa_seconds", lambda case, backend: sdpa_calls.append(backend) or
                        sdpa_seconds(case, backend))
    peers.main()
    out = json.loads((tmp_path / "gpu_peers.json").read_text())
    assert out["gemm_tflops"] and len(out["rows"]) == 2 and len(out["decode_rows"]) == 1
    # One prefill shape under two schedules: the peers timed once, both rows beside them.
    assert len(sdpa_calls) == 3 and out["rows"][0]["peers"] == out["rows"][1]["peers"]
    gdn = out["gated_delta_decode_rows"][0]
    assert gdn["peer"].startswith("fla") and (gdn["peer_s"] or gdn["peer_note"])
    linear = {r["kernel"]: r for r in out["state_decode_rows"]}
    assert set(linear) == {"kda", "mamba2", "mamba", "mamba_pool", "conv", "rwkv7"}
    assert linear["rwkv7"]["peer"] == "fla fused_recurrent_rwkv7"
    # A pool-addressed row beside the peer's dense step on the same states.
    assert linear["mamba_pool"]["peer"] == linear["mamba"]["peer"] + " (dense)"
    # Without mamba_ssm the state-space rows' peer is torch's eager math, which runs on any device.
    for kernel in ("mamba2", "mamba", "mamba_pool"):
        assert linear[kernel]["peer_s"] or linear[kernel]["peer"].startswith("mamba_ssm"), linear[kernel]
    for r in out["state_decode_rows"] + out["chunk_prefill_rows"]:
        assert r["peer_s"] is not None or r["peer_note"], r  # a time or the reason there is none
    chunk = out["chunk_prefill_rows"]
    assert chunk[0]["ours_s"] is None and "runs on the CPU only" in chunk[0]["ours_error"]
    assert [r["peer"] for r in chunk[3:]] == ["fla chunk_rwkv7", "fla fused_recurrent_rwkv7"]
    md = (tmp_path / "gpu_peers.md").read_text()
    assert "not available: q: chunk_gated_delta_rule runs on the CPU only so far" in md
    assert "target >= 3x" in md and "target >= 1.5x" in md
    assert "| mamba2 | B=2 H=4 P=8 N=16 G=2 |" in md
    assert "| 1 | 32 | 2/1 | 16 | causal | sm90 static | " in md and "| causal | sm90 dynamic | " in md
    gemm = out["gemm_rows"]
    assert len(gemm) == 1 and gemm[0]["ours_tflops"] == 0.0157 and gemm[0]["torch_tflops"]
    assert "| gemm | M=64 N=96 K=128 | 0 | not available: backend: cublaslt cannot run" in md
    # The convolution's prefill: torch's depthwise conv1d runs anywhere; the others time or say why not.
    conv = out["conv_prefill_rows"]
    assert len(conv) == 1 and set(conv[0]["peers"]) == {"causal-conv1d", "fla causal_conv1d", "torch conv1d"}
    assert conv[0]["peers"]["torch conv1d"]["s"], conv[0]
    assert all(p["s"] or p["note"] for p in conv[0]["peers"].values())
    assert "| conv1d_prefill | B=2 T=33 D=64 W=4 | 0.100 |" in md


def test_a_spent_budget_skips_peers_and_still_writes(tmp_path, monkeypatch):
    peers = load_peers()
    (tmp_path / "ours.json").write_text(json.dumps(OURS))
    monkeypatch.setattr("sys.argv", ["gpu_peers.py", str(tmp_path / "ours.json"), str(tmp_path), "--budget-s", "0"])
    peers.main()
    out = json.loads((tmp_path / "gpu_peers.json").read_text())
    assert out["gemm_tflops"] is None
    assert all("time budget is spent" in r["peer_note"] for r in out["state_decode_rows"] + out["chunk_prefill_rows"])


def test_a_peer_over_its_limit_is_stopped(monkeypatch):
    peers = load_peers()
    monkeypatch.setattr(peers, "PEER_LIMIT_S", 0.2)
    s, note = peers.run_peer(peers.Budget(60), "slow", lambda: (lambda: time.sleep(5)))
    assert s is None and "PeerTimeout" in note
