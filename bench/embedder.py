"""Raw in-process throughput of the embedding model (no gRPC, no micro-batcher), for benchmarks.

python bench/embedder.py [N]     # N synthetic passages (default 256), settings from EMBEDDER_*

A benchmark, so it lives here and not in the embedder's package (bench/retrieval.py reports it beside the
mesh's indexing rate).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from ragmesh_embedder.config import Settings
from ragmesh_embedder.model import EmbeddingModel


@dataclass(frozen=True)
class Throughput:
    texts: int
    seconds: float
    model_calls: int

    @property
    def texts_per_second(self) -> float:
        return self.texts / self.seconds if self.seconds > 0 else float("inf")


def measure_throughput(
    model: EmbeddingModel, texts: list[str], *, is_query: bool = False, repeats: int = 1, call_size: int | None = None
) -> Throughput:
    """Encodes `texts` `repeats` times in model calls of `call_size` texts (default: the model's batch size,
    as the micro-batcher would; a client's Embed call of N texts reaches the model as one call of N).

    Returns the total time spent in model calls (the model is already warm from its construction).
    """
    if not texts or repeats < 1:
        raise ValueError("measure_throughput needs at least one text and one repeat")
    size = call_size or model.settings.batch_size
    calls = 0
    start = time.perf_counter()
    for _ in range(repeats):
        for i in range(0, len(texts), size):
            model.encode(texts[i : i + size], is_query=is_query)
            calls += 1
    return Throughput(texts=len(texts) * repeats, seconds=time.perf_counter() - start, model_calls=calls)


def synthetic_passages(count: int) -> list[str]:
    """Passage-like texts of varied length (20 to ~120 words)."""
    words = [
        "retrieval",
        "augmented",
        "generation",
        "indexes",
        "enterprise",
        "documents",
        "into",
        "chunks",
        "embeds",
        "them",
        "and",
        "answers",
        "questions",
        "with",
        "citations",
        "while",
        "access",
        "control",
        "keeps",
        "each",
        "department's",
        "files",
        "private",
    ]
    return [" ".join(words[(i + j) % len(words)] for j in range(20 + (i * 37) % 100)) for i in range(count)]


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    settings = Settings.from_env()
    model = EmbeddingModel(settings)
    result = measure_throughput(model, synthetic_passages(count))
    print(
        f"{model.name} on {settings.device} (batch {settings.batch_size}, max_length {settings.max_length}, "
        f"fp16 {settings.fp16}): {result.texts} texts in {result.seconds:.2f}s = "
        f"{result.texts_per_second:.1f} texts/s"
    )


if __name__ == "__main__":
    main()
