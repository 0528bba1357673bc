"""CUDA tensors through the state-space bindings whose kernels also run on a GPU (Mamba-2's recurrent and chunked
forms and decode step, RWKV-7's recurrent and chunked forms, the short convolution's prefill and decode step): they reach the
CUDA entry without a copy, and the entries that read host memory refuse them by name. No GPU here: test_cuda_tensors.FakeCuda
(a DLPack producer that claims CUDA memory over host bytes nobody dereferences) stands in for a torch CUDA tensor, and the call must end in the
device's own error (no GPU / no CUDA in this build), never in a read of the pointer as host memory. The bindings
are called directly: the wrappers allocate outputs in the caller's framework, which a bare DLPack producer does
not have (a torch CUDA tensor gets its outputs on its device)."""
import numpy as np
import pytest

from attnzoo import _core
from test_cuda_tensors import FakeCuda, _no_device_error

Bn, T, H, P, G, N = 2, 3, 4, 64, 1, 128


def _mamba2_inputs():
    return dict(x=FakeCuda((Bn, T, H, P)), dt=FakeCuda((Bn, T, H)), A=FakeCuda((H,), bf16=False),
                B=FakeCuda((Bn, T, G, N)), C=FakeCuda((Bn, T, G, N)), D=FakeCuda((H,), bf16=False),
                z=FakeCuda((Bn, T, H, P)), dt_bias=FakeCuda((H,), bf16=False),
                state=FakeCuda((Bn, H, P, N), bf16=False), y=FakeCuda((Bn, T, H, P)))


def _scan(mode, a, **over):
    a = {**a, **over}
    _core.mamba2_scan(mode, a["x"], a["dt"], a["A"], a["B"], a["C"], a["D"], a["z"], a["dt_bias"], True, None,
                      a["state"], a["y"], a["state"], None, 64)


def test_mamba2_recurrent_and_chunked_forms_reach_the_cuda_entry_and_the_reference_refuses():
    a = _mamba2_inputs()
    for mode in ("recurrent", "chunk"):
        with pytest.raises(RuntimeError) as e:
            _scan(mode, a)
        _no_device_error(e)
    with pytest.raises(ValueError, match=r"x: lives on cuda:0; mamba2_reference runs on the CPU only so far "
                                         r"\(the chunked form, like the recurrent one, also runs on CUDA\)"):
        _scan("reference", a)
    # Every tensor must live where x does: the odd one is named.
    with pytest.raises(ValueError, match="dt_bias: lives on cpu, x on cuda:0"):
        _scan("recurrent", a, dt_bias=np.zeros(H, np.float32))
    # Shapes are still checked before the device is touched.
    with pytest.raises(ValueError, match="C: expected shape"):
        _scan("recurrent", a, C=FakeCuda((Bn, T, G, N + 1)))


def test_mamba2_decode_step_reaches_the_cuda_entry():
    x, dt, B, C = FakeCuda((Bn, H, P)), FakeCuda((Bn, H)), FakeCuda((Bn, G, N)), FakeCuda((Bn, G, N))
    A, state, y = FakeCuda((H,), bf16=False), FakeCuda((Bn, H, P, N), bf16=False), FakeCuda((Bn, H, P))

    def step(reference=False, state=state, x=x):
        _core.mamba2_state_update(reference, state, x, dt, A, B, C, None, None, None, True, (0.0, 1.0), y)

    with pytest.raises(RuntimeError) as e:
        step()
    _no_device_error(e)
    with pytest.raises(ValueError, match="state: lives on cuda:0; mamba2_state_update_reference runs on the CPU"):
        step(reference=True)
    with pytest.raises(ValueError, match="x: lives on cpu, state on cuda:0"):
        step(x=np.zeros((Bn, H, P), np.float32))


def test_conv_decode_step_and_prefill_reach_the_cuda_entry_and_the_reference_refuses():
    D, W = 256, 4
    x, state, w, y = FakeCuda((Bn, D)), FakeCuda((Bn, D, W - 1), bf16=False), FakeCuda((D, W)), FakeCuda((Bn, D))
    with pytest.raises(RuntimeError) as e:
        _core.causal_conv1d_update(x, state, w, None, y, "silu")
    _no_device_error(e)
    with pytest.raises(ValueError, match="weight: lives on cpu, x on cuda:0"):
        _core.causal_conv1d_update(x, state, np.zeros((D, W), np.float32), None, y, "silu")
    xs, ys, cu = FakeCuda((1, 8, D)), FakeCuda((1, 8, D)), np.array([0, 3, 8], np.int32)
    states = FakeCuda((2, D, W - 1), bf16=False)
    with pytest.raises(RuntimeError) as e:
        _core.causal_conv1d(xs, w, None, ys, states, states, "silu", cu)
    _no_device_error(e)
    with pytest.raises(ValueError, match=r"x: lives on cuda:0; causal_conv1d_reference runs on the CPU only so far "
                                         r"\(causal_conv1d, like causal_conv1d_update, also runs on CUDA\)"):
        _core.causal_conv1d(xs, w, None, ys, states, states, "silu", cu, True)
    with pytest.raises(ValueError, match="initial_state: expected \\[2, 256, S\\]"):
        _core.causal_conv1d(xs, w, None, ys, FakeCuda((3, D, W - 1), bf16=False), None, "silu", cu)


def test_selective_scan_and_its_decode_step_reach_the_cuda_entry():
    D, L, Ns = 64, 3, 16
    u, delta, out = FakeCuda((Bn, D, L)), FakeCuda((Bn, D, L)), FakeCuda((Bn, D, L))
    A, B, C = FakeCuda((D, Ns), bf16=False), FakeCuda((Bn, Ns, L)), FakeCuda((Bn, Ns, L))
    state = FakeCuda((Bn, D, Ns), bf16=False)

    def scan(reference=False, A=A):
        _core.selective_scan(reference, u, delta, A, B, C, None, None, None, True, state, out, state, None)

    with pytest.raises(RuntimeError) as e:
        scan()
    _no_device_error(e)
    with pytest.raises(ValueError, match="u: lives on cuda:0; selective_scan_reference runs on the CPU only so far"):
        scan(reference=True)
    with pytest.raises(ValueError, match="A: lives on cpu, u on cuda:0"):
        scan(A=np.zeros((D, Ns), np.float32))

    x, dt, y, B1, C1 = FakeCuda((Bn, D)), FakeCuda((Bn, D)), FakeCuda((Bn, D)), FakeCuda((Bn, Ns)), FakeCuda((Bn, Ns))
    with pytest.raises(RuntimeError) as e:
        _core.selective_state_update(False, state, x, dt, A, B1, C1, None, None, None, True, y)
    _no_device_error(e)


def test_rwkv7_recurrent_and_chunked_forms_reach_the_cuda_entry_and_the_reference_refuses():
    K, V = 64, 32
    r, w, k, a, b = (FakeCuda((Bn, T, H, K)) for _ in range(5))
    v, o, state = FakeCuda((Bn, T, H, V)), FakeCuda((Bn, T, H, V)), FakeCuda((Bn, H, K, V), bf16=False)

    def call(form, w=w, state=state):
        _core.rwkv7(form, r, w, k, v, a, b, 1.0, state, o, state, None, 64)

    for form in ("recurrent", "chunk"):
        with pytest.raises(RuntimeError) as e:
            call(form)
        _no_device_error(e)
    with pytest.raises(ValueError, match="rwkv7_reference runs on the CPU only"):
        call("reference")
    with pytest.raises(ValueError, match="w: lives on cpu, r on cuda:0"):
        call("recurrent", w=np.zeros((Bn, T, H, K), np.float32))
    with pytest.raises(ValueError, match="initial_state: expected shape"):
        call("recurrent", state=FakeCuda((Bn, H, K, V + 1), bf16=False))
