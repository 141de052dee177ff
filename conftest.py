"""pytest's shared set-up for every test directory pyproject.toml's testpaths names (tests/ and
each broker plug-in's tests/): the fixtures in tests/shared_fixtures.py, loaded once for all of them
(tests/ is on the path by pyproject.toml's ``pythonpath``)."""
pytest_plugins = ["shared_fixtures"]
