"""The kernel bench's activation-quantization section (attnzoo/bench/act_quant.py) and the binding it times: every
form writes the 8-bit rows, scales and sums of numpy's plain definition, bit for bit, and the section's rows time
both forms of every shape. No timing thresholds (the machine is shared)."""
import numpy as np
import pytest

import attnzoo
from attnzoo import _core
from attnzoo.bench import act_quant

needs_8bit_rows = pytest.mark.skipif(attnzoo.active_target() == "scalar", reason="the 8-bit rows need AVX2")


def _plain(x):
    """llama.cpp's Q8 blocks of 32 in numpy: d = amax / 127 (f32), q = round(x * (1 / d)) ties to even."""
    T, K = x.shape
    b = x.reshape(T, K // 32, 32)
    d = (np.abs(b).max(axis=2) / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    q = np.rint(b * inv[:, :, None]).astype(np.int32)
    s16 = q.reshape(T, K // 16, 16).sum(axis=2).astype(np.int32)
    return q.reshape(T, K), d, s16


def _split(blob, T, K):
    ld8 = (K + 63) // 64 * 64
    sizes = [("xs8", np.int8, T * ld8), ("d", np.float32, T * K // 32), ("dsum16", np.float32, T * K // 16),
             ("dsum32", np.float32, T * K // 32), ("xsum16", np.int32, T * K // 16)]
    out, at = {}, 0
    for name, dt, n in sizes:
        nbytes = n * np.dtype(dt).itemsize
        out[name] = np.frombuffer(blob[at:at + nbytes], dt)
        at += nbytes
    assert at == len(blob)
    out["xs8"] = out["xs8"].reshape(T, ld8)
    return out


@needs_8bit_rows
@pytest.mark.parametrize("T,K", [(3, 96), (5, 160)])
def test_every_form_writes_the_plain_definition(T, K):
    x = np.random.default_rng(5).standard_normal((T, K), dtype=np.float32) * np.float32(3)
    x[0, 32:64] = 0  # a block of zeros: d 0, q 0
    q, d, s16 = _plain(x)
    quantizer = _core.ActivationQuantizer(T, K)
    blobs = []
    for form in ("all", "gguf", "regrouped"):
        quantizer.run(x, form)
        blobs.append(quantizer.common())
        got = _split(blobs[-1], T, K)
        np.testing.assert_array_equal(got["xs8"][:, :K], q)
        assert not got["xs8"][:, K:].any()  # the padding to 64
        np.testing.assert_array_equal(got["d"].view(np.uint32), d.reshape(-1).view(np.uint32))
        np.testing.assert_array_equal(got["xsum16"], s16.reshape(-1))
        ds16 = (np.repeat(d, 2, axis=1) * s16.astype(np.float32)).astype(np.float32).reshape(-1)
        np.testing.assert_array_equal(got["dsum16"].view(np.uint32), ds16.view(np.uint32))
    assert blobs[0] == blobs[1] == blobs[2]


@needs_8bit_rows
def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="K"):
        _core.ActivationQuantizer(2, 48)
    with pytest.raises(ValueError, match="T"):
        _core.ActivationQuantizer(0, 64)
    quantizer = _core.ActivationQuantizer(2, 64)
    with pytest.raises(ValueError, match="arrays"):
        quantizer.run(np.zeros((2, 64), np.float32), "lanes")
    with pytest.raises(ValueError, match="x"):
        quantizer.run(np.zeros((2, 32), np.float32), "all")
    with pytest.raises((ValueError, TypeError), match="x"):
        quantizer.run(np.zeros((2, 64), np.float64), "all")


def test_the_section_times_both_forms_of_every_shape():
    section = act_quant.run_act_quant("tiny", _core.bench_config("tiny")["timing"])
    assert len(section["rows"]) == len(act_quant.FORMS) * len(act_quant._shapes("tiny"))
    for row in section["rows"]:
        if attnzoo.active_target() == "scalar":
            assert row["note"].startswith("skipped:") and row["ratio"] is None
            continue
        assert row["note"] == ""
        assert row["all_ms"] > 0 and row[f"{row['form']}_ms"] > 0 and row["ratio"] > 0
        assert len(row["round_ratios"]) == section["rounds"]
    text = "\n".join(act_quant.format_act_quant(section))
    assert "ratio = 'all' time" in text
