"""All ranking of the retriever in one place: leg fusion, sub-query and summary-first merging, and
pseudo-relevance feedback, with one vocabulary (`Fusion`) and one reciprocal-rank constant (`RRF_K`).

Score fusion of the lexical and vector legs uses Weaviate's formulas, so both backends rank alike:
relativeScoreFusion (Weaviate >= 1.24 default): each leg's scores are min-max normalised over that
leg's result set — (s - min) / (max - min), or 1 when all scores are equal — then weighted
(vector * alpha, lexical * (1 - alpha)) and summed; a chunk missing from a leg gets 0 from it.
rankedFusion: each leg contributes weight / (RRF_K + rank), rank 0-based (reciprocal rank fusion).
distribution-based score fusion (Qdrant's DBSF): like relativeScoreFusion, but each leg is scaled by
its score distribution instead of its extremes — (s - (mean - 3 sd)) / (6 sd), population sd over the
leg's result set, 1 when all scores are equal — so one outlier at the top or bottom of a leg does not
stretch or squash every other score of that leg.

The graph leg (the graph service's Personalized PageRank scores, handed in by the gateway) is a third leg
fused the same way and ADDED on top of the two: normalised by its best score for relativeScoreFusion (a mass
of 0 is a chunk the walk never reached, so the least reached chunk is not set to 0 as min-max would), by the
distribution for DBSF, by rank for rankedFusion; and weighted by `graph_weight`, so alpha keeps its meaning
and a graph weight of 0 (or no graph scores) gives exactly the two-leg ranking. A chunk only the graph found enters the ranking too.

Languages: a short query searched in several languages (`analysis.choose_languages`) has one BM25 ranking per
language; `merge_languages` puts them on one scale, each score divided by its analysis's BM25 bound (what a chunk
matching every query term without limit would score: (k1 + 1) * sum of the terms' idf weights), so a German
analysis that matches both rare terms outranks an English one that matches a common word, and keeps each chunk's
best. `language_alpha` leans the fusion on BM25 for a query whose language the embedder does not cover.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ragmesh.retriever.v1 import retriever_pb2

RRF_K = 60  # the k of every reciprocal-rank sum here (Cormack et al.; Weaviate's rankedFusion)

T = TypeVar("T")


class Fusion(enum.Enum):
    """How the two legs are fused. Member names are the proto's FusionType names without the prefix;
    values are the HTTP API's strings."""

    RELATIVE_SCORE = "relative_score"
    RANKED = "ranked"
    DISTRIBUTION_BASED = "distribution_based"

    @classmethod
    def from_proto(cls, value: retriever_pb2.FusionType.ValueType) -> Fusion:
        """The fusion of a SearchRequest.fusion (FUSION_TYPE_UNSPECIFIED is relative score)."""
        if value == retriever_pb2.FUSION_TYPE_UNSPECIFIED:
            return cls.RELATIVE_SCORE
        return cls[retriever_pb2.FusionType.Name(value).removeprefix("FUSION_TYPE_")]


@dataclass(frozen=True)
class Fused:
    chunk_id: str
    score: float
    lexical: float | None  # raw BM25 score, None when the lexical leg missed it
    vector: float | None  # raw cosine similarity, None when the vector leg missed it
    graph: float | None = None  # raw graph-leg score (PageRank mass), None when the graph leg missed it


def _normalise(scores: Mapping[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    if span == 0:
        return {key: 1.0 for key in scores}
    return {key: (value - low) / span for key, value in scores.items()}


def _by_max(scores: Mapping[str, float]) -> dict[str, float]:
    """Graph-leg scores over the best one: a PageRank mass of 0 means the walk never reached the chunk, so the
    least of the chunks it reached is not scaled down to what an unreached chunk gets (min-max would give the
    weakest of three reached chunks nothing at all)."""
    high = max(scores.values(), default=0.0)
    if high <= 0:
        return {}
    return {key: max(value, 0.0) / high for key, value in scores.items()}


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


def _ordered(
    items: dict[str, float],
    lexical: Mapping[str, float],
    vector: Mapping[str, float],
    graph: Mapping[str, float] | None = None,
) -> list[Fused]:
    # ties broken by vector then lexical score, then id, so the order is deterministic
    graph = graph or {}
    fused = [Fused(key, score, lexical.get(key), vector.get(key), graph.get(key)) for key, score in items.items()]
    fused.sort(key=lambda f: (-f.score, -(f.vector or 0.0), -(f.lexical or 0.0), f.chunk_id))
    return fused


def fuse(
    fusion: Fusion,
    lexical: Mapping[str, float],
    vector: Mapping[str, float],
    alpha: float,
    graph: Mapping[str, float] | None = None,
    graph_weight: float = 0.0,
) -> list[Fused]:
    """The legs' raw scores (chunk id → score, higher is better) fused with `fusion`, best first; `graph`
    (optional) is added with `graph_weight`."""
    if graph_weight < 0:
        raise ValueError(f"graph_weight must be >= 0, got {graph_weight}")
    if not graph or graph_weight == 0:
        graph, graph_weight = {}, 0.0
    if fusion is Fusion.RANKED:
        fused = ranked_fusion(
            sorted(lexical, key=lambda k: -lexical[k]), sorted(vector, key=lambda k: -vector[k]), alpha, lexical, vector
        )
        if not graph:
            return fused
        combined = {f.chunk_id: f.score for f in fused}
        for rank, key in enumerate(sorted(graph, key=lambda k: -graph[k])):
            combined[key] = combined.get(key, 0.0) + graph_weight / (RRF_K + rank)
        return _ordered(combined, lexical, vector, graph)
    scale = _standardise if fusion is Fusion.DISTRIBUTION_BASED else _normalise
    scale_graph = _standardise if fusion is Fusion.DISTRIBUTION_BASED else _by_max
    return _weighted(scale(lexical), scale(vector), alpha, lexical, vector, scale_graph(graph), graph_weight, graph)


def relative_score_fusion(lexical: Mapping[str, float], vector: Mapping[str, float], alpha: float) -> list[Fused]:
    """Fuses raw leg scores (higher is better) with Weaviate's relativeScoreFusion."""
    return _weighted(_normalise(lexical), _normalise(vector), alpha, lexical, vector)


def distribution_based_fusion(lexical: Mapping[str, float], vector: Mapping[str, float], alpha: float) -> list[Fused]:
    """Fuses raw leg scores (higher is better), each leg scaled by its mean and standard deviation."""
    return _weighted(_standardise(lexical), _standardise(vector), alpha, lexical, vector)


def _weighted(
    lex_n: Mapping[str, float],
    vec_n: Mapping[str, float],
    alpha: float,
    lexical: Mapping[str, float],
    vector: Mapping[str, float],
    graph_n: Mapping[str, float] | None = None,
    graph_weight: float = 0.0,
    graph: Mapping[str, float] | None = None,
) -> list[Fused]:
    _check_alpha(alpha)
    combined: dict[str, float] = {}
    for key, value in lex_n.items():
        combined[key] = combined.get(key, 0.0) + (1.0 - alpha) * value
    for key, value in vec_n.items():
        combined[key] = combined.get(key, 0.0) + alpha * value
    for key, value in (graph_n or {}).items():
        combined[key] = combined.get(key, 0.0) + graph_weight * value
    return _ordered(combined, lexical, vector, graph)


def ranked_fusion(
    lexical: Sequence[str],
    vector: Sequence[str],
    alpha: float,
    lexical_scores: Mapping[str, float] | None = None,
    vector_scores: Mapping[str, float] | None = None,
) -> list[Fused]:
    """Fuses two rankings (best first) with Weaviate's rankedFusion (weighted RRF)."""
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


def reciprocal_rank(rankings: Sequence[Sequence[T]], key: Callable[[T], str]) -> dict[str, float]:
    """Equal-weight reciprocal-rank sums over several rankings (best first), by `key`, in first-seen order."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            k = key(item)
            fused[k] = fused.get(k, 0.0) + 1.0 / (RRF_K + rank)
    return fused


def merge_summary_first(
    direct: Sequence[T], within: Sequence[T], key: Callable[[T], str], top_k: int
) -> list[tuple[T, float, str]]:
    """Summary-first: a direct search and the search within the top documents by summary, merged by equal
    reciprocal rank; (item, fused score, origin) best first, the first-seen item kept per key, origin
    "search" or "summary" after the list it was first seen in."""
    best: dict[str, tuple[T, str]] = {}
    for origin, hits in (("search", direct), ("summary", within)):
        for item in hits:
            best.setdefault(key(item), (item, origin))
    fused = reciprocal_rank([direct, within], key)
    order = sorted(fused, key=lambda k: -fused[k])[:top_k]
    return [(best[k][0], fused[k], best[k][1]) for k in order]


def merge_sub_queries(
    main: Sequence[T], subs: Sequence[Sequence[T]], key: Callable[[T], str], vector_score: Callable[[T], float]
) -> list[T]:
    """The main search's ranking first, untouched; then what only the sub-queries found, merged among
    themselves by reciprocal rank, each chunk as the sub-query that found it closest by vector (the highest
    `vector_score`) reported it. Appending keeps the main ranking's recall and adds the entity-specific chunks
    the whole question missed to the candidates (and to the answer's context when there is room); letting
    sub-query hits overtake the main ranking lowered recall (bench/README.md, "Why the retriever's defaults")."""
    seen = {key(item) for item in main}
    fused: dict[str, float] = {}
    best: dict[str, T] = {}
    for results in subs:
        for rank, item in enumerate(results):
            k = key(item)
            if k in seen:
                continue
            fused[k] = fused.get(k, 0.0) + 1.0 / (RRF_K + rank)
            if k not in best or vector_score(item) > vector_score(best[k]):
                best[k] = item
    return [*main, *(best[k] for k in sorted(fused, key=lambda k: -fused[k]))]


def merge_languages(rankings: Sequence[tuple[Mapping[str, float], float]]) -> dict[str, float]:
    """One lexical leg from the BM25 rankings of several analyses of a query, given as (chunk id → score, the
    analysis's bound), the query's own language first: each chunk's best score as a fraction of its analysis's
    bound, scaled back by the first bound (so one ranking comes back unchanged, and the leg stays in BM25 units
    for the fusion and the reported scores). A ranking with no positive bound matched nothing and is left out."""
    merged: dict[str, float] = {}
    scale = next((bound for _, bound in rankings if bound > 0), 0.0)
    for scores, bound in rankings:
        if bound <= 0:
            continue
        for key, value in scores.items():
            share = value / bound * scale
            if share > merged.get(key, float("-inf")):
                merged[key] = share
    return merged


def language_alpha(alpha: float, language: str, covered: Collection[str], uncovered_alpha: float) -> float:
    """The hybrid weight of a query in `language` (an ISO code): `alpha` when the embedder covers the language
    (`covered`; "*" covers all), else at most `uncovered_alpha`: an embedder that never saw the language places
    its queries poorly, and BM25 analysed in the language carries the ranking."""
    _check_alpha(alpha)
    if "*" in covered or language in covered:
        return alpha
    return min(alpha, uncovered_alpha)


def rocchio(query: Sequence[float], feedback: Sequence[Sequence[float]], weight: float) -> list[float] | None:
    """Vector pseudo-relevance feedback (Rocchio): normalise(q + weight * mean(feedback vectors)); None when
    there is no feedback vector or the moved vector is zero."""
    import numpy as np

    if not feedback:
        return None
    moved = np.asarray(query, dtype=np.float64) + weight * np.mean(np.asarray(feedback), axis=0)
    norm = float(np.linalg.norm(moved))
    return (moved / norm).tolist() if norm else None
