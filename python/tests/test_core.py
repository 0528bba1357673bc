"""Module plumbing: dispatch targets, threads, framework-in/framework-out, error types."""
import os

import numpy as np
import pytest
import torch

import attnzoo


def test_targets_listed_best_first_and_switchable():
    targets = attnzoo.supported_targets()
    assert targets and targets[-1] == "scalar"
    best = targets[0]
    try:
        for t in targets:
            attnzoo.set_target(t)
            assert attnzoo.active_target() == t
    finally:
        attnzoo.set_target(best)


def test_unknown_target_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="target"):
        attnzoo.set_target("avx9000")


def test_thread_count_can_change_and_rejects_nonsense():
    n = attnzoo.num_threads()
    try:
        attnzoo.set_num_threads(1)
        assert attnzoo.num_threads() == 1
        q = np.random.default_rng(0).standard_normal((1, 70, 2, 32), dtype=np.float32)
        single = attnzoo.attention(q, q, q)
        attnzoo.set_num_threads(3)
        np.testing.assert_array_equal(attnzoo.attention(q, q, q), single)  # tasks are independent: same bits
    finally:
        attnzoo.set_num_threads(n)
    with pytest.raises(ValueError, match="num_threads"):
        attnzoo.set_num_threads(0)


def test_output_follows_input_framework_and_dtype():
    q = torch.randn(1, 5, 2, 16)
    assert isinstance(attnzoo.attention(q, q, q), torch.Tensor)
    assert attnzoo.attention(q.bfloat16(), q.bfloat16(), q.bfloat16()).dtype == torch.bfloat16
    qn = q.numpy()
    out = attnzoo.attention(qn, qn, qn)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32


def test_cpu_info_reports_caches():
    info = attnzoo.cpu_info()
    assert info["logical_cpus"] >= 1
    assert info["l1d_bytes"] >= 0
    # the description leads with the model name and, where /proc/cpuinfo gives them, the family / model numbers
    assert info["description"].startswith(info["model"] or "unknown CPU")
    if info["family"] >= 0 and info["model_number"] >= 0:
        assert f"family {info['family']} model {info['model_number']}" in info["description"]


def test_bf16_dot_rule_follows_the_vendor_unless_the_environment_says():
    """vdpbf16ps ran at half the f32 FMA rate on an Intel Emerald Rapids and twice it on AMD Zen 4 / Zen 5: the
    default widens bf16 to f32 on Intel only; ATTNZOO_BF16_DOT=0|1 overrides. (conftest.py sets it to 1, so the
    process's own setting cannot show the default: the pure rule can.)"""
    from attnzoo import _core
    assert _core.bf16_dot_preference("GenuineIntel", None)[0] is False
    assert _core.bf16_dot_preference("AuthenticAMD", None)[0] is True
    assert _core.bf16_dot_preference("SomeOtherVendor", "")[0] is True
    assert _core.bf16_dot_preference("GenuineIntel", "1") == (True, "ATTNZOO_BF16_DOT=1")
    assert _core.bf16_dot_preference("AuthenticAMD", "0") == (False, "ATTNZOO_BF16_DOT=0")
    with pytest.raises(ValueError, match="ATTNZOO_BF16_DOT"):
        _core.bf16_dot_preference("AuthenticAMD", "on")
    # The tests run the bf16 kernels wherever the CPU has them.
    if os.environ["ATTNZOO_BF16_DOT"] == "1":
        assert _core.bf16_dot_enabled() == (attnzoo.active_target() == "avx512_bf16")
