# kwire: the front door. `make demo` runs the main job, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup native bytecode jvm-classes kafka-jar generate test sweep lint docs clean demo capture fuzz bench bench-scale bench-tls wheel wheel-check

$(STAMP): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,native]'
	touch $(STAMP)

# The compiled readers (generated/_native/*.pyx -> extension modules beside them; about 4
# minutes on 2 cores the first time, only changed modules afterwards). KWIRE_PURE_PYTHON=1 skips
# the build, and the tests then check the Python build alone.
NATIVE_STAMP := generated/_native/.built
NATIVE_SOURCES := $(wildcard generated/_native/*.pyx generated/_native/*.pxd) kwire/records/_compiled.pyx \
	kwire/spark/_columns.pyx setup.py

$(NATIVE_STAMP): $(STAMP) $(NATIVE_SOURCES)
	@if [ -n "$$KWIRE_PURE_PYTHON" ]; then \
		echo "KWIRE_PURE_PYTHON is set: the compiled readers are not built"; \
	else \
		$(BIN)/python scripts/build_native.py || { echo "the compiled build failed; \
KWIRE_PURE_PYTHON=1 make ... runs the pure-Python build alone" >&2; exit 1; }; \
		touch $(NATIVE_STAMP); \
	fi

native: $(NATIVE_STAMP)

# Byte code for the codecs and kwire, as `pip install` writes it for an installed package: an
# editable install does not, and where PYTHONDONTWRITEBYTECODE is set every process (the driver,
# each Spark Python worker) would compile the 196 codec modules again (1.4 s -> 0.6 s per
# import). Only what changed is compiled again; stale byte code is never used (Python checks).
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 generated kwire > /dev/null

setup: $(STAMP) $(NATIVE_STAMP) bytecode

generate: $(STAMP)
	$(BIN)/python -m generator

# The driver JVM's classes kept in an archive (kwire/spark/classes.py) for the suite's JVMs to
# start from: made once per JDK and Spark by a job on bundled captures (about 35 s), then found.
JVM_CLASSES := $(VENV)/kwire-jvm-classes

jvm-classes: $(STAMP) $(NATIVE_STAMP) bytecode
	@$(BIN)/python scripts/jvm_classes.py $(JVM_CLASSES)

# Kafka's own kafka-clients jar (the release scripts/capture/kafka/pom.xml names) and the slf4j
# API it logs through, from Maven Central into the venv: tests/schemas/test_schema_facts.py reads
# every API version's wire layout out of Kafka's generated Java classes and compares ours with it.
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/capture/kafka/pom.xml)
KAFKA_JAR_DIR := $(VENV)/kafka-clients
KAFKA_JAR := $(KAFKA_JAR_DIR)/kafka-clients-$(KAFKA_VERSION).jar

$(KAFKA_JAR): scripts/capture/kafka/pom.xml
	@mkdir -p $(KAFKA_JAR_DIR)
	mvn -q -B dependency:copy -Dartifact=org.slf4j:slf4j-api:1.7.36 -DoutputDirectory=$(KAFKA_JAR_DIR)
	mvn -q -B dependency:copy -Dartifact=org.apache.kafka:kafka-clients:$(KAFKA_VERSION) \
		-DoutputDirectory=$(KAFKA_JAR_DIR)
	@touch $(KAFKA_JAR)

kafka-jar: $(KAFKA_JAR)

# The tests expect the compiled build unless KWIRE_PURE_PYTHON is set (then they test Python alone).
test: $(STAMP) $(NATIVE_STAMP) bytecode jvm-classes $(KAFKA_JAR)
	KWIRE_EXPECT_COMPILED=$$([ -n "$$KWIRE_PURE_PYTHON" ] && echo 0 || echo 1) \
	KWIRE_TEST_JVM_CLASSES=$(JVM_CLASSES) KWIRE_KAFKA_CLIENTS_JAR=$(KAFKA_JAR) \
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=12 tests

# The exhaustive matrices make test samples: every message and version of every API through the
# property round trips (40 examples each; make test gives the group family 20) and both peers (25
# each; make test 12), the Arrow columns, the upstream schemas compiled as they are, the
# systematic fuzz seeds and mutations, the regenerate check formatting every module, the sink
# tests' control (Spark's own row groups kill a default session) and their full-size resizing,
# and the decoded tables of every API in both directions.
sweep: $(STAMP)
	KWIRE_SWEEP=1 $(BIN)/python -m pytest -q -n 2 tests/generated tests/fuzz tests/spark/test_model.py \
		tests/generator/test_upstream.py tests/generator/test_generated_is_current.py \
		tests/spark/test_sink.py tests/spark/test_decode_write.py

lint: $(STAMP)
	$(BIN)/black --check generator generated kwire tests benchmarks scripts setup.py
	$(BIN)/mypy generated generator kwire

# The documentation site, from docs/ and mkdocs.yml, into site/: `mkdocs build --strict` fails on a
# broken link, a missing page or a broken anchor. The docs extra's packages are installed into the
# venv first (only they: kwire itself is already installed). Its generated pages are written by
# scripts/docs/gen_reference.py and checked by tests/test_docs.py.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs']))" > $(VENV)/docs-requirements.txt
	$(BIN)/pip install --quiet -r $(VENV)/docs-requirements.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

demo: $(STAMP) $(NATIVE_STAMP) bytecode
	$(BIN)/python -m kwire.demo

# Remakes tests/data/capture (needs root for `unshare -n`, plus tcpdump, dumpcap and tshark):
# librdkafka's mock and Tansu, then a real Apache Kafka 4.4 broker (its jars fetched from Maven
# Central by scripts/capture/kafka/pom.xml; needs Java 17 and Maven) with Java's
# KafkaShareConsumer and Kafka Streams.
capture: $(STAMP)
	$(BIN)/pip install --quiet -e '.[captures]'
	$(BIN)/python scripts/capture/make_captures.py
	$(BIN)/python scripts/capture/kafka_captures.py
	$(BIN)/python scripts/capture/streams_capture.py

# Long fuzz run (>= 1M inputs; about FUZZ_MINUTES at most). atheris is optional: if its wheel does
# not install here the run is random and systematic mutation only, and says so.
FUZZ_INPUTS ?= 1000000
FUZZ_MINUTES ?= 60
fuzz: $(STAMP)
	-$(BIN)/pip install --quiet -e '.[fuzz]'
	$(BIN)/python scripts/fuzz/run.py --inputs $(FUZZ_INPUTS) --minutes $(FUZZ_MINUTES) --workers 2 \
		--crash-dir out/fuzz --json out/fuzz/figures.json

# Speed, measured side by side with the peers (ratios, never assertions): the codecs against kio
# and kafka-python (about 2 minutes), the record batch decoder against kafka-python's and
# aiokafka's parsers (under a minute), then the Spark decode job on 1M frames (about 4 minutes).
bench: $(STAMP)
	$(BIN)/python -m benchmarks.codecs
	$(BIN)/python -m benchmarks.records
	$(BIN)/python -m benchmarks.spark
	$(BIN)/python -m benchmarks.delivery
	$(BIN)/python -m benchmarks.connect

# The capture step at scale (ratios, never assertions): tshark, `kwire capture`, the capture on
# Spark (local[1], local[2], a standalone cluster of 2 x 1 core), the decode job against the sink
# floor of its own outputs with its peak memory, and a small capture against Spark's
# start-and-write floor, on RING (a ring directory or one capture file). Needs tshark and a ring
# made (once, as root) by `sudo .venv/bin/python scripts/scale/make_ring.py [--link coalesced]`.
# About 15 minutes on 2 cores. Then the decode job alone on CHURN, when made (`sudo
# .venv/bin/python scripts/scale/make_ring.py --shape churny --rate-mb 2.5 --size-gb 1.3 --out
# out/churn`: small records, members restarting every few seconds), its per-stage seconds and
# sink floor beside the ring's (about 10 more minutes).
RING ?= out/ring
CHURN ?= out/churn
bench-scale: $(STAMP)
	$(BIN)/python -m benchmarks.scale --ring $(RING)
	test ! -d $(CHURN) || $(BIN)/python -m benchmarks.scale --ring $(CHURN) --only job \
		--job-repeats 2 --json benchmarks/results/scale_churny.json

# The same ring plain and over TLS (made from it by scripts/scale/make_tls_ring.py).
bench-tls: $(STAMP)
	test -d $(RING)_tls || $(BIN)/python scripts/scale/make_tls_ring.py $(RING)
	$(BIN)/python -m benchmarks.tls --plain $(RING) --tls $(RING)_tls

# The wheel and sdist a user installs (python -m build: an isolated build from the sdist, so the
# wheel's compiled modules are compiled from the committed .pyx; about 4 minutes on 2 cores).
wheel: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The wheel as a user gets it: installed in a fresh venv outside the checkout, then `kwire decode`,
# `kwire groups` and `kwire report` run on a bundled capture from a directory elsewhere.
wheel-check: wheel
	$(BIN)/python scripts/wheel_check.py dist

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .hypothesis out site
	rm -rf dist
	rm -f generated/_native/*.c generated/_native/*.so kwire/*/_*.c kwire/*/_*.so $(NATIVE_STAMP)
