import os
import sys
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


# Randomized suite (tests/test_random.py): the seed is printed and settable.
def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None,
                     help="seed of the randomized cases (tests/test_random.py); default: "
                          "$JAXEMU_TEST_SEED or tests/randomized.py's DEFAULT_SEED")


def pytest_configure(config):
    seed = config.getoption("seed", None)
    if seed is not None:
        os.environ["JAXEMU_TEST_SEED"] = str(seed)


def pytest_report_header(config):
    import randomized
    seed = randomized.seed_from_env()
    n = randomized.num_cases(randomized.generate(seed)) + len(randomized.bad_inputs(seed))
    return (f"jaxemu randomized cases: seed {seed} ({n} cases planned); reproduce with "
            f"JAXEMU_TEST_SEED={seed} or --seed {seed}")


def pytest_terminal_summary(terminalreporter):
    mod = sys.modules.get("test_random")
    if mod is None or not mod.TALLY.cases:
        return
    t = mod.TALLY
    terminalreporter.write_line(
        f"jaxemu randomized: seed {mod.SEED}: {t.cases} cases checked ({t.entries} output entries, "
        f"{t.specials} NaN/Inf entries exact, {t.order_dependent} order-dependent, {t.normwise} "
        f"normwise bounds, {t.reruns} bit-identical reruns, {t.bad_inputs} bad inputs); reproduce with JAXEMU_TEST_SEED={mod.SEED}")
