import os
import sys
import tempfile
import zlib

# Tests run on the CPU unless asked otherwise (GPU tests opt in, see test_cuda.py),
# with 8 host devices for the sharding tests (before JAX initialises).
_ASKED_PLATFORMS = os.environ.get("JAX_PLATFORMS", "")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

# auto's cost models: never the user's calibration cache (tests calibrate into their own).
os.environ["JAXEMU_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxemu-test-cache-")

# XLA's compilations are most of the suite's time, and many tests compile the
# same program again (a fresh jit of an equal function: in-memory caches miss).
# On the CPU each test process keeps JAX's persistent compilation cache in a
# directory of its own (never shared between xdist workers: entries are
# written without a lock), deleted at exit: an equal program (same HLO,
# options and flags) is compiled once per process. JAXEMU_TEST_XLA_CACHE=0,
# or JAX_COMPILATION_CACHE_DIR set by the user, leaves JAX's settings alone.
# A test that needs a real recompilation changes a compile option
# (test_random.py's FRESH), which changes the cache key.
if (os.environ.get("JAXEMU_TEST_XLA_CACHE", "1") != "0" and os.environ["JAX_PLATFORMS"] == "cpu"
        and os.environ.get("JAX_COMPILATION_CACHE_DIR", "") in ("", os.environ.get("JAXEMU_TEST_XLA_CACHE_DIR"))):
    import atexit
    import shutil
    _xla_cache = tempfile.mkdtemp(prefix="jaxemu-test-xla-")
    atexit.register(shutil.rmtree, _xla_cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["JAXEMU_TEST_XLA_CACHE_DIR"] = _xla_cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"
    if "jax" in sys.modules:  # imported before this file: set its config too
        import jax
        jax.config.update("jax_compilation_cache_dir", _xla_cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

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


# Parallel runs (pytest-xdist, in the "test" extra). The tests are
# compile-bound and mostly single-threaded, so a run of a directory (the whole
# suite) or of several files goes to one worker process per core, at most
# MAX_WORKERS: on CI's 2 cores this nearly halves the time. One file or one
# test runs in-process, and so does everything with -n 0, -p no:xdist, without
# pytest-xdist, and on a GPU (JAX_PLATFORMS other than cpu: each worker would
# claim the GPU's memory). -n N or PYTEST_XDIST_AUTO_NUM_WORKERS=N choose the
# count. Tests are handed out one at a time, except that a test file with a
# module-scoped fixture goes to one worker whole, so the fixture is built once.
MAX_WORKERS = 4
_SCHEDULE = {}


def _in_worker(config):
    return hasattr(config, "workerinput") or "PYTEST_XDIST_WORKER" in os.environ


def _wants_workers(config):
    if config.option.numprocesses is not None or config.getoption("usepdb", False) or config.option.collectonly:
        return False
    if _ASKED_PLATFORMS and _ASKED_PLATFORMS.strip().lower() != "cpu":
        return False
    paths = [str(a).split("::")[0] for a in (config.args or [])]
    files = {p for p in paths if os.path.isfile(p)}
    return any(os.path.isdir(p) for p in paths) or len(files) > 1


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if _in_worker(config) or not config.pluginmanager.has_plugin("xdist"):
        return
    if _wants_workers(config):
        config.option.numprocesses = "auto"
    if config.option.dist == "no" and config.option.numprocesses:
        config.option.dist = "loadscope"
        _SCHEDULE["ours"] = True


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if env.strip():
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if not _SCHEDULE.get("ours"):
        return None
    import re
    from xdist.scheduler import LoadScopeScheduling

    shared = {}

    def module_fixture(path):
        if path not in shared:
            try:
                src = (config.rootpath / path).read_text()
            except OSError:
                src = ""
            shared[path] = re.search(r"scope\s*=\s*[\"'](module|package|session)[\"']", src) is not None
        return shared[path]

    class Schedule(LoadScopeScheduling):
        # One unit per test, or per file for files with module-scoped fixtures;
        # the larger units (those files) are handed out first.
        def _split_scope(self, nodeid):
            path = nodeid.split("::")[0]
            return path if module_fixture(path) else nodeid

    return Schedule(config, log)


def pytest_report_header(config):
    import randomized
    seed = randomized.seed_from_env()
    n = randomized.num_cases(randomized.generate(seed)) + len(randomized.bad_inputs(seed))
    return (f"jaxemu randomized cases: seed {seed} ({n} cases planned); reproduce with "
            f"JAXEMU_TEST_SEED={seed} or --seed {seed}")


# The randomized suite's tally: this process's, plus (under xdist) the workers'.
_WORKER_TALLIES = []


def _local_tally():
    mod = sys.modules.get("test_random")
    return None if mod is None else mod.TALLY


def pytest_sessionfinish(session):
    t = _local_tally()
    if t is not None and hasattr(session.config, "workeroutput"):  # an xdist worker
        import dataclasses
        session.config.workeroutput["jaxemu_tally"] = dataclasses.asdict(t)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", None) or {}
    if "jaxemu_tally" in out:
        _WORKER_TALLIES.append(out["jaxemu_tally"])


def pytest_terminal_summary(terminalreporter):
    import randomized
    t = randomized.Tally()
    if _local_tally() is not None:
        t.add(_local_tally())
    for w in _WORKER_TALLIES:
        t.add(randomized.Tally(**w))
    if not t.cases:
        return
    seed = randomized.seed_from_env()
    terminalreporter.write_line(
        f"jaxemu randomized: seed {seed}: {t.cases} cases checked ({t.entries} output entries, "
        f"{t.specials} NaN/Inf entries exact, {t.order_dependent} order-dependent, {t.normwise} "
        f"normwise bounds, {t.reruns} bit-identical reruns, {t.bad_inputs} bad inputs); reproduce with JAXEMU_TEST_SEED={seed}")
