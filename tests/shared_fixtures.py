"""The fixtures every test directory shares: tests/ and each broker plug-in's own tests
(harness/brokers/<broker>/tests/, issue 53). The repository's conftest.py loads this module as
a plug-in (``pytest_plugins``), so each fixture is defined once, whichever directory asks for
it; tests/ is on the path by pyproject.toml's ``pythonpath``."""
import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# the fakes' fixtures, for every test module (tests/fakes.py)
from fakes import fake_batch, fake_runs  # noqa: E402,F401


@pytest.fixture(scope="session")
def spark():
    from checkers.spark import session

    s = session("local[2]", "mqchaos-tests", driver_memory="1g", shuffle_partitions=4)
    yield s
    s.stop()
