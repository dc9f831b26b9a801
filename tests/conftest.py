import os
import tempfile
import zlib

# Tests run on the CPU unless asked otherwise (GPU tests opt in, see test_cuda.py),
# with 8 host devices for the sharding tests (before JAX initialises).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

# auto's cost models: never the user's calibration cache (tests calibrate into their own).
os.environ["JAXEMU_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxemu-test-cache-")

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    # Fresh data per test, reproducible per test name: crc32, not hash(), whose
    # string hashing is salted per process (PYTHONHASHSEED).
    # JAXEMU_TEST_SALT=<anything> reruns every test on other data.
    seed = zlib.crc32((os.environ.get("JAXEMU_TEST_SALT", "") + request.node.nodeid).encode())
    return np.random.default_rng(seed)
