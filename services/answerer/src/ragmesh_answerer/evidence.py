"""Evidence first: the few source sentences that best support answering the question.

Before generation the sources are cut into sentences (with their character offsets, so every quote is
an exact substring of its source's text) and each sentence is scored by the question's key terms it
contains: a name of the question counts 2, an acronym (or the words it abbreviates) 2, any other key
term 1 (compared by stem); a sentence of the asked type (a number for how-many, a year for when) gets
+0.5. Headings and other short lines without a verb-like shape (no end punctuation, ≤ 8 words, no digit)
are skipped: a small model copies them instead of answering.

The best `max_quotes` sentences scoring at least half the best score are kept, higher-ranked sources
first on ties. A sentence that opens with a pronoun ("It was founded in 1911.") takes its preceding
sentence along in the same quote, so the quote says what "it" is, and is scored together with it.
Other sentences stay separate quotes even when adjacent: verification checks a claim against the quote that
supports it, and "founded in 1911. Renamed in 1924." as one quote would let "founded in 1924" pass.
A sentence said already by a better-ranked source (a copy of the document in another format) is not quoted
again. Quotes are numbered in the prompt in order of score.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragmesh_answerer.prompting import Source
from ragmesh_answerer.verify import Quote
from ragmesh_common.text.numbers import numbers
from ragmesh_common.text.questions import AnswerType, Question
from ragmesh_common.text.sentences import PRONOUN_START, sentence_spans
from ragmesh_common.text.words import normalise, stem, words

MAX_QUOTE_CHARS = 400
MIN_RELATIVE_SCORE = 0.5
TYPE_BONUS = 0.5

_HEADING = re.compile(r"^\s*(?:#{1,6}\s|[-*•]\s*$)")


@dataclass(frozen=True)
class EvidenceQuote:
    source_index: int  # 0-based index into the request's sources
    chunk_id: str
    text: str  # == sources[source_index].text[start:end]
    start: int
    end: int
    heading: str = ""
    score: float = 0.0

    def as_quote(self) -> Quote:
        return Quote(self.source_index, self.text, self.heading)


def is_heading(sentence: str) -> bool:
    stripped = sentence.strip()
    if _HEADING.match(stripped):
        return True
    return not re.search(r"[.!?:;]\W*$", stripped) and len(stripped.split()) <= 8 and not re.search(r"\d", stripped)


def score_sentence(question: Question, sentence: str) -> float:
    entities, acronyms, focus = question.coverage(sentence)
    score = 2.0 * len(entities) + 2.0 * len(acronyms) + 1.0 * len(focus)
    if score and question.answer_type in (AnswerType.DATE, AnswerType.NUMBER) and numbers(sentence):
        score += TYPE_BONUS
    return score


def _clip(text: str, start: int, end: int, question: Question) -> tuple[int, int]:
    """Narrows [start, end) to at most MAX_QUOTE_CHARS around the first key term, at word boundaries."""
    if end - start <= MAX_QUOTE_CHARS:
        return start, end
    keys = {*question.entities, *(a.lower() for a in question.acronyms)}
    key_stems = {stem(f) for f in question.focus}
    anchor = start
    for m in re.finditer(r"[^\W_]+", text[start:end]):
        word = normalise(m.group(0)).lower()
        if word in keys or stem(word) in key_stems:
            anchor = start + m.start()
            break
    lo = max(start, anchor - MAX_QUOTE_CHARS // 3)
    hi = min(end, lo + MAX_QUOTE_CHARS)
    while lo > start and not text[lo - 1].isspace():
        lo += 1
    while hi < end and not text[hi].isspace():
        hi -= 1
    return lo, hi


def _distinct(
    candidates: Sequence[tuple[float, int, int, int, int]], sources: Sequence[Source]
) -> list[tuple[float, int, int, int, int]]:
    """The candidates without a sentence said already (the same text, case and spacing aside) by a better-ranked
    one: a copy of a document in another format, or a section's chunk and its document's, would otherwise fill the
    quotes (and "what the documents say") with one sentence twice."""
    seen: set[str] = set()
    kept = []
    for candidate in candidates:
        _, i, _, s, e = candidate
        key = " ".join(normalise(sources[i].text[s:e]).casefold().split())  # numbers too: 2019's ≠ 2020's
        if key not in seen:
            seen.add(key)
            kept.append(candidate)
    return kept


def select_evidence(
    question: str, sources: Sequence[Source], max_quotes: int, max_chars: int = 2000
) -> list[EvidenceQuote]:
    """The quotes to prompt with, best first, within `max_chars` together (the first always); when no
    sentence shares a key term with the question, the opening sentences of the top-ranked source."""
    q = Question.parse(question)
    candidates: list[tuple[float, int, int, int, int]] = []  # (-score, source, order, start, end)
    spans_by_source: list[list[tuple[int, int]]] = []
    for i, source in enumerate(sources):
        spans = sentence_spans(source.text)
        spans_by_source.append(spans)
        for k, (s, e) in enumerate(spans):
            sentence = source.text[s:e]
            if is_heading(sentence) or not words(sentence):
                continue
            scored = sentence
            if k > 0 and PRONOUN_START.match(sentence):  # "Its headquarters…" is about the previous subject
                scored = source.text[spans[k - 1][0] : e]
            score = score_sentence(q, scored)
            if score > 0:
                candidates.append((-score, i, k, s, e))
    if not candidates:
        return _opening(sources, spans_by_source, q)
    candidates.sort()
    best = -candidates[0][0]
    chosen = [c for c in _distinct(candidates, sources) if -c[0] >= best * MIN_RELATIVE_SCORE][:max_quotes]
    # Each chosen sentence is its own quote (a date from the next sentence must not back a claim about this
    # one); a sentence opening with a pronoun is quoted with its predecessor, and overlapping quotes merge.
    groups: list[tuple[int, int, int, float]] = []  # (source, first sentence, last sentence, score)
    for neg, i, k, s, e in chosen:
        first = k - 1 if k > 0 and PRONOUN_START.match(sources[i].text[s:e]) else k
        groups.append((i, first, k, -neg))
    groups.sort()
    merged: list[list[float]] = []
    for i, first, last, score in groups:
        if merged and merged[-1][0] == i and first <= merged[-1][2]:
            merged[-1][2] = max(merged[-1][2], last)
            merged[-1][3] = max(merged[-1][3], score)
        else:
            merged.append([i, first, last, score])
    quotes: list[EvidenceQuote] = []
    for i_f, first_f, last_f, score in merged:
        i, first, last = int(i_f), int(first_f), int(last_f)
        last = _announced(sources[i].text, spans_by_source[i], last)
        start, end = _clip(sources[i].text, spans_by_source[i][first][0], spans_by_source[i][last][1], q)
        quotes.append(
            EvidenceQuote(
                i, sources[i].chunk_id, sources[i].text[start:end], start, end, sources[i].heading_text, score
            )
        )
    quotes.sort(key=lambda quote: (-quote.score, quote.source_index, quote.start))
    kept: list[EvidenceQuote] = []
    used = 0
    for quote in quotes:
        if kept and used + len(quote.text) > max_chars:
            break
        kept.append(quote)
        used += len(quote.text)
    return kept


LIST_LINES = 6  # the most lines a sentence that ends with a colon brings into its quote
_LIST_LINE_WORDS = 12


def _announced(text: str, spans: list[tuple[int, int]], last: int) -> int:
    """A quote that ends with a colon ("Also, don't forget:") goes on with the short lines it announces (a list's
    items, up to LIST_LINES): without them it says nothing. The last sentence's index in `spans`."""
    if not text[spans[last][0] : spans[last][1]].rstrip().endswith(":"):
        return last
    end = last
    while end + 1 < len(spans) and end - last < LIST_LINES:
        line = text[spans[end + 1][0] : spans[end + 1][1]]
        if len(line.split()) > _LIST_LINE_WORDS or line.rstrip().endswith(":"):
            break
        end += 1
    return end


def _opening(
    sources: Sequence[Source], spans_by_source: list[list[tuple[int, int]]], q: Question
) -> list[EvidenceQuote]:
    """Nothing shares a key term: the first two sentences of the top-ranked source, so the model still has
    something to say; verification then finds whether it answers the question (usually not)."""
    for i, source in enumerate(sources):
        every = spans_by_source[i]
        # a text of short lines only ("Some text") is what the document says all the same
        spans = [(s, e) for s, e in every if not is_heading(source.text[s:e])][:2] or every[:2]
        if spans:
            start, end = _clip(source.text, spans[0][0], spans[-1][1], q)
            return [EvidenceQuote(i, source.chunk_id, source.text[start:end], start, end, source.heading_text)]
    return []
