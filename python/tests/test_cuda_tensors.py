"""CUDA tensors through the Python functions whose kernels also run on a GPU (attention, attention_decode): they
reach the CUDA entry without a copy, and everything that reads host memory refuses them by name. No GPU here:
a DLPack producer that claims CUDA memory (over host bytes nobody dereferences) stands in for a torch CUDA
tensor, and the call must end in the device's own error (no GPU / no CUDA in this build), never in a read of
the pointer as host memory. On the GPU machine scripts/check_vs_torch.py compares the results themselves."""
import ctypes

import numpy as np
import pytest

import attnzoo
from attnzoo import _core


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_NO_OP = _DELETER(lambda _: None)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCuda:
    """A bfloat16 (or float32) array presented through DLPack as living on cuda:0 (legacy, unversioned capsules)."""

    def __init__(self, shape, device_type=2, bf16=True):
        self.host = np.zeros(shape, dtype=np.uint16 if bf16 else np.float32)
        self.code = (4, 16) if bf16 else (2, 32)  # DLPack's kDLBfloat / kDLFloat, bits
        self.device_type = device_type
        self._keep = []

    @property
    def shape(self):
        return self.host.shape

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, max_version=None, **_):
        shape = (ctypes.c_int64 * self.host.ndim)(*self.host.shape)
        strides = (ctypes.c_int64 * self.host.ndim)(*(s // self.host.itemsize for s in self.host.strides))
        m = _DLManagedTensor()
        m.dl_tensor = _DLTensor(self.host.ctypes.data, _DLDevice(self.device_type, 0), self.host.ndim,
                                _DLDataType(*self.code, 1), shape, strides, 0)
        m.deleter = _NO_OP
        self._keep += [shape, strides, m]
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)


def _no_device_error(excinfo):
    msg = str(excinfo.value)
    assert "cuda:0" in msg and ("not present" in msg or "without CUDA" in msg or "no CUDA device" in msg), msg


def test_attention_reaches_the_cuda_entry():
    q, k, v, out = FakeCuda((1, 8, 4, 64)), FakeCuda((1, 8, 2, 64)), FakeCuda((1, 8, 2, 64)), FakeCuda((1, 8, 4, 64))
    with pytest.raises(RuntimeError) as e:
        _core.attention(q, k, v, out, True, None, None, None, None, None, None, None, None, None, None)
    _no_device_error(e)
    # The wrapper passes DLPack CUDA objects through as well (a torch CUDA tensor would also bring its stream).
    with pytest.raises(RuntimeError) as e:
        attnzoo.attention(q, k, v, out=out, check_inputs=False)
    _no_device_error(e)


def test_attention_decode_reaches_the_cuda_entry():
    q, out = FakeCuda((2, 1, 4, 64)), FakeCuda((2, 1, 4, 64))
    k, v = FakeCuda((6, 16, 2, 64)), FakeCuda((6, 16, 2, 64))
    table = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int32)
    with pytest.raises(RuntimeError) as e:
        attnzoo.attention_decode(q, k, v, np.array([40, 17], dtype=np.int32), block_table=table, out=out,
                                 check_inputs=False)
    _no_device_error(e)


def test_validation_still_runs_first_and_names_the_argument():
    # Shapes and metadata are checked on the host before any device is touched.
    q, out = FakeCuda((1, 8, 4, 64)), FakeCuda((1, 8, 4, 64))
    with pytest.raises(ValueError, match="k"):
        _core.attention(q, FakeCuda((1, 8, 3, 64)), FakeCuda((1, 8, 3, 64)), out, True, None, None, None, None, None,
                        None, None, None, None, None)
    with pytest.raises(ValueError, match="out"):
        _core.attention(q, FakeCuda((1, 8, 2, 64)), FakeCuda((1, 8, 2, 64)), np.zeros((1, 8, 4, 64), np.float32),
                        True, None, None, None, None, None, None, None, None, None, None)
    # What the CUDA kernels do not take is said before the device is asked for.
    with pytest.raises(TypeError, match="q: CUDA prefill takes bfloat16 or float16, got float32"):
        _core.attention(FakeCuda((1, 8, 4, 64), bf16=False), FakeCuda((1, 8, 2, 64), bf16=False),
                        FakeCuda((1, 8, 2, 64), bf16=False), FakeCuda((1, 8, 4, 64), bf16=False), True, None, None,
                        None, None, None, None, None, None, None, None)


def test_host_only_options_are_refused_for_device_tensors():
    q, k, v, out = FakeCuda((1, 8, 4, 64)), FakeCuda((1, 8, 2, 64)), FakeCuda((1, 8, 2, 64)), FakeCuda((1, 8, 4, 64))
    with pytest.raises(ValueError, match="check_inputs"):
        _core.attention(q, k, v, out, True, None, None, None, None, None, None, None, None, None, None,
                        check_inputs=True)
    with pytest.raises(ValueError, match="reference"):
        _core.attention(q, k, v, out, True, None, None, None, None, None, None, None, None, None, None,
                        reference=True)


def test_cpu_only_functions_refuse_cuda_tensors_by_name():
    x = FakeCuda((1, 16, 2, 32))
    with pytest.raises(ValueError, match=r"qk: lives on DLPack device type 2; this function runs on the CPU only"):
        attnzoo.lsh_hash(x, np.zeros((2, 32, 1, 2), np.float32))
    # Host metadata given as a device object is refused by name too (torch CUDA tensors are copied to the host).
    q, k, v = FakeCuda((8, 4, 64)), FakeCuda((8, 2, 64)), FakeCuda((8, 2, 64))
    with pytest.raises(ValueError, match="cu_seqlens: lives on DLPack device type 2"):
        attnzoo.attention(q, k, v, out=FakeCuda((8, 4, 64)), cu_seqlens=FakeCuda((2,)), check_inputs=False)
    with pytest.raises(ValueError, match="q: lives on DLPack device type 7"):
        attnzoo.attention(FakeCuda((1, 8, 4, 64), device_type=7), k, v)


def test_delta_recurrence_and_chunked_form_reach_the_cuda_entry():
    # The bindings directly: the wrappers allocate outputs in the caller's framework, which a bare DLPack
    # producer does not have (a torch CUDA tensor gets its outputs on its device).
    B, T, H, K, V = 2, 1, 4, 64, 64
    q, k, v, o = FakeCuda((B, T, H, K)), FakeCuda((B, T, H, K)), FakeCuda((B, T, H, V)), FakeCuda((B, T, H, V))
    g, beta = FakeCuda((B, T, H), bf16=False), FakeCuda((B, T, H))
    state = FakeCuda((B, H, K, V), bf16=False)

    def call(entry, beta=beta, check_values=False):
        entry(q, k, v, g, beta, o, state, state, None, None, False, 64, check_values)

    with pytest.raises(RuntimeError) as e:
        call(_core.recurrent_gated_delta_rule)
    _no_device_error(e)
    with pytest.raises(RuntimeError) as e:  # the value scans run on the device too
        call(_core.recurrent_gated_delta_rule, check_values=True)
    _no_device_error(e)
    with pytest.raises(RuntimeError) as e:  # the chunked form has CUDA kernels too
        call(_core.chunk_gated_delta_rule)
    _no_device_error(e)
    with pytest.raises(ValueError, match="q: lives on cuda:0"):
        call(_core.gated_delta_rule_reference)
    # Every tensor must live where q does: the odd one is named.
    with pytest.raises(ValueError, match="beta: lives on cpu, q on cuda:0"):
        call(_core.recurrent_gated_delta_rule, beta=np.zeros((B, T, H), np.float32))


def test_gated_linear_recurrence_reaches_the_cuda_entries_and_the_other_forms_refuse():
    # The binding directly, as for the delta family: the recurrent and chunked paths reach the CUDA launchers (the
    # normalised chunked form through the recurrent one). GLA's gate is per key channel; z only with normalize.
    B, T, H, K, V = 2, 1, 4, 64, 64
    q, k, v, o = FakeCuda((B, T, H, K)), FakeCuda((B, T, H, K)), FakeCuda((B, T, H, V)), FakeCuda((B, T, H, V))
    gk, g = FakeCuda((B, T, H, K)), FakeCuda((B, T, H))
    state, z = FakeCuda((B, H, K, V), bf16=False), FakeCuda((B, 1, H, K), bf16=False)

    def call(family, path, g=gk, g_gamma=None, k=k, state=state, normalize=False, z=None, check_values=False):
        final_z = None if z is None else FakeCuda(z.shape, bf16=False)  # the CUDA path refuses z in place
        _core.gla_forward(family, path, q, k, v, g, g_gamma, o, None, state, state, None, 64, None, normalize, z,
                          final_z, check_values)

    for family, kwargs in [("gla", {}), ("simple_gla", {"g": g}), ("retention", {"g": None}),
                           ("linear_attn", {"g": None, "normalize": True, "z": z}), ("linear_attn", {"g": None})]:
        for path in ("recurrent", "chunk"):
            with pytest.raises(RuntimeError) as e:
                call(family, path, **kwargs)
            _no_device_error(e)
    # A device g_gamma's value scan runs on the device too; a host one (retention's kind) is read on the host.
    with pytest.raises(RuntimeError) as e:
        call("simple_gla", "recurrent", g=g, g_gamma=FakeCuda((H,), bf16=False), check_values=True)
    _no_device_error(e)
    with pytest.raises(ValueError, match="g_gamma: must be finite and <= 0"):
        call("simple_gla", "recurrent", g=None, g_gamma=np.full((H,), 0.5, np.float32))
    with pytest.raises(ValueError, match="q: lives on cuda:0; simple_gla_reference"):
        call("simple_gla", "reference", g=g)
    with pytest.raises(ValueError, match="parallel_retention runs on the CPU only"):
        call("retention", "parallel", g=None, state=None)
    # Every tensor must live where q does: the odd one is named.
    with pytest.raises(ValueError, match="k: lives on cpu, q on cuda:0"):
        call("gla", "recurrent", k=np.zeros((B, T, H, K), np.float32))


def test_mla_decode_reaches_the_cuda_entry():
    # DeepSeek's absorbed decode over a paged latent cache: q, latents, w_kv_b and out stay on the device; the
    # lengths and block table are host metadata. Host-only options are refused before the device is asked for.
    B, H, r, dn, dr, dv = 2, 4, 64, 32, 16, 32
    q, out = FakeCuda((B, 1, H, dn + dr)), FakeCuda((B, 1, H, dv))
    latent, w_kv_b = FakeCuda((6, 16, r + dr)), FakeCuda((H * (dn + dv), r))
    seqlens, table = np.array([40, 17], dtype=np.int32), np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int32)

    def call(**kw):
        return _core.mla_decode(q, latent, seqlens, w_kv_b, out, r, dn, dr, dv, table, None, True, **kw)

    with pytest.raises(RuntimeError) as e:
        call()
    _no_device_error(e)
    with pytest.raises(ValueError, match="reference"):
        call(reference=True)
    with pytest.raises(ValueError, match="w_kv_b"):  # shapes are checked on the host first
        _core.mla_decode(q, latent, seqlens, FakeCuda((H * (dn + dv), r + 1)), out, r, dn, dr, dv, table, None, True)
