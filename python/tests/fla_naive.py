"""flash-linear-attention's naive PyTorch references (fla/ops/<family>/naive.py), the math the linear-attention
tests compare against. Loaded from their files: the fla.ops package imports triton, these files do not."""
import functools
import importlib.util
import pathlib


@functools.cache
def load(family):
    """fla/ops/<family>/naive.py as a module (family may be a path: "generalized_delta_rule/dplr"); once per
    family, not registered in sys.modules."""
    import fla
    path = pathlib.Path(fla.__file__).parent / "ops" / family / "naive.py"
    spec = importlib.util.spec_from_file_location("fla_naive_" + family.replace("/", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
