"""Verification that can fail: every answer sentence is checked against the evidence it rests on.

The model is prompted with numbered quotes (`evidence.py`); a small model confuses dates, swaps names
and answers a neighbouring question, so nothing it writes is trusted:

1. **Attribution.** Each sentence of the draft is attributed to the quotes that support its content words
   (stems, stop words and numbers left out): support = share of the sentence's content stems found in the
   quote with its source heading; quotes at or above the threshold and within `TIE_MARGIN` of the best are
   its evidence, plus a quote it cites as `[n]` when that quote passes the threshold too. A sentence with
   fewer than two content words but a number or name ("1911.", "Maria Keller.") rests on the quotes that
   state the most of those tokens.
2. **Stated tokens.** Every number, year, date part, amount and percentage the sentence states
   (`1,000` = `1000`, `$5 million` = `5m` = `5,000,000`, `15%` = `15 percent`) and every name (capitalised
   word not at the sentence start, or a multi-word / all-caps name at the start) must occur in its
   evidence. One missing → the sentence is unsupported, and the reason names the token.
3. **The short answer** (the first checkable sentence) must add something to the question (not restate
   it, not be a question itself); it must rest on a quote that is about the question: the quote with its
   heading contains at least half of the question's names and at least one in three of its other key terms
   (an acronym also matches the words it abbreviates: CEO = chief executive officer); what it adds to the
   question (its numbers and names, or without those the threshold share of its other content words) must
   be stated in such a quote, not only in a neighbouring one; and it must be of the asked type: a when-question needs a
   date or number, a how-many/how-much question a number, a who-question a name that is not just the
   question's own.

4. **Nothing added.** A sentence may restate the question and its evidence in other words, but the content words
   that neither its evidence (with heading) nor the question says are at most `MAX_ADDED_SHARE` of its content
   words (at least one always allowed): "HTML stands for HyperText Markup Language, which is a markup language
   used to create web pages" passed on "HTML: HyperText Markup Language - used for structuring web content" with
   "create" and "pages" the evidence never says (found using the product). Such a first sentence is replaced by
   the evidence sentence (the answer stays verified by extraction); a later one is not shown.

`verified` only when the draft has a checkable sentence and every checkable sentence passes.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ragmesh_answerer.grounding import clean_sentence, markers
from ragmesh_common.text.names import capitalised, name_supported, names
from ragmesh_common.text.numbers import NumberToken, names_month, number_supported, numbers, strip_numbers
from ragmesh_common.text.questions import AnswerType, Question
from ragmesh_common.text.sentences import PRONOUN_START, sentence_spans
from ragmesh_common.text.words import content_stems, stem, words

__all__ = ["AnswerType", "Question", "Quote", "Verdict", "names", "numbers", "type_problem", "verify"]

TIE_MARGIN = 0.1
MIN_CONTENT_WORDS = 2
MAX_ADDED_SHARE = 0.2  # of a sentence's content words, those neither its evidence nor the question says (rule 4)


class Verdict(enum.Enum):
    SUPPORTED = "supported"
    NOT_CHECKABLE = "not_checkable"
    LOW_SUPPORT = "low_support"
    MISSING_TOKEN = "missing_token"
    OFF_QUESTION = "off_question"
    WRONG_ANSWER_TYPE = "wrong_answer_type"
    RESTATES_QUESTION = "restates_question"


def type_problem(answer_type: AnswerType, sentence: str, question: Question) -> str | None:
    """Why `sentence` is not an answer of the asked type, or None."""
    if answer_type is AnswerType.DATE:
        if not numbers(sentence, number_words=False) and not names_month(sentence):
            return "the question asks when, but the answer states no date or year"
    elif answer_type is AnswerType.NUMBER:
        if not numbers(sentence):
            return "the question asks how many or how much, but the answer states no number"
    elif answer_type is AnswerType.PERSON:
        own = {*question.entities, *(a.lower() for a in question.acronyms)}
        if not [n for n in capitalised(sentence) if n.lower() not in own]:
            return "the question asks who, but the answer names no one"
    return None


# ------------------------------------------------------------------------------------------ the checks


@dataclass(frozen=True)
class Quote:
    """One evidence quote as verification sees it: its text and the heading of its source."""

    source_index: int
    text: str
    heading: str = ""

    @property
    def context(self) -> str:
        return f"{self.heading}\n{self.text}" if self.heading else self.text


@dataclass
class SentenceVerdict:
    text: str
    checkable: bool
    supported: bool
    verdict: Verdict
    support: float = 0.0
    evidence: tuple[int, ...] = ()  # indexes into the quotes (sentence units while checking)
    sources: tuple[int, ...] = ()  # source indexes of those quotes
    unsupported_tokens: list[str] = field(default_factory=list)
    reason: str = ""
    short_answer: bool = False


@dataclass
class Verification:
    sentences: list[SentenceVerdict]
    short_answer: str
    verified: bool
    supported: int
    checkable: int
    warnings: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return round(self.supported / self.checkable, 4) if self.checkable else 0.0

    @property
    def nothing_supported(self) -> bool:
        return self.supported == 0


def split_sentences(text: str) -> list[str]:
    """The answer's sentences (the evidence side's splitter); a trailing `[1]` stays with its sentence."""
    sentences: list[str] = []
    for s, e in sentence_spans(text):
        piece = text[s:e]
        if sentences and not words(piece) and not re.search(r"\d", re.sub(r"\[[\d,\s]+\]", "", piece)):
            sentences[-1] += " " + piece
        else:
            sentences.append(piece)
    return sentences


def _units(quotes: Sequence[Quote]) -> list[Quote]:
    """Each quote's sentences as separate units (so a number in one sentence cannot back a claim that
    another sentence supports), with the heading; a sentence that opens with a pronoun gets its
    predecessor's names (what "it" is), not its numbers or words. `source_index` = the quote's index."""
    units: list[Quote] = []
    for j, quote in enumerate(quotes):
        sentences = [quote.text[s:e] for s, e in sentence_spans(quote.text)] or [quote.text]
        for k, sentence in enumerate(sentences):
            text = sentence
            if k > 0 and PRONOUN_START.match(sentence):
                text = " ".join(dict.fromkeys(names(sentences[k - 1]))) + " " + sentence
            units.append(Quote(j, text, quote.heading))
    return units


def verify(
    question: str, answer: str, quotes: Sequence[Quote], threshold: float, *, summary: bool = False
) -> Verification:
    """Checks every sentence of `answer` against `quotes` (see the module docstring). A `summary` (the answer to
    a question about a collection or a topic as a whole, `summary.py`) has no short answer: every sentence is
    checked for attribution and stated tokens only."""
    q = Question.parse(question)
    units = _units(quotes)
    contexts = [unit.context for unit in units]
    unit_stems = [content_stems(c) for c in contexts]
    unit_words = [set(words(c)) for c in contexts]
    unit_numbers = [numbers(c) for c in contexts]
    verdicts: list[SentenceVerdict] = []
    for sentence in split_sentences(answer):
        verdict = _check_sentence(sentence, units, unit_stems, unit_words, unit_numbers, threshold, q)
        verdicts.append(verdict)
    checkable = [v for v in verdicts if v.checkable]
    short = checkable[0] if checkable and not summary else None
    if short is not None:
        short.short_answer = True
        if short.supported:
            _check_short_answer(short, q, units, threshold)
    for verdict in verdicts:  # unit indexes -> quote indexes
        verdict.evidence = tuple(sorted({units[u].source_index for u in verdict.evidence}))
        verdict.sources = tuple(sorted({quotes[j].source_index for j in verdict.evidence}))
    supported = sum(v.supported for v in checkable)
    warnings = [f'not supported by the evidence: "{_clip(v.text)}" ({v.reason})' for v in checkable if not v.supported]
    return Verification(
        sentences=verdicts,
        short_answer=clean_sentence(short.text) if short else "",
        verified=bool(checkable) and supported == len(checkable),
        supported=supported,
        checkable=len(checkable),
        warnings=warnings,
    )


def exact_quotes(verification: Verification, quotes: Sequence[Quote]) -> Verification:
    """`verification` with each sentence too short to check ("- Design [2]") that is, bullet aside, exactly one
    of the quotes (an item sliced from its source) counted as supported by that quote."""
    texts = {q.text.strip(): j for j, q in enumerate(quotes)}
    for v in verification.sentences:
        j = texts.get(clean_sentence(v.text).removeprefix("- ").strip())
        if v.verdict is Verdict.NOT_CHECKABLE and j is not None:
            v.checkable = v.supported = True
            v.verdict, v.support, v.reason = Verdict.SUPPORTED, 1.0, "the quote itself"
            v.evidence, v.sources = (j,), (quotes[j].source_index,)
    checkable = [v for v in verification.sentences if v.checkable]
    verification.checkable = len(checkable)
    verification.supported = sum(v.supported for v in checkable)
    verification.verified = bool(checkable) and verification.supported == len(checkable)
    return verification


def _check_sentence(
    sentence: str,
    quotes: Sequence[Quote],
    quote_stems: list[set[str]],
    quote_words: list[set[str]],
    quote_numbers: list[list[NumberToken]],
    threshold: float,
    question: Question | None = None,
) -> SentenceVerdict:
    body = clean_sentence(sentence)
    content = content_stems(body)
    stated_numbers = numbers(body, include_one=False)
    stated_names = list(dict.fromkeys(names(body)))
    if len(content) < MIN_CONTENT_WORDS and not stated_numbers and not stated_names:
        return SentenceVerdict(sentence.strip(), False, False, Verdict.NOT_CHECKABLE)
    if not quotes:
        return SentenceVerdict(sentence.strip(), True, False, Verdict.LOW_SUPPORT, reason="there is no evidence")

    def missing_in(indexes: Iterable[int]) -> list[str]:
        ev_numbers = [n for j in indexes for n in quote_numbers[j]]
        ev_words = {w for j in indexes for w in quote_words[j]}
        ev_text = "\n".join(quotes[j].context for j in indexes)
        return [n.text for n in stated_numbers if not number_supported(n, ev_numbers)] + [
            name for name in stated_names if not name_supported(name, ev_words, ev_text)
        ]

    if len(content) >= MIN_CONTENT_WORDS:
        supports = [len(content & qs) / len(content) for qs in quote_stems]
        best = max(supports)
        chosen = {j for j, s in enumerate(supports) if s >= threshold and s >= best - TIE_MARGIN}
        cited = set(markers(sentence))  # [n] = the n-th quote; `quotes` here are its sentence units
        chosen |= {u for u, unit in enumerate(quotes) if unit.source_index + 1 in cited and supports[u] >= threshold}
        if not chosen:
            absent = missing_in(range(len(quotes)))
            return SentenceVerdict(
                sentence.strip(),
                True,
                False,
                Verdict.LOW_SUPPORT,
                support=round(best, 4),
                unsupported_tokens=absent,
                reason=f"only {best:.0%} of its words are in the evidence"
                + (
                    "; it states " + ", ".join(f"'{t}'" for t in absent) + ", which the evidence does not"
                    if absent
                    else ""
                ),
            )
    else:
        # Too few words to attribute by: it rests on the quotes that state the most of its numbers and names.
        missing_by_quote = [len(missing_in([j])) for j in range(len(quotes))]
        fewest = min(missing_by_quote)
        tokens = len(stated_numbers) + len(stated_names)
        chosen = {j for j, m in enumerate(missing_by_quote) if m == fewest} if fewest < tokens else set()
        best = 1.0 - fewest / tokens
    evidence = tuple(sorted(chosen))
    sources: tuple[int, ...] = ()  # filled in by `verify`, which knows the quotes
    missing = missing_in(evidence) if evidence else [n.text for n in stated_numbers] + stated_names
    verdict, unsupported, why = Verdict.MISSING_TOKEN, missing, "the evidence does not state "
    if not missing:
        unsupported = _added_words(body, content, [quote_stems[j] for j in evidence], question)
        verdict, why = Verdict.LOW_SUPPORT, "it adds what the evidence does not say: "
    if unsupported:
        return SentenceVerdict(
            sentence.strip(),
            True,
            False,
            verdict,
            support=round(best, 4),
            evidence=evidence,
            sources=sources,
            unsupported_tokens=unsupported,
            reason=why + ", ".join(f"'{t}'" for t in unsupported),
        )
    return SentenceVerdict(
        sentence.strip(), True, True, Verdict.SUPPORTED, support=round(best, 4), evidence=evidence, sources=sources
    )


def _added_words(body: str, content: set[str], evidence: list[set[str]], question: Question | None) -> list[str]:
    """The words of a sentence whose stems neither its evidence nor the question says, when they are more than
    `MAX_ADDED_SHARE` of its content words (at least one allowed: a paraphrase's verb); [] otherwise (rule 4)."""
    said = set().union(*evidence, content_stems(question.text) if question is not None else set())
    added = content - said
    if len(added) <= max(1, int(MAX_ADDED_SHARE * len(content))):
        return []
    return list(dict.fromkeys(w for w in words(strip_numbers(body)) if stem(w) in added))


def _check_short_answer(verdict: SentenceVerdict, q: Question, units: Sequence[Quote], threshold: float) -> None:
    body = clean_sentence(verdict.text)
    added_stems, added_numbers, added_names = _added(body, q)
    if body.rstrip().endswith("?") or not (added_stems or added_numbers or added_names):
        verdict.supported, verdict.verdict = False, Verdict.RESTATES_QUESTION
        verdict.reason = "it only restates the question: it adds nothing that answers it"
        return
    about = list(verdict.evidence)
    if q.key_terms():
        gaps = [q.missing_key_terms(units[u].context) for u in verdict.evidence]
        about = [u for u, gap in zip(verdict.evidence, gaps, strict=True) if not gap]
        if not about:
            missing = min(gaps, key=len)
            verdict.supported, verdict.verdict = False, Verdict.OFF_QUESTION
            verdict.unsupported_tokens = missing
            verdict.reason = "the evidence it rests on is not about the question: it does not mention " + ", ".join(
                f"'{t}'" for t in missing
            )
            return
    # What the answer adds to the question must come from a passage about the question: a true statement from
    # a neighbouring sentence ("the report was written by Tom Baker") is not the answer to "who is the CEO?".
    if not any(_holds(units[u].context, added_stems, added_numbers, added_names, threshold) for u in about):
        added = [n.text for n in added_numbers] + added_names
        verdict.supported, verdict.verdict = False, Verdict.OFF_QUESTION
        verdict.unsupported_tokens = added
        verdict.reason = "what it adds to the question is not stated where the evidence is about the question" + (
            ": " + ", ".join(f"'{t}'" for t in added) if added else ""
        )
        return
    # When some evidence sentence names every key term of the question ("IBM was founded in 1911" for "When was
    # IBM founded?"), that is where the answer is stated; an answer that holds only in a sentence matching fewer
    # of them ("IBM debuted in the microcomputer market in 1981") answers another question about the same thing.
    best = [u for u in range(len(units)) if _covers_all(q, units[u].context)]
    added = [n.text for n in added_numbers] + added_names
    if best and added and not any(_holds(units[u].context, set(), added_numbers, added_names, threshold) for u in best):
        verdict.supported, verdict.verdict = False, Verdict.OFF_QUESTION
        verdict.unsupported_tokens = added
        verdict.reason = (
            "the evidence that matches the whole question does not state "
            + ", ".join(f"'{t}'" for t in added)
            + f' (it says: "{_clip(units[best[0]].text)}")'
        )
        return
    problem = type_problem(q.answer_type, body, q)
    if problem:
        verdict.supported, verdict.verdict, verdict.reason = False, Verdict.WRONG_ANSWER_TYPE, problem


def _covers_all(q: Question, context: str) -> bool:
    """`context` names every key term of the question (entities, acronyms and focus terms), and there are at
    least two of them (with one, any mention is a full match and says nothing about which fact is asked)."""
    if q.key_terms() < 2:
        return False
    entities, acronyms, focus = q.coverage(context)
    return len(entities) + len(acronyms) + len(focus) == q.key_terms()


def _added(body: str, q: Question) -> tuple[set[str], list[NumberToken], list[str]]:
    """What a sentence states beyond the question: content stems, numbers and names not in the question."""
    question_words = set(words(q.text))
    question_numbers = numbers(q.text)
    added_stems = content_stems(body) - content_stems(q.text)
    added_numbers = [n for n in numbers(body, include_one=False) if not number_supported(n, question_numbers)]
    added_names = [n for n in dict.fromkeys(names(body)) if not name_supported(n, question_words, q.text)]
    return added_stems, added_numbers, added_names


def _holds(
    context: str,
    added_stems: set[str],
    added_numbers: Sequence[NumberToken],
    added_names: Sequence[str],
    threshold: float,
) -> bool:
    """`context` states what the answer adds: its numbers and names when it adds any (those carry the answer; the
    words around them may paraphrase), else at least `threshold` of its added content words."""
    if (
        not added_numbers
        and not added_names
        and added_stems
        and len(added_stems & content_stems(context)) < threshold * len(added_stems)
    ):
        return False
    context_words = set(words(context))
    return all(number_supported(n, numbers(context)) for n in added_numbers) and all(
        name_supported(n, context_words, context) for n in added_names
    )


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
