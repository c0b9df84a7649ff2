"""Relevance grading of retrieved chunks, after Corrective RAG (CRAG, Yan et al. 2024): is there anything to
answer from, and which chunks are worth giving to the answerer?

Each chunk is graded from every signal the mesh has, none of which is trusted alone:
- **vector**: the raw cosine of the query and the chunk (absolute, comparable across questions);
- **lexical coverage**: the weighted share of the question's content terms found in the chunk (its text, title
  and section path). Raw BM25 is not used: it grows with the question's length and the corpus, and has no
  absolute scale. Terms are weighted by rarity: the gateway has no corpus document frequencies, so the
  prior is that a term of a named entity (a name, an acronym, a year or a quantity) is rare and counts
  `ENTITY_WEIGHT` times, any other content word once, stop words and question words not at all;
- **entities**: the question's named entities present in the chunk. A question that names something the chunk
  does not mention is about something else: a chunk is *anchored* when the question names nothing or the chunk
  contains at least one of its entities, and only an anchored chunk can be strong on the vector or lexical legs;
- **fused score**: relative to the candidate set (the top is always near 1, off-topic sets included), so it only
  confirms: a chunk at the top of the fusion whose two legs both pass their weak thresholds is strong;
- **reranker**: a cross-encoder score in [0, 1] when the reranker is configured; strong on its own, and below its
  weak threshold it vetoes the vector leg.

A chunk is *strong* (kept), *weak* (evidence of a near miss) or *none*. The set is `correct` when a chunk is
strong, `ambiguous` when only weak chunks exist, `incorrect` when nothing carries any signal. A chunk found by
a sub-query (multi-hop) is graded against the query that names its entity, so bridge passages are not judged
by the whole question. Thresholds come from `Thresholds` (env `GATEWAY_RELEVANCE_*`, see the README).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ragmesh.common.v1 import common_pb2
from ragmesh_common.text.entities import extract_entities
from ragmesh_common.text.stopwords import ENGLISH
from ragmesh_common.text.words import QUESTION_WORDS, stem, written_as_acronym

CORRECT, AMBIGUOUS, INCORRECT = "correct", "ambiguous", "incorrect"
STRONG, WEAK, NONE = "strong", "weak", "none"
ENTITY_WEIGHT = 2.0

# Stop words and the words that frame a question without saying what it is about (one list: ragmesh_common.text).
STOP_WORDS = ENGLISH | QUESTION_WORDS
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


@dataclass(frozen=True)
class Thresholds:
    """When a signal counts. The vector thresholds are cosines of the default embedder (all-MiniLM-L6-v2): about
    0.25 separates related from unrelated text and 0.45 is a close paraphrase; set them again for another model."""

    vector_strong: float = 0.45
    vector_weak: float = 0.25
    lexical_strong: float = 0.6  # share of the question's weighted content terms in the chunk
    lexical_weak: float = 0.34  # a third: one name of a two-term question is not enough
    rerank_strong: float = 0.5  # sigmoid-normalised cross-encoder score
    rerank_weak: float = 0.1
    hybrid_confirm: float = 0.5  # relative fused score that lets two weak legs confirm each other


@dataclass(frozen=True)
class GradedQuery:
    """A query a chunk may be graded against: its text and its named entities."""

    text: str
    entities: tuple[str, ...]

    @classmethod
    def of(cls, text: str, entities: list[str] | None = None) -> GradedQuery:
        return cls(text, tuple(extract_entities(text) if entities is None else entities))


@dataclass
class ChunkGrade:
    chunk_id: str
    strength: str
    coverage: float
    entities_found: int
    entities_total: int
    vector: float | None
    hybrid: float
    rerank: float | None
    reason: str


@dataclass
class Grade:
    grade: str
    reasons: list[str]
    kept: list[common_pb2.ScoredChunk]
    chunks: list[ChunkGrade] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        strong = sum(c.strength == STRONG for c in self.chunks)
        weak = sum(c.strength == WEAK for c in self.chunks)
        return {
            "grade": self.grade,
            "reasons": list(self.reasons),
            "kept": len(self.kept),
            "strong": strong,
            "weak": weak,
            "candidates": len(self.chunks),
        }


def terms(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text)}


def weighted_terms(query: GradedQuery) -> dict[str, float]:
    """The query's content terms (stemmed) and their weights."""
    entity_terms = {stem(w) for e in query.entities for w in _WORD.findall(e) if _content(w, query.text)}
    weights: dict[str, float] = {}
    for word in _WORD.findall(query.text):
        if not _content(word, query.text) or (len(word) < 2 and not word.isdigit()):
            continue
        term = stem(word)
        weights[term] = ENTITY_WEIGHT if term in entity_terms else 1.0
    for term in entity_terms:
        weights.setdefault(term, ENTITY_WEIGHT)
    return weights


@dataclass(frozen=True)
class ChunkTerms:
    """A chunk's stemmed terms, and those written as names (capitalised or numeric): a question's "Inception"
    is a name, and a chunk's "since its inception" is not a mention of it."""

    all: frozenset[str]
    names: frozenset[str]


def _content(word: str, text: str) -> bool:
    """Not a stop word, or one written as an acronym ("PAS", "US"; `written_as_acronym`)."""
    return word.lower() not in STOP_WORDS or written_as_acronym(word, text)


def _entity_present(entity: str, chunk: ChunkTerms) -> bool:
    words = [stem(w) for w in _WORD.findall(entity) if _content(w, entity)]
    return bool(words) and all(w in chunk.names for w in words)


# A hyphenated name: its later parts are written in lower case ("Rol-top", "Coca-cola"), yet are the name's.
_HYPHENATED_NAME = re.compile(r"\b[^\W\d_][^\W_]*(?:-[^\W_]+)+")


def _chunk_terms(item: common_pb2.ScoredChunk) -> ChunkTerms:
    chunk = item.chunk
    text = " ".join([chunk.text, chunk.title, *chunk.section_path])
    words = _WORD.findall(text)
    names = {stem(w) for w in words if w[:1].isupper() or w[:1].isdigit()}
    for match in _HYPHENATED_NAME.finditer(text):
        if match.group(0)[:1].isupper():
            names.update(stem(w) for w in _WORD.findall(match.group(0)))
    return ChunkTerms(frozenset(stem(w) for w in words), frozenset(names))


def grade_chunk(
    item: common_pb2.ScoredChunk, query: GradedQuery, chunk_terms: ChunkTerms, *, have_vector: bool, t: Thresholds
) -> ChunkGrade:
    weights = weighted_terms(query)
    total = sum(weights.values())
    # a term of a named entity counts only where the chunk writes it as a name
    coverage = (
        sum(w for term, w in weights.items() if term in (chunk_terms.names if w == ENTITY_WEIGHT else chunk_terms.all))
        / total
        if total
        else 0.0
    )
    found = sum(_entity_present(e, chunk_terms) for e in query.entities)
    anchored = not query.entities or found > 0
    vector = item.vector_score if have_vector else None
    rerank = item.rerank_score if item.reranked else None
    vector_strong = vector is not None and vector >= t.vector_strong and anchored
    vector_weak = vector is not None and vector >= t.vector_weak
    lexical_strong = coverage >= t.lexical_strong and anchored
    lexical_weak = coverage >= t.lexical_weak
    if rerank is not None and rerank < t.rerank_weak:
        vector_strong = False  # the cross-encoder read the pair and found nothing: the embedding alone is not enough
    if rerank is not None and rerank >= t.rerank_strong:
        strength, reason = STRONG, f"rerank {rerank:.2f}"
    elif lexical_strong:
        strength, reason = STRONG, f"terms {coverage:.2f}"
    elif vector_strong:
        strength, reason = STRONG, f"cosine {vector:.2f}"
    elif anchored and vector_weak and lexical_weak and item.hybrid_score >= t.hybrid_confirm:
        strength, reason = (
            STRONG,
            f"both legs (cosine {vector:.2f}, terms {coverage:.2f}, fused {item.hybrid_score:.2f})",
        )
    elif vector_weak or lexical_weak or found or (rerank is not None and rerank >= t.rerank_weak):
        strength, reason = WEAK, "below the strong thresholds" if anchored else "names none of the question's entities"
    else:
        strength, reason = NONE, "no signal"
    return ChunkGrade(
        item.chunk.chunk_id,
        strength,
        round(coverage, 3),
        found,
        len(query.entities),
        None if vector is None else round(vector, 3),
        round(item.hybrid_score, 3),
        None if rerank is None else round(rerank, 3),
        reason,
    )


_ORDER = {STRONG: 2, WEAK: 1, NONE: 0}


def grade(
    items: list[common_pb2.ScoredChunk], queries: list[GradedQuery], *, have_vector: bool, thresholds: Thresholds
) -> Grade:
    """Grade a candidate set against the question (queries[0]) and its sub-queries; keep the strong chunks."""
    graded: list[ChunkGrade] = []
    for item in items:
        chunk_terms = _chunk_terms(item)
        best = max(
            (grade_chunk(item, q, chunk_terms, have_vector=have_vector, t=thresholds) for q in queries),
            key=lambda g: (_ORDER[g.strength], g.coverage),
        )
        graded.append(best)
    kept = [item for item, g in zip(items, graded, strict=True) if g.strength == STRONG]
    strong = [g for g in graded if g.strength == STRONG]
    weak = [g for g in graded if g.strength == WEAK]
    entities = [e for q in queries[:1] for e in q.entities]
    reasons: list[str] = []
    if not items:
        reasons.append("no candidates")
    if strong:
        level = CORRECT
        reasons.append(f"{len(strong)} of {len(items)} chunks strong (best: {strong[0].reason})")
    elif weak:
        level = AMBIGUOUS
        reasons.append(f"no strong chunk; {len(weak)} of {len(items)} weak")
    else:
        level = INCORRECT
        if items:
            reasons.append(f"none of {len(items)} chunks carries a signal")
    if entities and items and not any(g.entities_found for g in graded):
        reasons.append(f"no chunk names {', '.join(entities[:4])}")
    if not have_vector:
        reasons.append("lexical signals only (no query vector)")
    return Grade(level, reasons, kept, graded)


def keyword_query(query: GradedQuery) -> str:
    """The corrective rewrite: the question reduced to its entities and content words (what BM25 matches)."""
    words = [w for w in _WORD.findall(query.text) if w.lower() not in STOP_WORDS]
    return " ".join(dict.fromkeys([*query.entities, *words])) or query.text
