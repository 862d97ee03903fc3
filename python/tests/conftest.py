"""Shared fixtures: a fresh random generator per test, its seed printed (replay with
OPSLIB_TEST_SEED=<n>), and the package importable from a source checkout."""
import os
import sys
import zlib

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

_SEED = int(os.environ.get("OPSLIB_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")


def pytest_report_header(config):
    return f"opslib python tests: seed {_SEED} (OPSLIB_TEST_SEED={_SEED} replays)"


@pytest.fixture
def rng(request):
    import numpy as np
    # one stream per test, derived from the run's seed and the test's name
    return np.random.default_rng([_SEED, zlib.crc32(request.node.name.encode())])
