"""Context assembly against hand-computed examples: boost, expansion, MMR, budget and the pipeline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_retriever.assembly import (
    AssemblyOptions,
    Candidate,
    apply_token_budget,
    assemble,
    coverage_boost,
    documents_to_expand,
    drop_restated,
    estimate_tokens,
    expand_documents,
    expand_thin,
    mmr,
    plan,
)


def cand(
    chunk_id: str,
    score: float = 1.0,
    *,
    doc: str = "d1",
    section: tuple[str, ...] = ("S",),
    ordinal: int = 0,
    parent: str = "",
    tokens: int = 100,
    text: str = "",
    embedding: list[float] | None = None,
    origin: str = "search",
) -> Candidate:
    return Candidate(
        chunk_id=chunk_id,
        document_id=doc,
        section_key=section,
        ordinal=ordinal,
        parent_id=parent,
        level=3,
        text=text or chunk_id,
        score=score,
        tokens=tokens,
        embedding=embedding,
        origin=origin,
    )


def ids(cands: list[Candidate]) -> list[str]:
    return [c.chunk_id for c in cands]


def scores(cands: list[Candidate]) -> dict[str, float]:
    return {c.chunk_id: c.score for c in cands}


# coverage boost ---------------------------------------------------------------------------------------


def test_coverage_boost_multiplies_by_returned_share_of_the_section() -> None:
    cands = [
        cand("a1", 0.8, section=("A",)),
        cand("a2", 0.5, section=("A",)),
        cand("b1", 0.82, section=("B",)),
        cand("u1", 0.81, section=("U",)),  # no total known: not boosted
        cand("a3", 0.3, section=("A",), origin="sibling"),
    ]  # an expansion: neither counted nor boosted
    totals = {("d1", ("A",)): 4, ("d1", ("B",)): 10}
    out = coverage_boost(cands, totals, weight=0.5)
    # a: 2 of 4 returned → × 1.25; b: 1 of 10 → × 1.05
    assert scores(out) == pytest.approx({"a1": 1.0, "a2": 0.625, "b1": 0.861, "u1": 0.81, "a3": 0.3})
    assert ids(out) == ["a1", "b1", "u1", "a2", "a3"]
    assert out[0].base_score == 0.8
    # boosting again starts from the base score: no compounding
    assert scores(coverage_boost(out, totals, weight=0.5)) == pytest.approx(scores(out))


def test_coverage_ratio_is_capped_at_one() -> None:
    out = coverage_boost([cand("a", 1.0), cand("b", 1.0)], {("d1", ("S",)): 1}, weight=0.1)
    assert scores(out) == pytest.approx({"a": 1.1, "b": 1.1})


# document expansion --------------------------------------------------------------------------------------


def test_documents_to_expand_relative_to_the_top_score() -> None:
    cands = [
        cand("x", 1.0, doc="d1"),
        cand("y", 0.75, doc="d2"),
        cand("z", 0.8, doc="d4"),
        cand("w", 0.5, doc="d3"),
        cand("v", 0.2, doc="d2"),
    ]
    assert documents_to_expand(cands, threshold=0.7, max_docs=0) == ["d1", "d4", "d2"]
    assert documents_to_expand(cands, threshold=0.7, max_docs=2) == ["d1", "d4"]
    assert documents_to_expand(cands, threshold=0.0, max_docs=5) == []
    # decided on the pre-boost score
    boosted = coverage_boost(cands, {("d3", ("S",)): 1}, weight=1.0)  # w: 0.5 → 1.0
    assert documents_to_expand(boosted, threshold=0.7, max_docs=0) == ["d1", "d4", "d2"]


def test_expand_documents_adds_nearest_chunks_with_decayed_scores_up_to_the_cap() -> None:
    hits = [cand("h5", 0.9, ordinal=5), cand("h9", 0.6, ordinal=9), cand("o", 0.7, doc="d2")]
    rows = [cand(f"c{o}", 0.0, ordinal=o) for o in (3, 4, 6, 7, 12)] + [cand("h5", 0.0, ordinal=5)]
    # distance to the nearest hit: c3 2, c4 1, c6 1, c7 2, c12 3 → 0.9 × 0.5^d
    full = expand_documents(hits, {"d1": rows}, max_chunks_per_document=0)
    assert scores(full) == pytest.approx(
        {"h5": 0.9, "h9": 0.6, "o": 0.7, "c3": 0.225, "c4": 0.45, "c6": 0.45, "c7": 0.225, "c12": 0.1125}
    )
    assert {c.origin for c in full if c.chunk_id.startswith("c")} == {"document_expansion"}
    capped = expand_documents(hits, {"d1": rows}, max_chunks_per_document=4)  # 2 hits held → room for 2
    assert ids(capped) == ["h5", "o", "h9", "c4", "c6"]
    # a cap below the hits held removes nothing
    assert ids(expand_documents(hits, {"d1": rows}, max_chunks_per_document=1)) == ["h5", "o", "h9"]


# thin expansion -------------------------------------------------------------------------------------------


def test_expand_thin_adds_parent_and_siblings_once() -> None:
    cands = [
        cand("t", 0.8, tokens=10, parent="p", ordinal=4),
        cand("u", 0.6, tokens=12, parent="p", ordinal=6),
        cand("big", 0.9, tokens=200, ordinal=9),
        cand("s3", 0.5, ordinal=3),
    ]
    neighbours = {
        "t": [cand("p", ordinal=0), cand("s3", ordinal=3), cand("n5", ordinal=5)],
        "u": [cand("p", ordinal=0), cand("n5", ordinal=5), cand("s7", ordinal=7)],
        "big": [cand("s10", ordinal=10)],  # not thin: never used
    }
    out = expand_thin(cands, neighbours, thin_tokens=40)
    assert sorted(ids(out)) == ["big", "n5", "p", "s3", "s7", "t", "u"]
    got = {c.chunk_id: (c.origin, c.score) for c in out}
    assert got["p"] == ("parent", pytest.approx(0.4))  # from t (0.8 × 0.5) beats from u (0.3)
    assert got["n5"] == ("sibling", pytest.approx(0.4))
    assert got["s7"] == ("sibling", pytest.approx(0.3))
    assert got["s3"] == ("search", 0.5)  # already a hit: untouched


def test_expansions_are_not_expanded_again() -> None:
    cands = [cand("t", 0.8, tokens=10, origin="sibling")]
    assert ids(expand_thin(cands, {"t": [cand("x")]}, thin_tokens=40)) == ["t"]


# MMR -------------------------------------------------------------------------------------------------------


def test_mmr_prefers_a_diverse_item_over_a_near_duplicate() -> None:
    a = cand("a", 1.0, embedding=[1.0, 0.0, 0.0])
    dup = cand("dup", 0.95, embedding=[0.99, 0.141, 0.0])  # cosine with a ≈ 0.99
    b = cand("b", 0.7, embedding=[0.0, 1.0, 0.0])  # orthogonal to a
    # after a: dup 0.7 × 0.95 − 0.3 × 0.99 ≈ 0.368 < b 0.7 × 0.7 − 0.3 × 0 = 0.49
    assert ids(mmr([dup, b, a], lambda_=0.7, k=0)) == ["a", "b", "dup"]
    assert ids(mmr([dup, b, a], lambda_=0.7, k=2)) == ["a", "b"]
    assert ids(mmr([dup, b, a], lambda_=1.0, k=0)) == ["a", "dup", "b"]  # λ = 1: relevance only
    assert scores(mmr([dup, b, a], lambda_=0.7, k=0)) == {"a": 1.0, "dup": 0.95, "b": 0.7}


def test_mmr_falls_back_to_word_jaccard_without_embeddings() -> None:
    a = cand("a", 1.0, text="pgvector hnsw index build")
    near = cand("near", 0.9, text="pgvector hnsw index build time", embedding=[1.0, 0.0])
    other = cand("other", 0.6, text="weaviate hybrid search alpha")
    # after a: near 0.5 × 0.9 − 0.5 × 4/5 = 0.05 < other 0.5 × 0.6 − 0 = 0.3
    assert ids(mmr([a, near, other], lambda_=0.5, k=0)) == ["a", "other", "near"]


def test_mmr_starts_from_the_pinned_chunk() -> None:
    a = cand("a", 1.0, embedding=[1.0, 0.0])
    b = cand("b", 0.9, embedding=[0.0, 1.0])
    assert ids(mmr([a, b], lambda_=0.7, k=0, first="b")) == ["b", "a"]
    with pytest.raises(ValueError, match="lambda"):
        mmr([a], lambda_=1.5, k=0)


# token budget ------------------------------------------------------------------------------------------------


def test_token_budget_keeps_a_prefix_and_at_least_one() -> None:
    cands = [cand("a", tokens=50), cand("b", tokens=30), cand("c", tokens=40), cand("d", tokens=10)]
    assert ids(apply_token_budget(cands, 85)) == ["a", "b"]  # c does not fit; d is not reached
    assert ids(apply_token_budget(cands, 10)) == ["a"]  # too big, kept anyway
    assert ids(apply_token_budget(cands, 0)) == ["a", "b", "c", "d"]
    assert apply_token_budget([], 10) == []


def test_estimate_tokens_counts_words_and_cjk_characters() -> None:
    assert estimate_tokens("one two three") == 4  # ceil(3 × 4/3)
    assert estimate_tokens("RAG 检索系统") == 2 + 4  # ceil(1 × 4/3) + 4


# pipeline ------------------------------------------------------------------------------------------------------


def test_options_from_proto_resolve_zero_defaults() -> None:
    opts = AssemblyOptions.from_proto(retriever_pb2.ContextOptions(enabled=True, mmr=True, token_budget=500))
    assert (opts.thin_chunk_tokens, opts.coverage_weight, opts.mmr_lambda) == (40, 0.1, 0.7)
    assert (opts.mmr, opts.token_budget, opts.document_expansion_threshold) == (True, 500, 0.0)


def test_assemble_dedupes_and_keeps_the_best_hit_first_despite_the_boost() -> None:
    cands = [
        cand("c2", 0.95, section=("small",)),
        cand("t1", 1.0, section=("big",), tokens=900),
        cand("c2", 0.5, section=("small",)),
        cand("c3", 0.4, section=("small",)),
    ]
    totals = {("d1", ("big",)): 100, ("d1", ("small",)): 2}
    opts = AssemblyOptions(coverage_boost=True, token_budget=100)
    out = assemble(cands, opts, section_totals=totals)
    # c2 is boosted to 0.95 × 1.1 = 1.045 > t1 × 1.001, but the best search hit stays first and survives a
    # budget it alone exceeds
    assert ids(out) == ["t1"]
    out = assemble(cands, AssemblyOptions(coverage_boost=True), section_totals=totals)
    assert ids(out) == ["t1", "c2", "c3"]
    assert scores(out) == pytest.approx({"t1": 1.001, "c2": 1.045, "c3": 0.44})


def _scenario() -> tuple[list[Candidate], AssemblyOptions, dict, dict, dict]:
    e1, e2 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    hits = [
        cand("h1", 1.0, section=("A",), ordinal=2, embedding=e1, tokens=80),
        cand("h1dup", 0.9, section=("A",), ordinal=3, embedding=[0.99, 0.14, 0.0], tokens=80),
        cand("h2", 0.6, doc="d2", section=("B",), ordinal=0, embedding=e2, tokens=20, parent="d2p"),
        cand("h3", 0.2, doc="d3", ordinal=0, embedding=[0.0, 0.0, 1.0], tokens=80),
    ]
    totals = {("d1", ("A",)): 4, ("d2", ("B",)): 5, ("d3", ("S",)): 1}
    doc_chunks = {"d1": [cand(f"d1c{o}", 0.0, section=("A",), ordinal=o, tokens=50) for o in range(6)]}
    neighbours = {"h2": [cand("d2p", 0.0, doc="d2", ordinal=0, tokens=300), cand("d2n", 0.0, doc="d2", ordinal=1)]}
    opts = AssemblyOptions(
        document_expansion_threshold=0.8,
        max_chunks_per_document=3,
        sibling_expansion=True,
        coverage_boost=True,
        mmr=True,
        token_budget=10_000,
    )
    return hits, opts, totals, doc_chunks, neighbours


def test_assemble_runs_every_step_without_duplicates() -> None:
    hits, opts, totals, doc_chunks, neighbours = _scenario()
    p = plan(hits, opts)
    assert p.documents == ["d1"] and p.thin_chunk_ids == ["h2"]
    assert p.sections == [("d1", ("A",)), ("d2", ("B",)), ("d3", ("S",))]
    out = assemble(hits, opts, section_totals=totals, doc_chunks=doc_chunks, neighbours=neighbours)
    assert len(ids(out)) == len(set(ids(out)))
    got = {c.chunk_id: (c.origin, c.score) for c in out}
    # boost: d1/A 2 of 4 → × 1.05; d2/B 1 of 5 → × 1.02; d3 1 of 1 → × 1.1
    assert got["h1"] == ("search", pytest.approx(1.05))
    assert got["h2"] == ("search", pytest.approx(0.612))
    assert got["h3"] == ("search", pytest.approx(0.22))
    # d1 held 2 chunks, cap 3 → one added: ordinal 1 (distance 1 from h1, the smaller id of the ties 1 and 4)
    assert got["d1c1"] == ("document_expansion", pytest.approx(1.05 * 0.5))
    assert "d1c4" not in got and "d1c2" not in got
    # h2 is thin (20 < 40): its parent and neighbour at half its score
    assert got["d2p"] == ("parent", pytest.approx(0.306))
    assert got["d2n"] == ("sibling", pytest.approx(0.306))
    # MMR (λ 0.7, rel = score / 1.05): after h1, the near-duplicate h1dup gains 0.7 × 0.9 − 0.3 × 0.99 = 0.333,
    # the orthogonal h2 0.7 × 0.583 = 0.408 and d1c1 (no embedding: word Jaccard 0) 0.7 × 0.5 = 0.35;
    # d2n and d2p tie at 0.204 (smaller id first) and beat h3 at 0.147
    assert ids(out) == ["h1", "h2", "d1c1", "h1dup", "d2n", "d2p", "h3"]


def test_assemble_is_idempotent() -> None:
    hits, opts, totals, doc_chunks, neighbours = _scenario()
    once = assemble(hits, opts, section_totals=totals, doc_chunks=doc_chunks, neighbours=neighbours)
    twice = assemble(once, opts, section_totals=totals, doc_chunks=doc_chunks, neighbours=neighbours)
    assert twice == once
    budgeted = AssemblyOptions(**{**opts.__dict__, "token_budget": 300})
    cut = assemble(hits, budgeted, section_totals=totals, doc_chunks=doc_chunks, neighbours=neighbours)
    assert ids(cut) == ["h1", "h2", "d1c1", "h1dup"]  # 230 tokens; d2n's 100 more would pass 300
    assert assemble(cut, budgeted, section_totals=totals, doc_chunks=doc_chunks, neighbours=neighbours) == cut


def test_a_chunk_that_restates_a_better_one_of_its_document_is_dropped() -> None:
    """Found asking the shared PPTX: a one-slide section's paragraph, section and document chunks (the same text
    under its title) were three of the five sources of "How many monthly active users are there?"."""
    text = "Total revenue grew 18% year-over-year. Monthly active users: 4.2M. Net retention rate: 112%."
    hits = [
        cand("p", 0.9, text=text),
        replace(cand("s", 0.8, text=f"Q3 Revenue Summary\n{text}"), level=2),
        replace(cand("doc", 0.7, text=f"Q3 Revenue Summary\n{text}"), level=1),
        cand("copy", 0.6, doc="d2", text=text),  # another document saying it stays: a source of its own
        cand("more", 0.5, text=f"{text} APAC region exceeded targets by 12%. Hire three more."),
        replace(cand("2020", 0.4, text=text.replace("18%", "11%")), level=2),  # a number more: something to say
        cand("same", 0.3, text=text),  # the same level: two paragraphs of the document that say it twice stay
    ]
    assert ids(drop_restated(hits)) == ["p", "copy", "more", "2020", "same"]
    # the best hit is never dropped, even when a chunk scored above it says more
    assert ids(drop_restated(hits, first="s")) == ["s", "copy", "more", "2020"]  # the paragraphs it holds go
    out = assemble(hits, AssemblyOptions(mmr=False), limit=5)
    assert ids(out) == ["p", "copy", "more", "2020", "same"]


def test_assemble_of_nothing_is_nothing() -> None:
    assert assemble([], AssemblyOptions(mmr=True)) == []
