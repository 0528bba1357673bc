"""Module plumbing: dispatch targets, threads, framework-in/framework-out, error types."""
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
