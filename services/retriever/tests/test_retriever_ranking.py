"""Ranking math against hand-computed examples: leg fusion (Weaviate's relativeScoreFusion and rankedFusion, DBSF), sub-query and summary-first merging, Rocchio feedback, the fusion vocabulary."""
from __future__ import annotations

import pytest

from ragmesh_retriever.ranking import distribution_based_fusion, ranked_fusion, relative_score_fusion


def test_relative_score_fusion_matches_hand_computation() -> None:
    lexical = {"a": 10.0, "b": 5.0, "c": 0.0}     # normalised: a 1.0, b 0.5, c 0.0
    vector = {"b": 0.9, "d": 0.5, "c": 0.7}       # normalised: b 1.0, d 0.0, c 0.5
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
    vector = {"b": 0.8, "c": 0.6}                   # mean 0.7, sd 0.1: b (0.8 - 0.4) / 0.6, c (0.6 - 0.4) / 0.6
    fused = {f.chunk_id: f.score for f in distribution_based_fusion(lexical, vector, alpha=0.5)}
    sd = 12.5 ** 0.5
    lex = {k: (v - (4 - 3 * sd)) / (6 * sd) for k, v in lexical.items()}
    assert fused["a"] == pytest.approx(0.5 * lex["a"])
    assert fused["b"] == pytest.approx(0.5 * lex["b"] + 0.5 * (0.4 / 0.6))
    assert fused["c"] == pytest.approx(0.5 * lex["c"] + 0.5 * (0.2 / 0.6))
    assert [f.chunk_id for f in distribution_based_fusion(lexical, vector, alpha=0.5)] == ["b", "a", "c", "d"]


def test_distribution_based_fusion_equal_scores_scale_to_one() -> None:
    fused = distribution_based_fusion({"a": 3.0, "b": 3.0}, {}, alpha=0.5)
    assert [f.score for f in fused] == [pytest.approx(0.5), pytest.approx(0.5)]
