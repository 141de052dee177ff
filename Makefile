# mqchaos — every target sets up what it needs, so each works on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
MQCHAOS := $(VENV)/bin/mqchaos
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON ?= $(abspath $(PY))

.PHONY: setup test test-unit bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v java >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

test-unit: setup
	$(PY) -m pytest -q -m "not docker"

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) -m bench.checker_bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
