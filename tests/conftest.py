import os
import sys

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
sys.path.insert(0, os.path.dirname(__file__))

# the fakes' fixtures, for every test module (tests/fakes.py)
from fakes import fake_batch, fake_runs  # noqa: E402,F401


@pytest.fixture(scope="session")
def spark():
    from checkers.spark import session

    s = session("local[2]", "mqchaos-tests", driver_memory="1g", shuffle_partitions=4)
    yield s
    s.stop()
