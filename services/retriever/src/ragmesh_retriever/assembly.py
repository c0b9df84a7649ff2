"""Context assembly over search results: coverage boost, expansion, diversity and a token budget.

Pure functions over `Candidate` lists (no I/O): where rows beyond the search results are needed (section
sizes, a document's chunks, a thin chunk's neighbours) the caller fetches them — `plan` says which — and
passes them in. `assemble` runs the steps in this order:

1. coverage boost   — rank chunks of sections the search covered densely a little higher;
2. document expansion — add more chunks of the documents that scored near the top;
3. thin expansion   — add the parent and neighbours of chunks too short to stand alone;
4. restated         — drop a chunk that says nothing a better-ranked chunk of its document does not;
5. MMR              — re-order for diversity (near-duplicates fall back);
6. token budget     — keep the longest prefix that fits.

Guarantees: a chunk id appears once; the best search chunk (by its score before the boost) is always
first; the input is not mutated; assembling an assembled list again with the same fetched rows gives the
same list (the boost is recomputed from `base_score`, expansions find their chunks already present) —
except after the token budget or `limit` cut a search hit, whose place another chunk may then take.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ragmesh_common.text.words import without_restated

SEARCH = "search"
DOCUMENT_EXPANSION = "document_expansion"
SIBLING = "sibling"
PARENT = "parent"
EXPANSION_ORIGINS = frozenset({DOCUMENT_EXPANSION, SIBLING, PARENT})

DEFAULT_THIN_TOKENS = 40
DEFAULT_COVERAGE_WEIGHT = 0.1
DEFAULT_MMR_LAMBDA = 0.7
DEFAULT_MAX_DOCUMENTS = 3
# An added chunk scores its source's score times DECAY per step away (ordinal distance for document
# expansion, one step for a thin chunk's parent or neighbour): always below the chunk it came from.
DEFAULT_DECAY = 0.5

SectionKey = tuple[str, tuple[str, ...]]  # (document_id, section_key)


@dataclass(frozen=True)
class Candidate:
    chunk_id: str
    document_id: str
    section_key: tuple[str, ...]
    ordinal: int
    parent_id: str
    level: int
    text: str
    score: float
    tokens: int
    embedding: list[float] | None = field(default=None, compare=False, repr=False)
    origin: str = SEARCH
    # the score before the coverage boost; None until boosted
    base_score: float | None = None
    # anything the caller wants carried along (e.g. the backend Hit); ignored here
    payload: Any = field(default=None, compare=False, repr=False)

    @property
    def relevance(self) -> float:
        """The search score, before any boost."""
        return self.score if self.base_score is None else self.base_score


@dataclass(frozen=True)
class AssemblyOptions:
    """ContextOptions with its zero-means-default fields resolved."""

    document_expansion_threshold: float = 0.0  # 0 = off
    max_chunks_per_document: int = 3  # 0 = no cap
    max_documents: int = DEFAULT_MAX_DOCUMENTS  # documents expanded at most (0 = no limit)
    sibling_expansion: bool = False
    thin_chunk_tokens: int = DEFAULT_THIN_TOKENS
    coverage_boost: bool = False
    coverage_weight: float = DEFAULT_COVERAGE_WEIGHT
    mmr: bool = False
    mmr_lambda: float = DEFAULT_MMR_LAMBDA
    token_budget: int = 0  # 0 = no budget
    decay: float = DEFAULT_DECAY

    @classmethod
    def from_proto(cls, options: Any, max_documents: int = DEFAULT_MAX_DOCUMENTS) -> AssemblyOptions:
        """From a `retriever_pb2.ContextOptions` (0 means the documented default)."""
        return cls(
            document_expansion_threshold=max(0.0, options.document_expansion_threshold),
            max_chunks_per_document=max(0, options.max_chunks_per_document),
            max_documents=max_documents,
            sibling_expansion=options.sibling_expansion,
            thin_chunk_tokens=options.thin_chunk_tokens or DEFAULT_THIN_TOKENS,
            coverage_boost=options.coverage_boost,
            coverage_weight=options.coverage_weight or DEFAULT_COVERAGE_WEIGHT,
            mmr=options.mmr,
            mmr_lambda=options.mmr_lambda or DEFAULT_MMR_LAMBDA,
            token_budget=max(0, options.token_budget),
        )


@dataclass(frozen=True)
class Plan:
    """What the caller must fetch before `assemble`."""

    sections: list[SectionKey]  # for section_totals (only when coverage_boost)
    documents: list[str]  # for doc_chunks (only when document expansion is on)
    thin_chunk_ids: list[str]  # for neighbours (only when sibling_expansion)


_TOKEN = re.compile(r"\w+")
_CJK_CHAR = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def estimate_tokens(text: str) -> int:
    """A model-free token estimate: 4/3 tokens per word (about 0.75 words per BPE token in English
    prose), plus one per CJK character (CJK BPE tokens rarely span more than one character)."""
    cjk = len(_CJK_CHAR.findall(text))
    words = len(_TOKEN.findall(_CJK_CHAR.sub(" ", text)))
    return math.ceil(words * 4 / 3) + cjk


def _ranked(cands: Iterable[Candidate]) -> list[Candidate]:
    # score first, then id, so the order does not depend on the input order
    return sorted(cands, key=lambda c: (-c.score, c.chunk_id))


def _is_hit(c: Candidate) -> bool:
    return c.origin not in EXPANSION_ORIGINS


def dedupe(cands: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per chunk id — the highest-scored one — in first-seen order."""
    best: dict[str, Candidate] = {}
    for c in cands:
        kept = best.get(c.chunk_id)
        if kept is None or c.score > kept.score:
            best[c.chunk_id] = c
    return list(best.values())


def drop_restated(cands: Sequence[Candidate], first: str | None = None) -> list[Candidate]:
    """The candidates, best first, without one that restates a better-ranked chunk of the same document at another
    level (`words.without_restated`: a short document's paragraph, section and document chunks say one text three
    times, and filled three of five sources with it). `first` (the best hit) is never dropped; a chunk with more
    to say (a section beyond its paragraph) stays."""
    ranked = _ranked(cands)
    ranked = [c for c in ranked if c.chunk_id == first] + [c for c in ranked if c.chunk_id != first]
    return without_restated(ranked, lambda c: (c.document_id, c.level, c.text))


def coverage_boost(
    cands: Sequence[Candidate], section_totals: Mapping[SectionKey, int], weight: float
) -> list[Candidate]:
    """score = base × (1 + weight × returned_in_section / chunks_in_section), best first.

    `returned_in_section` counts the search hits (not expansions) of the section among `cands`;
    `chunks_in_section` comes from `section_totals[(document_id, section_key)]` — an unknown section is not
    boosted. The ratio is at most 1, so a boost never exceeds 1 + weight: a tie-breaker, not a ranker.
    Rationale: a section that yields many of its chunks is the topical one — passage scores aggregated to
    their unit, as in the SumP aggregation of Dai & Callan (SIGIR 2019). The base (pre-boost) score is
    kept in `base_score`, so boosting again does not compound.
    """
    returned: dict[SectionKey, int] = {}
    for c in cands:
        if _is_hit(c):
            key = (c.document_id, c.section_key)
            returned[key] = returned.get(key, 0) + 1
    out = []
    for c in cands:
        key = (c.document_id, c.section_key)
        total = section_totals.get(key, 0)
        if not _is_hit(c) or total <= 0:
            out.append(c)
            continue
        ratio = min(1.0, returned[key] / total)
        out.append(replace(c, score=c.relevance * (1.0 + weight * ratio), base_score=c.relevance))
    return _ranked(out)


def documents_to_expand(cands: Sequence[Candidate], threshold: float, max_docs: int) -> list[str]:
    """Documents whose best search score ≥ threshold × the top search score, best first (≤ max_docs).

    Scores are the pre-boost search scores (`relevance`), so the caller can decide what to fetch before
    `assemble` boosts anything. threshold ≤ 0 turns expansion off; max_docs ≤ 0 means no limit.
    """
    hits = [c for c in cands if _is_hit(c)]
    if threshold <= 0 or not hits:
        return []
    top = max(c.relevance for c in hits)
    if top <= 0:
        return []
    best: dict[str, float] = {}
    for c in hits:
        best[c.document_id] = max(best.get(c.document_id, -math.inf), c.relevance)
    docs = sorted((d for d, s in best.items() if s >= threshold * top), key=lambda d: (-best[d], d))
    return docs[:max_docs] if max_docs > 0 else docs


def expand_documents(
    cands: Sequence[Candidate],
    doc_chunks: Mapping[str, Sequence[Candidate]],
    max_chunks_per_document: int,
    decay: float = DEFAULT_DECAY,
) -> list[Candidate]:
    """Adds each document's other chunks (from `doc_chunks[document_id]`), origin "document_expansion".

    score = best hit score of the document × decay ** d, d = the ordinal distance to the nearest hit of
    that document (at least 1), so the chunks next to a hit come first and every added chunk stays below
    the document's best. Nearest chunks are added first until the document holds
    `max_chunks_per_document` chunks (0 = no cap); the cap never removes hits. Result best first.
    """
    present = {c.chunk_id for c in cands}
    out = list(cands)
    for doc_id, rows in doc_chunks.items():
        hits = [c for c in cands if c.document_id == doc_id and _is_hit(c)]
        if not hits:
            continue
        best = max(c.score for c in hits)
        held = sum(1 for c in cands if c.document_id == doc_id)
        room = max_chunks_per_document - held if max_chunks_per_document > 0 else len(rows)
        added: list[Candidate] = []
        for row in rows:
            if row.chunk_id in present or row.document_id != doc_id:
                continue
            distance = max(1, min(abs(row.ordinal - h.ordinal) for h in hits))
            added.append(replace(row, score=best * decay**distance, origin=DOCUMENT_EXPANSION, base_score=None))
        for c in _ranked(added)[: max(0, room)]:
            present.add(c.chunk_id)
            out.append(c)
    return _ranked(out)


def thin_chunks(cands: Sequence[Candidate], thin_tokens: int) -> list[Candidate]:
    """Search hits shorter than `thin_tokens` tokens (expansions are never expanded again)."""
    return [c for c in cands if _is_hit(c) and c.tokens < thin_tokens]


def expand_thin(
    cands: Sequence[Candidate],
    neighbours: Mapping[str, Sequence[Candidate]],
    thin_tokens: int,
    decay: float = DEFAULT_DECAY,
) -> list[Candidate]:
    """Adds the parent and previous/next siblings of thin hits (tokens < thin_tokens).

    `neighbours[chunk_id]` holds the rows the caller fetched for that chunk (its parent and its
    neighbours by ordinal). A row whose id is the thin chunk's `parent_id` gets origin "parent", the others
    "sibling"; score = the thin chunk's score × decay. A chunk already present is not added again; one
    reached from two thin chunks keeps the higher score. Result best first.
    """
    present = {c.chunk_id for c in cands}
    added: dict[str, Candidate] = {}
    for thin in thin_chunks(cands, thin_tokens):
        for row in neighbours.get(thin.chunk_id, ()):
            if row.chunk_id in present or row.chunk_id == thin.chunk_id:
                continue
            origin = PARENT if row.chunk_id == thin.parent_id else SIBLING
            new = replace(row, score=thin.score * decay, origin=origin, base_score=None)
            kept = added.get(row.chunk_id)
            if kept is None or new.score > kept.score:
                added[row.chunk_id] = new
    return _ranked([*cands, *added.values()])


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def mmr(cands: Sequence[Candidate], lambda_: float, k: int, first: str | None = None) -> list[Candidate]:
    """Maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998): up to k candidates, in pick order.

    Each step picks argmax over the rest of  λ · rel(d) − (1 − λ) · max_{s ∈ picked} sim(d, s)
    with rel = score / top score (min-max normalised when the top score is not positive) and sim the
    cosine of the embeddings, or the Jaccard overlap of lower-cased word sets when either embedding is
    missing. `first` (a chunk id) is picked first when given; otherwise the most relevant is. Ties go to
    the higher score, then the smaller id. k ≤ 0 re-orders all. Scores are left as they are.
    """
    if not cands:
        return []
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda must be within [0, 1], got {lambda_}")
    items = _ranked(cands)
    n = len(items)
    k = n if k <= 0 else min(k, n)
    scores = np.array([c.score for c in items], dtype=np.float64)
    top, low = scores.max(), scores.min()
    if top > 0:
        rel = scores / top
    elif top > low:
        rel = (scores - low) / (top - low)
    else:
        rel = np.ones(n)

    dims = {len(c.embedding) for c in items if c.embedding}
    dim = dims.pop() if len(dims) == 1 else None
    has_vec = np.array([bool(c.embedding) and dim is not None for c in items])
    unit = np.zeros((n, dim or 1))
    for i, c in enumerate(items):
        if has_vec[i]:
            v = np.asarray(c.embedding, dtype=np.float64)
            norm = np.linalg.norm(v)
            if norm > 0:
                unit[i] = v / norm
            else:
                has_vec[i] = False
    words = [frozenset(_TOKEN.findall(c.text.lower())) for c in items]

    def similarities(j: int) -> np.ndarray:
        sims = unit @ unit[j] if has_vec[j] else np.zeros(n)
        for i in range(n):
            if not (has_vec[i] and has_vec[j]):
                sims[i] = _jaccard(words[i], words[j])
        return sims

    picked: list[int] = []
    remaining = np.ones(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    start = next((i for i, c in enumerate(items) if c.chunk_id == first), None) if first else None
    while len(picked) < k:
        if not picked:
            j = start if start is not None else 0  # items are best first
        else:
            gain = lambda_ * rel - (1.0 - lambda_) * max_sim
            gain[~remaining] = -np.inf
            j = int(np.argmax(gain))  # the first maximum: the higher score, then the smaller id
        picked.append(j)
        remaining[j] = False
        max_sim = np.maximum(max_sim, similarities(j))
    return [items[i] for i in picked]


def apply_token_budget(cands: Sequence[Candidate], budget: int) -> list[Candidate]:
    """The longest prefix whose tokens sum to at most `budget`; the first candidate is always kept.

    budget ≤ 0 means no budget. A prefix (not a knapsack fill) keeps the ranking's order meaningful.
    """
    if budget <= 0 or not cands:
        return list(cands)
    out = [cands[0]]
    used = cands[0].tokens
    for c in cands[1:]:
        if used + c.tokens > budget:
            break
        out.append(c)
        used += c.tokens
    return out


def _best_hit(cands: Sequence[Candidate]) -> Candidate | None:
    hits = [c for c in cands if _is_hit(c)] or list(cands)
    return min(hits, key=lambda c: (-c.relevance, c.chunk_id), default=None)


def plan(cands: Sequence[Candidate], options: AssemblyOptions) -> Plan:
    """The rows `assemble` will need: section totals, document chunks and thin chunks' neighbours."""
    unique = dedupe(cands)
    sections = sorted({(c.document_id, c.section_key) for c in unique if _is_hit(c)}) if options.coverage_boost else []
    documents = documents_to_expand(unique, options.document_expansion_threshold, options.max_documents)
    thin = [c.chunk_id for c in thin_chunks(unique, options.thin_chunk_tokens)] if options.sibling_expansion else []
    return Plan(sections=sections, documents=documents, thin_chunk_ids=thin)


def assemble(
    cands: Sequence[Candidate],
    options: AssemblyOptions,
    *,
    section_totals: Mapping[SectionKey, int] | None = None,
    doc_chunks: Mapping[str, Sequence[Candidate]] | None = None,
    neighbours: Mapping[str, Sequence[Candidate]] | None = None,
    limit: int = 0,
) -> list[Candidate]:
    """boost → document expansion → thin expansion → MMR → (limit) → token budget; see the module doc.

    Rows the caller did not fetch (None) skip their step. `limit` > 0 keeps that many after MMR (or
    after the ordering by score when MMR is off), before the budget. The best search hit is always first.
    """
    items = _ranked(dedupe(cands))
    top = _best_hit(items)
    if top is None:
        return []
    if options.coverage_boost and section_totals:
        items = coverage_boost(items, section_totals, options.coverage_weight)
    docs = documents_to_expand(items, options.document_expansion_threshold, options.max_documents)
    if docs and doc_chunks:
        chosen = {d: doc_chunks[d] for d in docs if d in doc_chunks}
        items = expand_documents(items, chosen, options.max_chunks_per_document, options.decay)
    if options.sibling_expansion and neighbours:
        items = expand_thin(items, neighbours, options.thin_chunk_tokens, options.decay)
    items = drop_restated(items, first=top.chunk_id)
    if options.mmr:
        items = mmr(items, options.mmr_lambda, limit, first=top.chunk_id)
    else:
        items = [c for c in items if c.chunk_id == top.chunk_id] + [c for c in items if c.chunk_id != top.chunk_id]
        if limit > 0:
            items = items[:limit]
    return apply_token_budget(items, options.token_budget)
