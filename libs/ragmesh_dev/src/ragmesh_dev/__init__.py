"""ragmesh's development stack: the local supervisor (`make run`), the embedded engines, the local model server.

Tests, benchmarks and `make run` use it; no production image installs it."""
