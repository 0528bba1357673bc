import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..")) if "attnzoo" not in sys.modules else None


def rel_rms(got, want):
    """Relative RMS error, computed in float64."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.sqrt(((got - want) ** 2).sum() / max((want ** 2).sum(), 1e-300)))


@pytest.fixture(params=None)
def targets():
    import attnzoo
    return attnzoo.supported_targets()
