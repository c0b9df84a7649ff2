# ragmesh — the two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ragmesh-installed
PIP    := $(BIN)/pip --disable-pip-version-check
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install run test test-unit test-e2e lint fmt proto check-proto token clean-data clean help bench-retrieval bench-sweep bench-hops bench-spans bench-gateway bench-wakeup bench-faults bench-answer bench-verifier bench-load bench-grading bench-query proto-check bench-ingest bench-cache

help:
	@echo "make run         install (first time) and start the whole mesh on loopback"
	@echo "make test        install (first time) and run the whole test suite (after make lint)"
	@echo "make test-unit   the tests that start no mesh (-m 'not e2e'; minutes): unit, service, contract, chart"
	@echo "make test-e2e    the end-to-end tests (-m e2e): the whole mesh as processes, through the HTTP API"
	@echo "                 one file or test: make test-e2e ARGS='tests/e2e/test_permission_fuzz_e2e.py'"
	@echo "                 or make test-unit ARGS='services/graph -k access'"
	@echo "make lint        ruff check, ruff format --check, mypy (strict on libs and services), lint-imports (layers)"
	@echo "make fmt         ruff check --fix and ruff format (rewrites files)"
	@echo "make token user=alice department=eng roles=employee   mint a local dev JWT"
	@echo "make proto       regenerate gRPC stubs from proto/"
	@echo "make clean-data  remove the local data folder (.data)"

install: $(STAMP)
	@# source paths and console scripts (.venv/bin/ragmesh) again: cheap, and right after a pull that added one
	$(BIN)/python tools/dev_paths.py

$(STAMP): requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -c constraints.txt -r requirements.txt
	@# docling-ibm-models pulls torchvision, which does not import beside the CPU torch; nothing here needs it
	$(PIP) uninstall -y -q torchvision || true
	$(BIN)/python tools/dev_paths.py
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m ragmesh_dev.devstack run

test: $(STAMP)
	$(BIN)/python tools/dev_paths.py
	$(MAKE) lint
	$(BIN)/python -m pytest

# the suite in two pieces (no lint); ARGS narrows: paths, -k EXPR, -x ...
test-unit: $(STAMP)
	$(BIN)/python tools/dev_paths.py
	$(BIN)/python -m pytest -m "not e2e" $(ARGS)

test-e2e: $(STAMP)
	$(BIN)/python tools/dev_paths.py
	$(BIN)/python -m pytest -m e2e $(or $(ARGS),tests/e2e)

# configuration: [tool.ruff], [tool.mypy] and [tool.importlinter] in pyproject.toml
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

proto: $(STAMP)
	$(BIN)/python tools/gen_proto.py

# buf lint + buf breaking against the last release (tag, else the committed image); see proto/README.md
proto-check: $(STAMP)
	$(BIN)/python -m pytest -q tests/contracts/test_proto_buf.py

token: $(STAMP)
	@$(BIN)/python -m ragmesh_cli token --user "$(user)" --department "$(department)" --roles "$(roles)"

clean-data:
	rm -rf .data

clean: clean-data
	rm -rf $(VENV)

bench-retrieval: $(STAMP)
	$(BIN)/python bench/retrieval.py $(ARGS)

bench-sweep: $(STAMP)
	$(BIN)/python bench/sweep.py $(ARGS)

bench-hops: $(STAMP)
	$(BIN)/python bench/hops.py $(ARGS)

bench-spans: $(STAMP)
	$(BIN)/python bench/spans.py $(ARGS)

bench-gateway: $(STAMP)
	$(BIN)/python bench/gateway.py $(ARGS)

bench-wakeup: $(STAMP)
	$(BIN)/python bench/wakeup.py $(ARGS)


bench-faults: $(STAMP)
	RAGMESH_FAULTS=all RAGMESH_FAULTS_REPORT=bench/results/faults.json $(BIN)/python -m pytest tests/e2e/test_faults_e2e.py -x $(ARGS)

bench-answer: $(STAMP)
	$(BIN)/python bench/answer.py $(ARGS)

bench-verifier: $(STAMP)
	$(BIN)/python bench/verifier.py $(ARGS)

bench-load: $(STAMP)
	$(BIN)/python bench/load.py $(ARGS)

bench-cache: $(STAMP)
	$(BIN)/python bench/cache.py $(ARGS)

bench-grading: $(STAMP)
	$(BIN)/python bench/grading.py $(ARGS)

bench-query: $(STAMP)
	$(BIN)/python bench/query_eval.py $(ARGS)

bench-ingest: $(STAMP)
	$(BIN)/python bench/ingest.py $(ARGS)
