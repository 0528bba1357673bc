"""The GPU run's torch comparison, kept honest on the CPU: `attnzoo bench kernels --write-cases DIR` runs the
softmax entries on seeded cases (ragged varlen prefill, bottom-right causal, windows, softcap, sinks, ALiBi, paged
decode over bf16 / int8 / fp8 caches at block sizes 16 and 64) and the linear family's (Gated DeltaNet, KDA, GLA
decode batches and ragged packed sequences with initial states, strong and mild decays; GDN's, GLA's and RWKV-7's
chunked prefill),
and scripts/check_vs_torch.py recomputes each with torch (the linear ones with check_linear_vs_torch.py's float64
recurrence, beside fla's naive recurrences where fla is installed). On the GPU machine the same two commands
check the CUDA kernels against torch there; here they check the CPU kernels, and that the script fails where it
should.

The CLI binary is $ATTNZOO_CLI, else build/attnzoo of this checkout."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
SCRIPT = os.path.join(ROOT, "scripts", "check_vs_torch.py")
pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("cases")
    r = subprocess.run([CLI, "bench", "kernels", "--write-cases", str(d), "--device", "cpu"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "72 cases written" in r.stdout and "0 refused" in r.stdout, r.stdout
    return d


def check(d, *extra):
    return subprocess.run([sys.executable, SCRIPT, str(d), *extra], capture_output=True, text=True, timeout=300)


def copy_cases(src, dst):
    for name in os.listdir(src):
        with open(os.path.join(src, name), "rb") as f, open(os.path.join(dst, name), "wb") as g:
            g.write(f.read())
    return dst


def test_every_cpu_case_matches_torch(cases, tmp_path):
    r = check(cases, "--json", str(tmp_path / "rows.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert len(rows) == 11 and all(row["ok"] for row in rows)
    kinds = {row["name"].split("_")[0] for row in rows}
    assert kinds == {"prefill", "decode"}
    # torch's own fused attention is compared where it can express the case (no softcap, no sinks).
    assert rows[0]["sdpa_max_err"] is not None


def cases_where(src, dst, keep):
    """The cases `keep(case)` takes, alone (their own manifest), so the tests that break one of them check only
    those."""
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["cases"] = [c for c in manifest["cases"] if keep(c)]
    for name in os.listdir(src):
        if any(name.startswith(c["name"] + "_") for c in manifest["cases"]):
            with open(os.path.join(src, name), "rb") as f, open(os.path.join(dst, name), "wb") as g:
                g.write(f.read())
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def linear_only(src, dst):
    return cases_where(src, dst, lambda c: c["kind"] == "linear")


LINEAR = {"gdn_decode_mild_gva", "gdn_varlen_strong", "kda_decode_strong", "kda_varlen_mild", "gla_decode_mild",
          "gla_varlen_strong", "gdn_chunk_varlen", "gla_chunk_varlen", "rwkv7_varlen", "rwkv7_decode_kv",
          "rwkv7_chunk_varlen", "conv1d_varlen"}
NO_FLA_COLUMN = {"rwkv7_varlen", "rwkv7_decode_kv", "rwkv7_chunk_varlen", "conv1d_varlen"}


def test_every_linear_cpu_case_matches_the_recurrence(cases, tmp_path):
    r = check(cases, "--json", str(tmp_path / "rows.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row["name"]: row for row in json.loads((tmp_path / "rows.json").read_text())["linear_rows"]}
    assert set(rows) == LINEAR and all(row["ok"] and row["status"] == "ok" for row in rows.values())
    # Every case holds a token sequence to check and a state to carry (no vacuous zero-error rows).
    # (The convolution's final state is its last inputs, copied: exact.)
    assert all(0 < row["max_err"] < 1e-4 and (0 < row["state_max_err"] < 1e-4 or name == "conv1d_varlen")
               for name, row in rows.items()), rows
    assert "| gdn_chunk_varlen | chunk_gated_delta_rule | ok |" in r.stdout
    assert "| gla_chunk_varlen | chunk_gla | ok |" in r.stdout
    assert "| rwkv7_chunk_varlen | chunk_rwkv7 | ok |" in r.stdout
    if importlib.util.find_spec("fla") is not None:
        # fla's own naive recurrences (loaded from their files where fla's kernels need a triton this machine lacks)
        # agree with the script's: its recurrence is fla's math and layout, not only ours.
        for name in LINEAR - {"gdn_decode_mild_gva"} - NO_FLA_COLUMN:  # the naive GDN has no grouped value heads
            assert rows[name]["fla_naive_max_err"] is not None and rows[name]["fla_naive_max_err"] < 1e-4, rows[name]


@pytest.mark.parametrize("name,what,index", [("kda_varlen_mild", "final_state", (1, 0, 3, 7)),
                                              ("gdn_decode_mild_gva", "out", (4, 0, 7, 100)),
                                              ("gdn_chunk_varlen", "out", (0, 300, 1, 5)),
                                              ("rwkv7_varlen", "final_state", (0, 1, 63, 2)),
                                              ("rwkv7_decode_kv", "out", (2, 0, 3, 127)),
                                              ("rwkv7_chunk_varlen", "out", (0, 267, 1, 63)),
                                              ("conv1d_varlen", "out", (0, 109, 95)),
                                              ("conv1d_varlen", "final_state", (2, 0, 0))])
def test_a_wrong_linear_output_fails_by_name(cases, tmp_path, name, what, index):
    d = linear_only(cases, tmp_path)
    a = np.load(d / f"{name}_{what}.npy")
    a[index] += 0.5  # one element: the one-token sequence's state, the last decode row, the longest sequence's end
    np.save(d / f"{name}_{what}.npy", a)
    r = check(d)
    assert r.returncode == 1
    assert name in r.stderr and f"| {name} |" in r.stdout and "| NO |" in r.stdout
    assert r.stdout.count("| NO |") == 1


def test_a_refused_linear_case_fails_by_name(cases, tmp_path):
    # Every linear entry, the chunked prefill included, runs on the GPU: a refusal there is a failure.
    d = linear_only(cases, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    by_name = {c["name"]: c for c in manifest["cases"]}
    by_name["gdn_chunk_varlen"].update(status="refused", error="q: K=256 exceeds 128")
    (d / "manifest.json").write_text(json.dumps(manifest))
    r = check(d)
    assert r.returncode == 1 and "gdn_chunk_varlen" in r.stderr, r.stdout + r.stderr
    assert "| gdn_chunk_varlen | chunk_gated_delta_rule | refused: q: K=256 exceeds 128 | | | | | | NO |" in r.stdout


def test_a_wrong_output_fails_by_name(cases, tmp_path):
    d = copy_cases(cases, tmp_path)
    out = np.load(d / "decode_bf16_bs16_out.npy")
    out[3, 0, 5, 17] += 0.5  # one element of the last sequence's output
    np.save(d / "decode_bf16_bs16_out.npy", out)
    r = check(d)
    assert r.returncode == 1
    assert "decode_bf16_bs16" in r.stderr and "| decode_bf16_bs16 | ok |" in r.stdout and "| NO |" in r.stdout


def test_a_refused_case_fails(cases, tmp_path):
    d = copy_cases(cases, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["cases"][1].update(status="refused", error="q: head dim 64 is not built for this device")
    (d / "manifest.json").write_text(json.dumps(manifest))
    r = check(d)
    assert r.returncode == 1 and "head dim 64 is not built" in r.stdout


def test_write_cases_needs_a_directory():
    r = subprocess.run([CLI, "bench", "kernels", "--write-cases"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--write-cases" in r.stderr


STEP = {"gemv_BF16", "gemv_Q8_0", "gemv_Q4_0", "gemv_Q4_K", "gemv_Q6_K", "kv_write_bfloat16", "kv_write_int8",
        "kv_write_float8_e4m3fn", "embedding_BF16", "embedding_Q8_0", "embedding_Q4_0", "embedding_Q4_K",
        "embedding_Q6_K", "grouped_routing_v3", "grouped_routing_v2", "sampling_rows"}


def step_only(src, dst):
    return cases_where(src, dst, lambda c: c["name"] in STEP)


needs_gguf = pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="gguf-py (the GGUF decoders) absent")


@needs_gguf
def test_every_step_cpu_case_matches_its_reference(cases, tmp_path):
    r = check(cases, "--json", str(tmp_path / "rows.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row["name"]: row for row in json.loads((tmp_path / "rows.json").read_text())["step_rows"]}
    assert set(rows) == STEP and all(row["ok"] and row["status"] == "ok" for row in rows.values()), rows
    # The GEMV's sums differ from the float64 ones by rounding only, and not by nothing (a real comparison).
    assert all(0 < rows[f"gemv_{f}"]["max_err"] < 1e-2 for f in ("BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"))
    assert rows["grouped_routing_v3"]["ids_equal"] and rows["kv_write_bfloat16"]["max_err"] == 0
    assert "| embedding_Q4_K | embedding | ok |" in r.stdout


def corrupt(d, name, what, index, change):
    a = np.load(d / f"{name}_{what}.npy")
    a[index] = change(a[index])
    np.save(d / f"{name}_{what}.npy", a)


def last_logit_argmax(d, row):
    logits = np.load(d / "sampling_rows_logits.npy")
    return int(np.argsort(logits[row])[0])  # the row's smallest logit: never the argmax, never in top-20


@needs_gguf
@pytest.mark.parametrize("name,what,index,change", [
    ("gemv_Q4_K", "out", (2, 39), lambda x: x * 1.01 + 1),       # one output, past any rounding
    ("gemv_Q6_K", "w", (7, 100), lambda x: x ^ 0x10),             # one weight's bits: our y no longer matches it
    ("embedding_Q6_K", "out", (22, 511), lambda x: x * 1.001),
    ("kv_write_float8_e4m3fn", "v_scale", (0, 0, 0), lambda x: x * 1.01),
    ("kv_write_bfloat16", "v_cache", (0, 1, 2, 3), lambda x: x ^ 1),
    ("grouped_routing_v3", "experts", (4, 7), lambda x: (x + 1) % 256),
    ("grouped_routing_v2", "weights", (18, 0), lambda x: x * 1.001),
])
def test_a_wrong_step_output_fails_by_name(cases, tmp_path, name, what, index, change):
    d = step_only(cases, tmp_path)
    corrupt(d, name, what, index, change)
    r = check(d)
    assert r.returncode == 1, r.stdout
    assert name in r.stderr and f"| {name} |" in r.stdout and r.stdout.count("| NO |") == 1, r.stdout


@pytest.mark.parametrize("which", ["unwritten", "written"])
def test_a_kv_write_outside_its_slots_or_off_its_scale_fails(cases, tmp_path, which):
    # A slot no token went to must keep its bytes; a written int8 row must sit within half a step of its input.
    d = step_only(cases, tmp_path)
    slots = np.load(d / "kv_write_int8_slot_mapping.npy")
    used = set(int(s) for s in slots if s >= 0)
    slot = min(set(range(6 * 16)) - used) if which == "unwritten" else int(slots[0])
    corrupt(d, "kv_write_int8", "k_cache", (slot // 16, slot % 16, 1, 64), lambda x: np.int8(x // 2 + 20))
    r = check(d)
    assert r.returncode == 1 and "kv_write_int8" in r.stderr, r.stdout
    assert r.stdout.count("| NO |") == 1


@needs_gguf
@pytest.mark.parametrize("row", [0, 2, 4])  # greedy, top-k 20, top-k 50 + top-p 0.9
def test_a_sampled_token_outside_its_set_fails(cases, tmp_path, row):
    d = step_only(cases, tmp_path)
    worst = last_logit_argmax(d, row)
    corrupt(d, "sampling_rows", "ids", row, lambda x: worst)
    r = check(d, "--json", str(tmp_path / "rows.json"))
    assert r.returncode == 1 and "sampling_rows" in r.stderr, r.stdout
    rows = {x["name"]: x for x in json.loads((tmp_path / "rows.json").read_text())["step_rows"]}
    assert rows["sampling_rows"]["bad_rows"] == [row]


DEQUANT = {f"dequant_{f}" for f in ("Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K")}
ELEMENTWISE = {f"elementwise_{op}" for op in ("mul", "sigmoid_gate", "add_scaled", "scale_softcap",
                                              "query_temperature", "transpose", "row_copy")}
LAYERS = {"moe_qwen3", "moe_qwen2_shared", "delta_gates_gdn", "delta_gates_kda"} | DEQUANT | ELEMENTWISE


def layers_only(src, dst):
    return cases_where(src, dst, lambda c: c["name"] in LAYERS)


@needs_gguf
def test_every_layer_cpu_case_matches_its_reference(cases, tmp_path):
    d = layers_only(cases, tmp_path)
    r = check(d, "--json", str(tmp_path / "rows.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row["name"]: row for row in json.loads((tmp_path / "rows.json").read_text())["layer_rows"]}
    assert set(rows) == LAYERS and all(row["ok"] and row["status"] == "ok" for row in rows.values()), rows
    # The CPU's f32 MoE differs from the float64 one by rounding only, and not by nothing.
    assert all(0 < rows[name]["max_err"] < 1e-3 for name in ("moe_qwen3", "moe_qwen2_shared"))
    assert rows["moe_qwen3"]["ids_equal"] and rows["moe_qwen3"]["weights_err"] < 1e-6
    assert "| moe_qwen2_shared | moe | ok |" in r.stdout
    # The CPU's expansion is dequant_reference rounded to bf16: gguf-py's values rounded the same way, but for
    # the rare tie an f32 operation in another order may break differently.
    assert all(rows[name]["bf16_equal_fraction"] > 0.99 for name in DEQUANT), rows
    assert rows["elementwise_transpose"]["max_err"] == 0 and rows["elementwise_row_copy"]["max_err"] == 0
    assert all(0 < rows[name]["max_err"] < 1e-4 for name in ("delta_gates_gdn", "delta_gates_kda"))


def other_expert(d, name, token):
    """An expert the token did not choose."""
    chosen = set(np.load(d / f"{name}_experts.npy")[token].tolist())
    return min(set(range(60)) - chosen)


@pytest.mark.parametrize("name,what,index,change", [
    ("moe_qwen3", "out", (3, 100), lambda x: x + 0.05),           # one output, past the bf16 activations' rounding
    ("moe_qwen2_shared", "out", (18, 127), lambda x: x - 0.05),
    ("moe_qwen2_shared", "weights", (5, 1), lambda x: x * 1.001),  # one routing weight
    ("moe_qwen3", "experts", (7, 7), None),                        # a slot's expert: one the token did not choose
    ("dequant_Q4_1", "out", (5, 300), lambda x: x ^ 2),            # one bf16 two ulps off
    ("dequant_Q5_K", "w", (20, 200), lambda x: x ^ 0x10),          # one weight's bits: our panel no longer matches
    ("delta_gates_kda", "g", (9, 130), lambda x: x * 1.001),
    ("delta_gates_gdn", "beta", (36, 11), lambda x: x + 1e-4),
    ("elementwise_query_temperature", "out", (8, 17), lambda x: x ^ 2),
    ("elementwise_scale_softcap", "out", (12, 199), lambda x: x ^ 2),
    ("elementwise_row_copy", "out", (2, 69), lambda x: x + 1),     # a row no index wrote: untouched
    ("elementwise_transpose", "out", (149, 36), lambda x: x * 1.0000001 + 1e-30),
])
def test_a_wrong_layer_output_fails_by_name(cases, tmp_path, name, what, index, change):
    if name.startswith("dequant") and importlib.util.find_spec("gguf") is None:
        pytest.skip("gguf-py (the GGUF decoders) absent")
    d = layers_only(cases, tmp_path)
    if change is None:
        change = lambda x, e=other_expert(d, name, index[0]): e  # noqa: E731
    corrupt(d, name, what, index, change)
    r = check(d)
    assert r.returncode == 1, r.stdout
    assert name in r.stderr and f"| {name} |" in r.stdout and r.stdout.count("| NO |") == 1, r.stdout


RUNNER = {"rwkv7_shift_mix_time", "rwkv7_shift_mix_channel", "rwkv7_norm_shift_mix_time", "rwkv7_prepare_keys_first",
          "rwkv7_prepare_keys", "rwkv7_output", "gpt_oss_grouped_bias", "gpt_oss_swiglu", "head_rows_gather_pad",
          "head_rows_broadcast", "moe_group"} | {f"rwkv7_activate_{a}" for a in ("none", "tanh", "sigmoid", "decay", "relu2")}


def runner_only(src, dst):
    return cases_where(src, dst, lambda c: c["name"] in RUNNER)


def test_every_runner_cpu_case_matches_its_reference(cases, tmp_path):
    # The runners' own kernels' CPU twins against fla's RWKV-7, transformers' gpt-oss and torch's indexing / sort.
    d = runner_only(cases, tmp_path)
    r = check(d, "--json", str(tmp_path / "rows.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row["name"]: row for row in json.loads((tmp_path / "rows.json").read_text())["layer_rows"]}
    assert set(rows) == RUNNER and all(row["ok"] and row["status"] == "ok" for row in rows.values()), rows
    # f32 math against float64: rounding, and not nothing; the copies and the grouping exact.
    assert all(0 < rows[name]["max_err"] < 1e-5 for name in ("rwkv7_prepare_keys_first", "rwkv7_prepare_keys",
                                                             "gpt_oss_swiglu", "rwkv7_activate_decay")), rows
    assert all(rows[name]["max_err"] == 0 for name in ("head_rows_gather_pad", "head_rows_broadcast", "moe_group"))
    assert rows["rwkv7_shift_mix_time"]["shift_ok"] and rows["rwkv7_norm_shift_mix_time"]["shift_ok"]
    assert "| moe_group | moe_group | ok |" in r.stdout


@pytest.mark.parametrize("name,what,index,change", [
    ("rwkv7_shift_mix_time", "out", (5, 15, 7), lambda x: x ^ 2),     # the pad token's lerp, two ulps off
    ("rwkv7_shift_mix_channel", "shift", (5, 100), lambda x: x + 1e-3),  # an empty sequence's row: left alone
    ("rwkv7_shift_mix_time", "shift", (0, 95), lambda x: x + 1e-3),   # the decode token's row: its token, exactly
    ("rwkv7_norm_shift_mix_time", "out", (2, 3, 7), lambda x: x ^ 2),       # a lerp of the normed rows
    ("rwkv7_norm_shift_mix_time", "shift", (0, 95), lambda x: x + 1e-3),    # the decode token's normed row
    ("rwkv7_activate_decay", "y", (123,), lambda x: x * 1.001),
    ("rwkv7_prepare_keys", "b_out", (3, 100), lambda x: x + 1e-4),
    ("rwkv7_prepare_keys_first", "v_first_out", (2, 50), lambda x: x + 1e-4),  # the first layer's v_first is v
    ("rwkv7_output", "out", (5, 143), lambda x: x ^ 0x40),
    ("gpt_oss_grouped_bias", "out", (15, 3), lambda x: x + 1e-3),   # a row of the expert after the empty one
    ("gpt_oss_swiglu", "out", (30, 39), lambda x: x + 0.01),
    ("head_rows_gather_pad", "dst", (2, 1, 150), lambda x: x + 1),  # a row no index wrote: untouched
    ("head_rows_broadcast", "dst", (4, 3, 80), lambda x: x ^ 1),    # the zero pad after the copied columns
    ("moe_group", "dest", (2000,), lambda x: x + 1),
])
def test_a_wrong_runner_output_fails_by_name(cases, tmp_path, name, what, index, change):
    d = runner_only(cases, tmp_path)
    corrupt(d, name, what, index, change)
    r = check(d)
    assert r.returncode == 1, r.stdout
    assert name in r.stderr and f"| {name} |" in r.stdout and r.stdout.count("| NO |") == 1, r.stdout
