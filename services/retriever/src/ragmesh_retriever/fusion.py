"""Score fusion of the lexical and vector legs, with Weaviate's formulas so both backends rank alike.

relativeScoreFusion (Weaviate >= 1.24 default): each leg's scores are min-max normalised over that
leg's result set — (s - min) / (max - min), or 1 when all scores are equal — then weighted
(vector * alpha, lexical * (1 - alpha)) and summed; a chunk missing from a leg gets 0 from it.
rankedFusion: each leg contributes weight / (60 + rank), rank 0-based (reciprocal rank fusion).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Fused:
    chunk_id: str
    score: float
    lexical: float | None  # raw BM25 score, None when the lexical leg missed it
    vector: float | None   # raw cosine similarity, None when the vector leg missed it


def _normalise(scores: Mapping[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    if span == 0:
        return {key: 1.0 for key in scores}
    return {key: (value - low) / span for key, value in scores.items()}


def _ordered(items: dict[str, float], lexical: Mapping[str, float], vector: Mapping[str, float]) -> list[Fused]:
    # ties broken by vector then lexical score, then id, so the order is deterministic
    fused = [Fused(key, score, lexical.get(key), vector.get(key)) for key, score in items.items()]
    fused.sort(key=lambda f: (-f.score, -(f.vector or 0.0), -(f.lexical or 0.0), f.chunk_id))
    return fused


def relative_score_fusion(lexical: Mapping[str, float], vector: Mapping[str, float], alpha: float) -> list[Fused]:
    """Fuses raw leg scores (higher is better) with Weaviate's relativeScoreFusion."""
    _check_alpha(alpha)
    lex_n, vec_n = _normalise(lexical), _normalise(vector)
    combined: dict[str, float] = {}
    for key, value in lex_n.items():
        combined[key] = combined.get(key, 0.0) + (1.0 - alpha) * value
    for key, value in vec_n.items():
        combined[key] = combined.get(key, 0.0) + alpha * value
    return _ordered(combined, lexical, vector)


def ranked_fusion(lexical: Sequence[str], vector: Sequence[str], alpha: float,
                  lexical_scores: Mapping[str, float] | None = None,
                  vector_scores: Mapping[str, float] | None = None) -> list[Fused]:
    """Fuses two rankings (best first) with Weaviate's rankedFusion (weighted RRF, k = 60)."""
    _check_alpha(alpha)
    combined: dict[str, float] = {}
    for rank, key in enumerate(lexical):
        combined[key] = combined.get(key, 0.0) + (1.0 - alpha) / (RRF_K + rank)
    for rank, key in enumerate(vector):
        combined[key] = combined.get(key, 0.0) + alpha / (RRF_K + rank)
    return _ordered(combined, lexical_scores or {}, vector_scores or {})


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within [0, 1], got {alpha}")
