"""bench/embedder.py (moved out of the embedder's package): it times the real model in batch-size calls."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench


def _load() -> ModuleType:
    return load_bench("embedder")


def test_bench_counts_texts_and_model_calls() -> None:
    from ragmesh_embedder.config import Settings
    from ragmesh_embedder.model import EmbeddingModel

    bench = _load()
    model = EmbeddingModel(Settings.defaults())
    result = bench.measure_throughput(model, bench.synthetic_passages(40))
    assert (result.texts, result.model_calls) == (40, 2)  # batch size 32
    assert result.texts_per_second > 0
