import os

# Tests run on the CPU unless asked otherwise (GPU tests opt in, see test_cuda.py).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    # Fresh data per test, reproducible per test name.
    seed = abs(hash(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)
