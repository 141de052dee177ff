# mqchaos — every target sets up what it needs, so each works on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
MQCHAOS := $(VENV)/bin/mqchaos
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON ?= $(abspath $(PY))

.PHONY: setup venv test test-unit bench clean engine images images-all up-rabbitmq up-kafka down bench-cluster

# setup = the virtualenv (Java for Spark included) + a running Docker engine.
setup: venv engine

# The virtualenv, then the JVM class-data-sharing archive Spark starts from (checkers/spark/cds.py:
# built once per Java/pyspark, about a minute; it halves Spark's start-up).
venv: $(VENV)/.installed
	@$(PY) -m checkers.spark.cds --ensure-cds

$(VENV)/.installed: pyproject.toml
	@command -v java >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless)
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv)
	@# libfuse2: fusepy's library, for the power-loss file system's tests (nemesis/lazyfs.py)
	@ldconfig -p | grep -q 'libfuse\.so\.2' || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libfuse2)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

test-unit: venv
	$(PY) -m pytest -q -m "not docker"

test: setup images-all browser
	$(PY) -m pytest -q

# Debian's Chromium: the report tests open the pages in it (tests/test_report_browser.py).
.PHONY: browser
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium)

# Real clusters (harness/engine.py, harness/images.py, compose/): a Docker engine (installed
# and started if missing), the images built from the project's own files, then the clusters.
engine: venv
	$(MQCHAOS) cluster engine

images: engine
	$(MQCHAOS) cluster images

# every version's image (harness/brokers/*/generations.py): the tests bring each one up
images-all: engine
	$(MQCHAOS) cluster images --version all

up-rabbitmq: images
	$(MQCHAOS) cluster up rabbitmq $(UP_ARGS)

up-kafka: images
	$(MQCHAOS) cluster up kafka $(UP_ARGS)

down: venv
	$(MQCHAOS) cluster down all

bench-cluster: images
	$(PY) -m bench.cluster_bench $(BENCH_ARGS)

# Each bench's newest figure against its committed baseline (bench/guard.py, bench/baseline/
# baseline.json): a regression beyond the noise band fails the target loudly; a result of
# other sizes than the baseline's is not compared (exit 2, let through).
bench: venv
	$(PY) -m bench.checker_bench $(BENCH_ARGS)
	$(PY) -m bench.guard checker || [ $$? -eq 2 ]
	$(PY) -m bench.log_bench $(LOG_BENCH_ARGS)
	$(PY) -m bench.cycle_bench $(CYCLE_BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# The main job: the partition scenarios of both brokers on real clusters, one batch in the
# order given (results/suites/<ts>/), no retry, its plain-text table printed.
# Each run exits by its prediction (harness/verdicts.py): 0 held (K7 predicts loss, and
# held when it lost), 1 a prediction did not hold, 2 undecided or a harness error; the
# table says which. Any 1 fails the target, else any 2.
# Kafka first: its cluster is up in about 12 s, RabbitMQ's in 15-22 s, and nothing hides the
# first cluster's start-up.
PARTITION_SCENARIOS := scenarios/K7-leader-cut-from-zk-acks1.yaml scenarios/R9-pause-minority.yaml \
	scenarios/K8b-leader-isolated-minisr2.yaml scenarios/Q1-quorum-leader-faults.yaml
.PHONY: test-partition heal bench-main
test-partition: images
	$(MQCHAOS) batch --kind suites --in-order --retries 0 --text $(PARTITION_SCENARIOS)

# The main job's wall time split by phase, per scenario (bench/main_bench.py), and one run's
# check of a 100k-message history in a warm batch session: bench/results/main-<ts>.json.
bench-main: images
	$(PY) -m bench.main_bench $(PARTITION_SCENARIOS) $(BENCH_ARGS)

heal: venv
	$(MQCHAOS) cluster heal all

# What the power-loss file system costs: throughput with fs: plain and fs: lazy (bench/fs_bench.py).
.PHONY: bench-fs
bench-fs: images
	$(PY) -m bench.fs_bench $(BENCH_ARGS)

.PHONY: bench-clients
bench-clients: images
	$(PY) -m bench.client_bench $(BENCH_ARGS)

# The scenario catalogue: every row of SCENARIOS.md on real clusters, one summary
# (results/catalogue/latest/summary.md). ONLY=R2,K7 picks rows; REPEAT=N repeats.
# Exit 1: a prediction did not hold (the summary says which rows); 2: undecided / harness error.
ONLY ?=
REPEAT ?= 1
.PHONY: test-scenarios nightly
test-scenarios: images
	$(MQCHAOS) batch $(if $(ONLY),--only $(ONLY)) --repeat $(REPEAT)

# The version matrix (harness/matrix.py): the ONLY rows at each of VERSIONS (space-separated
# --version values of `mqchaos batch --matrix`, e.g. VERSIONS="rabbitmq=3.10,4.0 kafka=3.9"; default every version), REPEAT
# times each; one table scenario x version in results/matrix/latest/matrix.md. Runs do not build
# images: every version's is built first. Exit as the catalogue (a not-applicable cell is 2).
VERSIONS ?= all
MATRIX_ROWS := R9,Q1,K7,K8b
.PHONY: matrix
matrix: engine
	$(MQCHAOS) cluster images --version all
	$(MQCHAOS) batch --matrix --only $(or $(ONLY),$(MATRIX_ROWS)) $(foreach v,$(VERSIONS),--version $(v)) --repeat $(REPEAT)

# Nightly: the catalogue NIGHTLY_REPEAT times, with results/nightly/<ts>/junit.xml. A run
# whose harness failed is retried once and reported as an error, never as a finding.
# NIGHTLY_SHARD=I/N runs shard I of N (harness/batch/shard.py), and `make nightly-merge
# NIGHTLY_MERGE="dir ..."` makes the shards' summaries one (the nightly workflow's last job).
# A whole night (no shard) is then appended to the evidence store (below), whatever its
# verdicts; the exit code stays the batch's.
NIGHTLY_REPEAT ?= 1
NIGHTLY_SHARD ?=
nightly: images
	$(MQCHAOS) batch --kind nightly --repeat $(NIGHTLY_REPEAT) $(if $(NIGHTLY_SHARD),--shard $(NIGHTLY_SHARD)); \
	code=$$?; $(if $(NIGHTLY_SHARD),,$(EVIDENCE_APPEND) || code=2;) exit $$code

.PHONY: nightly-merge
nightly-merge: venv
	$(MQCHAOS) batch --kind nightly $(foreach d,$(NIGHTLY_MERGE),--merge $(d))

# The evidence kept across nights (harness/evidence.py, docs/nightly.md): one JSONL file per
# night in EVIDENCE_STORE (default results/evidence-store/; in CI a checkout of the `evidence`
# branch). `make evidence-append` appends a batch's rows (EVIDENCE_BATCH, default the newest
# nightly; a run already there is not added again) as the night EVIDENCE_NIGHT (default the
# date its first run started); `make evidence-report` reports over the whole store into
# EVIDENCE_OUT (per row and version k of n, flips, flaky, stale rows; with EVIDENCE_JUNIT=batch
# dir, that batch's JUnit with its flaky rows marked); `make evidence-backfill` adds every
# published run of docs/batches.
EVIDENCE_STORE ?=
EVIDENCE_BATCH ?= results/nightly/latest
EVIDENCE_NIGHT ?=
EVIDENCE_OUT ?=
EVIDENCE_JUNIT ?=
.PHONY: evidence-append evidence-report evidence-backfill
EVIDENCE_APPEND = $(MQCHAOS) evidence append $(EVIDENCE_BATCH) $(if $(EVIDENCE_NIGHT),--night $(EVIDENCE_NIGHT)) $(if $(EVIDENCE_STORE),--store $(EVIDENCE_STORE))
evidence-append: venv
	$(EVIDENCE_APPEND)

evidence-report: venv
	$(MQCHAOS) evidence report $(if $(EVIDENCE_STORE),--store $(EVIDENCE_STORE)) $(if $(EVIDENCE_OUT),--out $(EVIDENCE_OUT)) $(if $(EVIDENCE_JUNIT),--junit $(EVIDENCE_JUNIT))

evidence-backfill: venv
	$(MQCHAOS) evidence backfill $(if $(EVIDENCE_STORE),--store $(EVIDENCE_STORE))

# The summary of many runs, Spark over them (`mqchaos summarize`: checkers/trend.py,
# harness/trend_report.py, docs/nightly.md): every run below SUMMARIZE_RESULTS in one Spark
# job -> SUMMARIZE_OUT/{runs.parquet,summary.md,summary.html,...}. `latest` links are not
# followed and directories that are not runs (suites, nightly, analysis) are skipped, so each
# run counts once. SUMMARIZE_MASTER=spark://host:7077 for a standalone master. `make analyze`
# and its ANALYZE_* variables are the old names, kept for a while.
SUMMARIZE_RESULTS ?= $(or $(ANALYZE_RESULTS),results)
SUMMARIZE_OUT ?= $(or $(ANALYZE_OUT),results/analysis/$(shell date -u +%Y-%m-%dT%H-%M-%SZ))
SUMMARIZE_MASTER ?= $(ANALYZE_MASTER)
SUMMARIZE_ARGS ?= $(ANALYZE_ARGS)
.PHONY: summarize analyze bench-analyze
summarize: venv
	$(MQCHAOS) summarize $(SUMMARIZE_RESULTS) --out $(SUMMARIZE_OUT) $(if $(SUMMARIZE_MASTER),--master $(SUMMARIZE_MASTER)) $(SUMMARIZE_ARGS)

analyze:
	@echo 'make analyze is now `make summarize` (ANALYZE_* now SUMMARIZE_*)' >&2
	@$(MAKE) --no-print-directory summarize

# `mqchaos summarize` over 1,000 synthetic runs x 100k messages, local[*] and on a standalone master +
# worker (bench/analyze_bench.py). CPU-heavy: waits for the machine's CPU lock, which real
# cluster runs hold. BENCH_ARGS="--runs 20 --messages 10000" for a quick one.
bench-analyze: venv
	flock /tmp/mqchaos-cpu.lock $(PY) -m bench.analyze_bench $(BENCH_ARGS)
	$(PY) -m bench.guard analyze || [ $$? -eq 2 ]

# False-positive soak (issue 14; benchmark-style, not in `make test`): SOAK_RUNS runs each of a
# quorum queue and Kafka acks=all / min.insync.replicas=2 under partitions and kills, scenarios in
# bench/soak/. Every run that reports a loss is listed in results/soak/latest/summary.md.
SOAK_RUNS ?= 20
.PHONY: bench-soak
bench-soak: images
	$(MQCHAOS) batch --kind soak --repeat $(SOAK_RUNS) --retries 0 bench/soak/*.yaml
