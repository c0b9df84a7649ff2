"""Ranking math against hand-computed examples: leg fusion (Weaviate's relativeScoreFusion and rankedFusion, DBSF), sub-query and summary-first merging, Rocchio feedback, the fusion vocabulary."""

from __future__ import annotations

import random

import pytest

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_retriever.ranking import (
    RRF_K,
    Fusion,
    distribution_based_fusion,
    fuse,
    merge_sub_queries,
    merge_summary_first,
    ranked_fusion,
    relative_score_fusion,
    rocchio,
)


def test_relative_score_fusion_matches_hand_computation() -> None:
    lexical = {"a": 10.0, "b": 5.0, "c": 0.0}  # normalised: a 1.0, b 0.5, c 0.0
    vector = {"b": 0.9, "d": 0.5, "c": 0.7}  # normalised: b 1.0, d 0.0, c 0.5
    fused = {f.chunk_id: f.score for f in relative_score_fusion(lexical, vector, alpha=0.75)}
    assert fused["a"] == pytest.approx(0.25 * 1.0)
    assert fused["b"] == pytest.approx(0.25 * 0.5 + 0.75 * 1.0)
    assert fused["c"] == pytest.approx(0.25 * 0.0 + 0.75 * 0.5)
    assert fused["d"] == pytest.approx(0.0)
    order = [f.chunk_id for f in relative_score_fusion(lexical, vector, alpha=0.75)]
    assert order == ["b", "c", "a", "d"]


def test_relative_score_fusion_equal_scores_normalise_to_one() -> None:
    fused = relative_score_fusion({"a": 3.0, "b": 3.0}, {}, alpha=0.5)
    assert [f.score for f in fused] == [pytest.approx(0.5), pytest.approx(0.5)]


def test_alpha_extremes_select_one_leg() -> None:
    lexical = {"a": 2.0, "b": 1.0}
    vector = {"b": 0.9, "a": 0.1}
    assert relative_score_fusion(lexical, vector, alpha=0.0)[0].chunk_id == "a"
    assert relative_score_fusion(lexical, vector, alpha=1.0)[0].chunk_id == "b"


def test_raw_scores_are_kept_beside_the_fused_score() -> None:
    top = relative_score_fusion({"a": 7.5}, {"a": 0.42, "b": 0.1}, alpha=0.5)[0]
    assert (top.chunk_id, top.lexical, top.vector) == ("a", 7.5, 0.42)


def test_ranked_fusion_is_weighted_reciprocal_rank() -> None:
    fused = {f.chunk_id: f.score for f in ranked_fusion(["a", "b"], ["b", "c"], alpha=0.5)}
    assert fused["a"] == pytest.approx(0.5 / 60)
    assert fused["b"] == pytest.approx(0.5 / 61 + 0.5 / 60)
    assert fused["c"] == pytest.approx(0.5 / 61)


def test_alpha_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="alpha"):
        relative_score_fusion({}, {}, alpha=1.5)


def test_distribution_based_fusion_matches_hand_computation() -> None:
    # lexical 1, 2, 3, 10: mean 4, population sd 3.5355; scaled (s - (4 - 10.6066)) / 21.2132
    lexical = {"a": 10.0, "b": 3.0, "c": 2.0, "d": 1.0}
    vector = {"b": 0.8, "c": 0.6}  # mean 0.7, sd 0.1: b (0.8 - 0.4) / 0.6, c (0.6 - 0.4) / 0.6
    fused = {f.chunk_id: f.score for f in distribution_based_fusion(lexical, vector, alpha=0.5)}
    sd = 12.5**0.5
    lex = {k: (v - (4 - 3 * sd)) / (6 * sd) for k, v in lexical.items()}
    assert fused["a"] == pytest.approx(0.5 * lex["a"])
    assert fused["b"] == pytest.approx(0.5 * lex["b"] + 0.5 * (0.4 / 0.6))
    assert fused["c"] == pytest.approx(0.5 * lex["c"] + 0.5 * (0.2 / 0.6))
    assert [f.chunk_id for f in distribution_based_fusion(lexical, vector, alpha=0.5)] == ["b", "a", "c", "d"]


def test_distribution_based_fusion_equal_scores_scale_to_one() -> None:
    fused = distribution_based_fusion({"a": 3.0, "b": 3.0}, {}, alpha=0.5)
    assert [f.score for f in fused] == [pytest.approx(0.5), pytest.approx(0.5)]


# ---------- merging and the vocabulary ----------


def _hit(chunk_id: str, vector: float) -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(chunk_id=chunk_id), score=vector, vector_score=vector)


def _gateway_merge_before(lists: list[list[common_pb2.ScoredChunk]]) -> list[common_pb2.ScoredChunk]:
    """The gateway's `merge_results` as it was before sub-queries moved into the search request, verbatim."""
    main, subs = lists[0], lists[1:]
    seen = {item.chunk.chunk_id for item in main}
    fused: dict[str, float] = {}
    best: dict[str, common_pb2.ScoredChunk] = {}
    for results in subs:
        for rank, item in enumerate(results):
            key = item.chunk.chunk_id
            if key in seen:
                continue
            fused[key] = fused.get(key, 0.0) + 1.0 / (60 + rank)
            if key not in best or item.vector_score > best[key].vector_score:
                best[key] = item
    return [*main, *(best[k] for k in sorted(fused, key=lambda k: -fused[k]))]


def _merge(lists: list[list[common_pb2.ScoredChunk]]) -> list[common_pb2.ScoredChunk]:
    return merge_sub_queries(lists[0], lists[1:], key=lambda i: i.chunk.chunk_id, vector_score=lambda i: i.vector_score)


def test_sub_query_hits_follow_the_main_ranking_without_reordering_it() -> None:
    main = [_hit("a", 0.9), _hit("b", 0.8)]
    first = [_hit("c", 0.5), _hit("b", 0.95), _hit("d", 0.4)]
    second = [_hit("d", 0.6), _hit("e", 0.3)]
    merged = _merge([main, first, second])
    # d is found by both sub-queries (1/62 + 1/60) and outranks c (1/60) and e (1/61); b stays second
    assert [m.chunk.chunk_id for m in merged] == ["a", "b", "d", "c", "e"]
    assert next(m for m in merged if m.chunk.chunk_id == "d").vector_score == pytest.approx(0.6)


def test_sub_query_merge_equals_the_gateway_merge_it_replaces() -> None:
    rng = random.Random(18)
    for _ in range(200):
        pool = [f"c{i}" for i in range(rng.randint(1, 40))]
        lists = [
            [_hit(c, round(rng.random(), 2)) for c in rng.sample(pool, rng.randint(0, len(pool)))]
            for _ in range(rng.randint(1, 4))
        ]
        expected = _gateway_merge_before(lists)
        got = _merge(lists)
        assert [(m.chunk.chunk_id, m.vector_score) for m in got] == [
            (m.chunk.chunk_id, m.vector_score) for m in expected
        ]


def test_summary_first_merges_by_equal_reciprocal_rank_and_keeps_the_first_origin() -> None:
    direct = ["a", "b", "c"]
    within = ["c", "d", "a"]
    merged = merge_summary_first(direct, within, key=lambda k: k, top_k=3)
    scores = {k: s for k, s, _ in merged}
    assert scores["a"] == pytest.approx(1 / RRF_K + 1 / (RRF_K + 2))
    assert scores["c"] == pytest.approx(1 / (RRF_K + 2) + 1 / RRF_K)
    # a and c tie: the order of first sight decides; d, found only by the summaries, is cut by top_k
    assert [(k, origin) for k, _, origin in merged] == [("a", "search"), ("c", "search"), ("b", "search")]
    assert merge_summary_first([], ["d"], key=lambda k: k, top_k=5)[0][2] == "summary"


def test_fusion_maps_one_to_one_from_the_proto_enum_and_the_api_strings() -> None:
    members = {Fusion.from_proto(v) for v in retriever_pb2.FusionType.values() if v}
    assert members == set(Fusion)
    assert Fusion.from_proto(retriever_pb2.FUSION_TYPE_UNSPECIFIED) is Fusion.RELATIVE_SCORE
    for fusion in Fusion:
        proto = retriever_pb2.FusionType.Value("FUSION_TYPE_" + fusion.value.upper())  # the gateway's mapping
        assert Fusion.from_proto(proto) is fusion


def test_fuse_dispatches_on_the_fusion() -> None:
    lexical, vector = {"a": 2.0, "b": 1.0, "c": 0.5}, {"b": 0.9, "c": 0.2}
    assert fuse(Fusion.RELATIVE_SCORE, lexical, vector, 0.5) == relative_score_fusion(lexical, vector, 0.5)
    assert fuse(Fusion.DISTRIBUTION_BASED, lexical, vector, 0.5) == distribution_based_fusion(lexical, vector, 0.5)
    assert fuse(Fusion.RANKED, lexical, vector, 0.5) == ranked_fusion(["a", "b", "c"], ["b", "c"], 0.5, lexical, vector)


def test_rocchio_moves_the_query_toward_the_feedback_mean_and_normalises() -> None:
    moved = rocchio([1.0, 0.0], [[0.0, 1.0], [0.0, 3.0]], weight=0.5)  # q + 0.5 * (0, 2) = (1, 1)
    assert moved == pytest.approx([2**-0.5, 2**-0.5])
    assert rocchio([1.0, 0.0], [], weight=1.0) is None
    assert rocchio([1.0, 0.0], [[-1.0, 0.0]], weight=1.0) is None  # cancelled out: no direction left


def test_graph_leg_is_added_on_top_and_brings_its_own_chunks() -> None:
    lexical = {"a": 10.0, "b": 5.0, "c": 0.0}
    vector = {"b": 0.9, "d": 0.5, "c": 0.7}
    two = {f.chunk_id: f.score for f in fuse(Fusion.RELATIVE_SCORE, lexical, vector, 0.75)}
    graph = {"c": 0.02, "e": 0.01, "a": 0.0}  # normalised: c 1.0, e 0.5, a 0.0
    three = {f.chunk_id: f for f in fuse(Fusion.RELATIVE_SCORE, lexical, vector, 0.75, graph, 0.4)}
    assert three["c"].score == pytest.approx(two["c"] + 0.4 * 1.0)
    assert three["a"].score == pytest.approx(two["a"])
    assert three["e"].score == pytest.approx(0.4 * 0.5)  # only the graph found it
    assert (three["e"].lexical, three["e"].vector, three["e"].graph) == (None, None, 0.01)
    # no graph scores, or weight 0: exactly the two-leg ranking
    assert fuse(Fusion.RELATIVE_SCORE, lexical, vector, 0.75, graph, 0.0) == fuse(
        Fusion.RELATIVE_SCORE, lexical, vector, 0.75
    )
    with pytest.raises(ValueError, match="graph_weight"):
        fuse(Fusion.RELATIVE_SCORE, lexical, vector, 0.75, graph, -1.0)
    # scaled by the best mass, not min-max: the least of the chunks the walk reached keeps its share
    reached = {f.chunk_id: f for f in fuse(Fusion.RELATIVE_SCORE, lexical, vector, 0.75, {"c": 0.02, "e": 0.01}, 0.4)}
    assert reached["e"].score == pytest.approx(0.4 * 0.5)


def test_graph_leg_in_ranked_fusion_adds_a_reciprocal_rank() -> None:
    lexical, vector = {"a": 2.0, "b": 1.0}, {"b": 0.9, "a": 0.1}
    two = {f.chunk_id: f.score for f in fuse(Fusion.RANKED, lexical, vector, 0.5)}
    three = {f.chunk_id: f.score for f in fuse(Fusion.RANKED, lexical, vector, 0.5, {"z": 3.0, "a": 1.0}, 2.0)}
    assert three["z"] == pytest.approx(2.0 / RRF_K)
    assert three["a"] == pytest.approx(two["a"] + 2.0 / (RRF_K + 1))
    assert three["b"] == pytest.approx(two["b"])
