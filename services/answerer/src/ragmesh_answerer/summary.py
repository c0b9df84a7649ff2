"""summary: the answer to a question about a collection or a topic as a whole.

"Summarise what we know about IBM", "What are the main themes in my documents?", "Give me an overview of the
travel policy": the gateway's router marks these (a collection question, answered from community reports, or an
overview searched summaries first) and sends `AnswerRequest.summary`. No span answers such a question, so the
extractive short answer and its checks (answer type, on-question) do not apply; before this, every such question
was withheld as "no passage ties an answer of the asked type to the question".

The answer is the sources' own sentences. Those that name the question's topic (its key terms without the words that
only ask for a summary: "summarise", "themes", "documents"; every sentence when the question names no topic) are
ranked by how much of the topic they name (names and acronyms 2, other terms 1, as evidence selection scores; one
more when the topic opens the sentence, `SUBJECT_BONUS`: it is about the topic, not a mention of it), then
the other sentences of sources (with their headings) that name it (`IN_TOPIC_SOURCE`: "the disease" in a text on the
Black Death), then by the caller's order of sources and their place in the source; a source that never names the
topic gives nothing. At most `PER_SOURCE` are taken from one source and `SENTENCES` in all, never a heading, a table
row, a fragment (fewer than `MIN_WORDS` words, or opening in lower case), code (`_prose`), a quotation standing
alone (a cited work's title in a reference list), a sentence that opens with a pronoun (out
of its context "It was renamed in 1924" says nothing), nor one that mostly repeats a sentence already taken
(`REPEAT_OVERLAP` of its words); a document's own reference markers ending a sentence ("[16]"), and an editor's
note opening it ("[citation needed]", left there by the sentence split), are left out of its quote. They are shown in source order, each with its source marker, and verified as any answer sentence is
(attribution and stated tokens, `verify(..., summary=True)`); a sentence that fails is left out. No sentence about
the topic: None, and the caller shows what the documents say, unverified. The model is not asked: SmolLM2-135M
condensing a dozen sentences adds errors, not meaning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import re2

from ragmesh_answerer.evidence import EvidenceQuote, is_heading, score_sentence
from ragmesh_answerer.prompting import Source
from ragmesh_answerer.verify import Verification, verify
from ragmesh_common.text.questions import Question
from ragmesh_common.text.sentences import PRONOUN_START, sentence_spans
from ragmesh_common.text.words import stem, words

# a document's own reference markers ending a sentence (RE2: linear on a long run of spaces)
_REFERENCES = re2.compile(r"(?:\s*\[\d{1,4}\])+$")
# an editor's note left at a sentence's start by the split ("[citation needed] The duck is also …")
_LEADING_NOTE = re2.compile(r"^(?:\[[^\]\n]{1,30}\]\s*)+")
# a sentence that is all a quotation: a cited work's title in a reference list ("\"Don't feed the ducks bread\".")
_QUOTED = re2.compile(r"^[\"“][^\"”]+[\"”][.,]?$")

_LOWER_WORD = re.compile(r"[^\W\d_A-Z]{2,}(?:['’-][^\W\d_]+)*")  # a word in lower case ("don't", "well-known")
_CODE = re.compile(r"[={}<>]")  # an assignment, a comparison, a block: code ("WHERE id = 1")
_LOOSE_STOP = re.compile(r"\s\.$")  # a full stop after a space: tokens of code ("… THEN C .")
MIN_PROSE_WORDS = 3
MIN_PROSE_SHARE = 0.3

SENTENCES = 6
# a sentence whose opening words name the topic is about it ("Ducks are mostly aquatic birds"), not one that
# mentions it ("The 1992 Disney film The Mighty Ducks … chose the duck as the mascot")
SUBJECT_BONUS = 1.0
OPENING_WORDS = 3
IN_TOPIC_SOURCE = 0.5  # the score of a sentence that does not name the topic in a source that does
PER_SOURCE = 2
MIN_WORDS = 5
REPEAT_OVERLAP = 0.6


@dataclass(frozen=True)
class Summary:
    sentences: list[EvidenceQuote]  # in the order shown; each an exact slice of its source's text
    verification: Verification

    @property
    def shown(self) -> list[str]:
        """Each sentence as the user reads it: with its source's marker (1-based)."""
        return [f"{q.text} [{q.source_index + 1}]" for q in self.sentences]

    @property
    def text(self) -> str:
        return " ".join(self.shown)


def summarise(question: str, sources: Sequence[Source], threshold: float) -> Summary | None:
    """The verified sentences that best summarise the sources about the question's topic (module docstring)."""
    about = Question.parse(question).topic()
    named = about.key_terms() > 0
    topic = about.key_stems()
    candidates: list[tuple[float, int, int, EvidenceQuote]] = []
    for i, source in enumerate(sources):
        # a source about the topic lends its other sentences a little of it ("the plague" in a text on the Black Death)
        lent = IN_TOPIC_SOURCE if named and about.about(f"{source.heading_text}\n{source.text}") else 0.0
        for k, (s, e) in enumerate(sentence_spans(source.text)):
            text = _REFERENCES.sub("", source.text[s:e].strip())  # "… six Turing Awards.[16]": not our [n]
            text = _LEADING_NOTE.sub("", text)
            if (
                is_heading(text)
                or _QUOTED.match(text)
                or text.startswith("|")
                or text[:1].islower()  # a fragment a split left ("operations expanded to Europe.")
                or len(words(text)) < MIN_WORDS
                or not _prose(text)
                or PRONOUN_START.match(text)
            ):
                continue
            score = (score_sentence(about, text) or lent) if named else 1.0
            if score <= 0:
                continue
            if named and {stem(w) for w in words(text)[:OPENING_WORDS]} & topic:
                score += SUBJECT_BONUS
            start = s + source.text[s:e].index(text)
            quote = EvidenceQuote(i, source.chunk_id, text, start, start + len(text), source.heading_text, score)
            candidates.append((-score, i, k, quote))
    candidates.sort(key=lambda c: c[:3])
    chosen: list[EvidenceQuote] = []
    taken: dict[int, int] = {}
    for _, i, _, quote in candidates:
        if len(chosen) >= SENTENCES:
            break
        if taken.get(i, 0) >= PER_SOURCE or any(_repeats(quote.text, q.text) for q in chosen):
            continue
        chosen.append(quote)
        taken[i] = taken.get(i, 0) + 1
    chosen.sort(key=lambda q: (q.source_index, q.start))
    kept: list[EvidenceQuote] = []
    for quote in chosen:  # each sentence checked against its own quote, as the gate checks a model's sentence
        checked = verify(question, f"{quote.text} [1]", [quote.as_quote()], threshold, summary=True)
        if checked.verified:
            kept.append(quote)
    if not kept:
        return None
    answer = " ".join(f"{q.text} [{n}]" for n, q in enumerate(kept, 1))
    return Summary(kept, verify(question, answer, [q.as_quote() for q in kept], threshold, summary=True))


def _prose(text: str) -> bool:
    """A sentence, not code or a list of identifiers ("CUSTOMER_TAX_ID WHEN QSYS2 ."): no `=`, `<`, `>` or braces,
    no full stop after a space, at least `MIN_PROSE_WORDS` words in lower case, and at least `MIN_PROSE_SHARE` of
    its tokens (a German sentence capitalises its nouns)."""
    if _CODE.search(text) or _LOOSE_STOP.search(text):
        return False
    tokens = text.split()
    lower = [t for t in tokens if _LOWER_WORD.fullmatch(t.strip(".,;:!?()\"'’”“"))]
    return len(lower) >= MIN_PROSE_WORDS and len(lower) >= MIN_PROSE_SHARE * len(tokens)


def _repeats(text: str, other: str) -> bool:
    mine, theirs = set(words(text)), set(words(other))
    return bool(mine) and len(mine & theirs) >= REPEAT_OVERLAP * min(len(mine), len(theirs))
