# ragmesh — the two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ragmesh-installed
PIP    := $(BIN)/pip --disable-pip-version-check
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install run test test-unit test-e2e lint fmt proto token clean-data clean help bench-retrieval bench-sweep bench-hops bench-spans bench-gateway bench-wakeup bench-faults bench-answer bench-verifier bench-load bench-grading bench-query proto-check bench-ingest bench-cache bench-ocr bench-parse

help:  ## this list
	@awk -F':.*## ' '/^[a-z][a-z0-9-]*:.*## /{printf "make %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

install: $(STAMP)  ## create .venv (first time) and point it at the sources
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

run: $(STAMP)  ## install (first time) and start the whole mesh on loopback
	$(BIN)/python -m ragmesh_dev.devstack run

test: $(STAMP)  ## install (first time), make lint, then the whole test suite
	$(BIN)/python tools/dev_paths.py
	$(MAKE) lint
	$(BIN)/python -m pytest

# the suite in two pieces (no lint); ARGS narrows: paths, -k EXPR, -x ...
test-unit: $(STAMP)  ## the tests that start no mesh (-m 'not e2e'); ARGS='services/graph -k access' narrows
	$(BIN)/python tools/dev_paths.py
	$(BIN)/python -m pytest -m "not e2e" $(ARGS)

test-e2e: $(STAMP)  ## the end-to-end tests (the whole mesh as processes); ARGS='tests/e2e/test_x.py' narrows
	$(BIN)/python tools/dev_paths.py
	$(BIN)/python -m pytest -m e2e $(or $(ARGS),tests/e2e)

# configuration: [tool.ruff], [tool.mypy] and [tool.importlinter] in pyproject.toml
lint: $(STAMP)  ## ruff check, ruff format --check, mypy strict, lint-imports (layers)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: $(STAMP)  ## ruff check --fix and ruff format (rewrites files)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

proto: $(STAMP)  ## regenerate gRPC stubs from proto/
	$(BIN)/python tools/gen_proto.py

# buf lint + buf breaking against the last release (tag, else the committed image); see proto/README.md
proto-check: $(STAMP)  ## buf lint + buf breaking against the last release
	$(BIN)/python -m pytest -q tests/contracts/test_proto_buf.py

token: $(STAMP)  ## mint a local dev JWT: make token user=alice department=eng roles=employee
	@$(BIN)/python -m ragmesh_cli token --user "$(user)" --department "$(department)" --roles "$(roles)"

RAGMESH_DATA_DIR ?= .data
clean-data:  ## remove the local data folder (RAGMESH_DATA_DIR, default .data)
	rm -rf "$(RAGMESH_DATA_DIR)"

clean: clean-data  ## clean-data, then remove .venv
	rm -rf $(VENV)

bench-retrieval: $(STAMP)  ## retrieval quality (BEIR SciFact, SQuAD, HotpotQA) and search cost at scale
	$(BIN)/python bench/retrieval.py $(ARGS)

bench-sweep: $(STAMP)  ## retriever settings that need a restart, side by side on one index
	$(BIN)/python bench/sweep.py $(ARGS)

bench-hops: $(STAMP)  ## where query latency goes, hop by hop
	$(BIN)/python bench/hops.py $(ARGS)

bench-spans: $(STAMP)  ## what storing spans in rag_traces costs
	$(BIN)/python bench/spans.py $(ARGS)

bench-gateway: $(STAMP)  ## the gateway's own hop per search
	$(BIN)/python bench/gateway.py $(ARGS)

bench-wakeup: $(STAMP)  ## a loopback round trip after idle
	$(BIN)/python bench/wakeup.py $(ARGS)


bench-faults: $(STAMP)  ## fault injection across the mesh (report in bench/results/faults.json)
	RAGMESH_FAULTS=all RAGMESH_FAULTS_REPORT=bench/results/faults.json $(BIN)/python -m pytest tests/e2e/test_faults_e2e.py -x $(ARGS)

bench-answer: $(STAMP)  ## answers end to end: false-grounded, answered, EM/F1 (--mode direct,agentic)
	$(BIN)/python bench/answer.py $(ARGS)

bench-verifier: $(STAMP)  ## the verifier on right and wrong candidate answers, model-independent
	$(BIN)/python bench/verifier.py $(ARGS)

bench-load: $(STAMP)  ## many concurrent chats: completed, refused, kept
	$(BIN)/python bench/load.py $(ARGS)

bench-cache: $(STAMP)  ## semantic cache: hit rate, hit/miss latency, leaks
	$(BIN)/python bench/cache.py $(ARGS)

bench-grading: $(STAMP)  ## relevance grade on answerable vs off-topic questions
	$(BIN)/python bench/grading.py $(ARGS)

bench-query: $(STAMP)  ## the multi-hop detector on the shared question sets
	$(BIN)/python bench/query_eval.py $(ARGS)

bench-ingest: $(STAMP)  ## ingestion rate vs the raw embedder rate
	$(BIN)/python bench/ingest.py $(ARGS)

bench-ocr: $(STAMP)  ## OCR: character error rate on generated scans, scanned vs text retrieval, pages per second
	$(BIN)/python bench/ocr.py $(ARGS)

bench-parse: $(STAMP)  ## parse coverage: the shared samples' words Docling reads that the parser keeps
	$(BIN)/python bench/parse_coverage.py $(ARGS)
