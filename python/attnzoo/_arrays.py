"""Array plumbing shared by the Python wrappers: outputs in the caller's framework, checks on inputs."""
import numpy as np


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def empty_like_input(x, shape, dtype=None):
    """An uninitialised output of `shape` in x's framework (numpy or torch), x's dtype unless given."""
    if _is_torch(x):
        import torch
        return torch.empty(tuple(shape), dtype=dtype or x.dtype, device="cpu")
    return np.empty(tuple(shape), dtype=dtype or x.dtype)


def in_callers_framework(x, out):
    """`out` (a numpy array) as the caller's framework: a torch tensor (sharing memory) when x is one."""
    if _is_torch(x):
        import torch
        return torch.from_numpy(out)
    return out


def as_input(x, name):
    """Numpy arrays and DLPack objects pass through. There is no autograd: torch tensors are read detached, and a
    tensor that requires grad gets a warning saying so (results never carry a grad_fn)."""
    if x is None:
        return None
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{name}: must be a CPU tensor, got device {x.device}")
        if x.requires_grad:
            import warnings
            warnings.warn(f"{name}: requires grad, but attnzoo has no autograd: it is read detached and the "
                          "result has no grad_fn (inference only)", stacklevel=3)
        return x.detach()
    if isinstance(x, np.ndarray) or hasattr(x, "__dlpack__"):
        return x
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    raise TypeError(f"{name}: expected a numpy array or an object with __dlpack__, got {type(x).__name__}")


def as_f32_vector(x, name):
    if x is None:
        return None
    x = as_input(x, name)
    if _is_torch(x):
        import torch
        return x.to(torch.float32).contiguous()
    return np.ascontiguousarray(x, dtype=np.float32)


def as_int_array(x, name, bits=32):
    """Integer arrays (tables, lengths, slots) as contiguous int32 / int64 in the caller's framework."""
    if x is None:
        return None
    x = as_input(x, name)
    if _is_torch(x):
        import torch
        if x.is_floating_point():
            raise TypeError(f"{name}: expected an integer tensor, got {x.dtype}")
        return x.to(torch.int64 if bits == 64 else torch.int32).contiguous()
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{name}: expected an integer array, got {x.dtype}")
    return np.ascontiguousarray(x, dtype=np.int64 if bits == 64 else np.int32)


def as_i32_vector(x, name):
    return as_int_array(x, name)


def shape_of(x):
    return tuple(int(s) for s in x.shape)


def check_finite(x, name):
    """Non-finite inputs make every result meaningless: refuse them up front."""
    if _is_torch(x):
        import torch
        ok = bool(torch.isfinite(x).all())
    else:
        ok = bool(np.isfinite(np.asarray(x, dtype=np.float32) if x.dtype.kind == "V" else x).all())
    if not ok:
        raise ValueError(f"{name}: contains NaN or Inf")
