"""bench/embedder.py (moved out of the embedder's package): it times the real model in batch-size calls."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench" / "embedder.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_embedder", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bench_counts_texts_and_model_calls() -> None:
    from ragmesh_embedder.config import Settings
    from ragmesh_embedder.model import EmbeddingModel

    bench = _load()
    model = EmbeddingModel(Settings.defaults())
    result = bench.measure_throughput(model, bench.synthetic_passages(40))
    assert (result.texts, result.model_calls) == (40, 2)  # batch size 32
    assert result.texts_per_second > 0
