"""Score fusion of the lexical and vector legs, with Weaviate's formulas so both backends rank alike.

relativeScoreFusion (Weaviate >= 1.24 default): each leg's scores are min-max normalised over that
leg's result set — (s - min) / (max - min), or 1 when all scores are equal — then weighted
(vector * alpha, lexical * (1 - alpha)) and summed; a chunk missing from a leg gets 0 from it.
rankedFusion: each leg contributes weight / (60 + rank), rank 0-based (reciprocal rank fusion).
distribution-based score fusion (Qdrant's DBSF): like relativeScoreFusion, but each leg is scaled by
its score distribution instead of its extremes — (s - (mean - 3 sd)) / (6 sd), population sd over the
leg's result set, 1 when all scores are equal — so one outlier at the top or bottom of a leg does not
stretch or squash every other score of that leg.
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


def _standardise(scores: Mapping[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    values = list(scores.values())
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    if sd == 0:
        return {key: 1.0 for key in scores}
    low = mean - 3 * sd
    return {key: (value - low) / (6 * sd) for key, value in scores.items()}


def _ordered(items: dict[str, float], lexical: Mapping[str, float], vector: Mapping[str, float]) -> list[Fused]:
    # ties broken by vector then lexical score, then id, so the order is deterministic
    fused = [Fused(key, score, lexical.get(key), vector.get(key)) for key, score in items.items()]
    fused.sort(key=lambda f: (-f.score, -(f.vector or 0.0), -(f.lexical or 0.0), f.chunk_id))
    return fused


def relative_score_fusion(lexical: Mapping[str, float], vector: Mapping[str, float], alpha: float) -> list[Fused]:
    """Fuses raw leg scores (higher is better) with Weaviate's relativeScoreFusion."""
    return _weighted(_normalise(lexical), _normalise(vector), alpha, lexical, vector)


def distribution_based_fusion(lexical: Mapping[str, float], vector: Mapping[str, float], alpha: float) -> list[Fused]:
    """Fuses raw leg scores (higher is better), each leg scaled by its mean and standard deviation."""
    return _weighted(_standardise(lexical), _standardise(vector), alpha, lexical, vector)


def _weighted(lex_n: Mapping[str, float], vec_n: Mapping[str, float], alpha: float,
              lexical: Mapping[str, float], vector: Mapping[str, float]) -> list[Fused]:
    _check_alpha(alpha)
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
