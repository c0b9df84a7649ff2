"""Output checks: citations attributed by lexical support, not trusted to the model.

Small models copy their context and rarely write `[n]`, so the service decides what an answer draws on:

1. The answer is split into sentences (at `.!?` followed by space, and at line breaks).
2. Each sentence becomes a set of *content words*: NFKC-lowercased letter/digit runs, minus English
   stop words and answer boilerplate ("answer", "source", "according"), minus one-letter tokens.
   No stemming: "policy" and "policies" differ, which errs towards "unsupported", the safe side.
   A sentence with fewer than `MIN_CONTENT_WORDS` content words ("Sure!", "The answer is:") is not
   content-bearing and is left out of the score.
3. support(sentence, source) = |content(sentence) ∩ words(source)| / |content(sentence)| — the share of the
   sentence's content words found in the source (title and section path included): ROUGE-1 recall of the
   sentence against the source, on word sets.
4. A sentence is supported when its best support ≥ the threshold; it is attributed to every source whose
   support is ≥ the threshold and within `TIE_MARGIN` of the best (so a sentence copied from one source
   is not also credited to another that merely shares a few words).
5. A citation is a source attributed at least one sentence; its support is the best support it gives.
6. Explicit `[n]` markers are validated: out of range → warning, dropped (also from the answer text);
   in range but the source does not support the sentence → warning, dropped; otherwise the source is cited.

grounding_score = supported content-bearing sentences / content-bearing sentences (0 when there are none).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

MIN_CONTENT_WORDS = 2
TIE_MARGIN = 0.1

_WORD = re.compile(r"[^\W_]+")
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

STOP_WORDS: frozenset[str] = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could couldn did didn do does doesn doing don down during each either else
etc every few for from further had hadn has hasn have haven having he her here hers herself him himself his
how however i if in into is isn it its itself just let ll may me might more most must mustn my myself no nor
not now of off on once only or other ought our ours ourselves out over own per re same shall shan she should
shouldn so some such than that the their theirs them themselves then there these they this those through thus
to too under until up upon us ve very via was wasn we were weren what when where which while who whom whose
why will with within without won would wouldn yes yet you your yours yourself yourselves
answer answers question questions source sources context document documents according based provided
information mentioned stated says said following given above below also therefore sure okay ok please
""".split())


def content_words(text: str) -> set[str]:
    """The normalised content words of `text` (see the module docstring)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).lower())
    return {w for w in words if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())}


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def markers(sentence: str) -> list[int]:
    """The source numbers a sentence cites: `[2]`, `[1, 3]`, `[1][2]`."""
    return [int(n) for group in _MARKER.findall(sentence) for n in group.split(",")]


@dataclass(frozen=True)
class SentenceCheck:
    text: str
    content_bearing: bool
    best_support: float
    supported: bool
    sources: tuple[int, ...]  # 0-based indexes of the sources it is attributed to


@dataclass(frozen=True)
class CitationScore:
    source_index: int  # 0-based
    support: float


@dataclass
class Attribution:
    answer: str  # the answer with out-of-range markers removed
    sentences: list[SentenceCheck]
    citations: list[CitationScore]
    grounding_score: float
    warnings: list[str] = field(default_factory=list)

    @property
    def content_sentences(self) -> int:
        return sum(1 for s in self.sentences if s.content_bearing)


def attribute(answer: str, sources: list[str], threshold: float) -> Attribution:
    """Attributes `answer` to `sources` (texts as shown to the model) and scores its grounding."""
    source_words = [content_words(s) for s in sources]
    warnings: list[str] = []
    cleaned = _drop_out_of_range(answer, len(sources), warnings)
    checks: list[SentenceCheck] = []
    best_by_source: dict[int, float] = {}
    bad_claims: set[int] = set()
    for sentence in split_sentences(cleaned):
        words = content_words(_MARKER.sub(" ", sentence))
        if len(words) < MIN_CONTENT_WORDS:
            checks.append(SentenceCheck(sentence, False, 0.0, False, ()))
            continue
        supports = [len(words & sw) / len(words) for sw in source_words]
        best = max(supports, default=0.0)
        chosen = {j for j, s in enumerate(supports) if s >= threshold and s >= best - TIE_MARGIN}
        for n in markers(sentence):
            j = n - 1
            if supports[j] >= threshold:
                chosen.add(j)
            else:
                bad_claims.add(n)
        for j in chosen:
            best_by_source[j] = max(best_by_source.get(j, 0.0), supports[j])
        checks.append(SentenceCheck(sentence, True, best, best >= threshold, tuple(sorted(chosen))))
    for n in sorted(bad_claims):
        warnings.append(f"the answer cites [{n}] for a statement that source {n} does not support; citation dropped")
    content = [c for c in checks if c.content_bearing]
    score = sum(c.supported for c in content) / len(content) if content else 0.0
    citations = sorted((CitationScore(j, round(s, 4)) for j, s in best_by_source.items()),
                       key=lambda c: (-c.support, c.source_index))
    return Attribution(cleaned, checks, citations, round(score, 4), warnings)


def _drop_out_of_range(answer: str, n_sources: int, warnings: list[str]) -> str:
    dropped: set[int] = set()

    def fix(match: re.Match[str]) -> str:
        numbers = [int(n) for n in match.group(1).split(",")]
        kept = [n for n in numbers if 1 <= n <= n_sources]
        dropped.update(n for n in numbers if not 1 <= n <= n_sources)
        return f"[{', '.join(map(str, kept))}]" if kept else ""

    cleaned = _MARKER.sub(fix, answer)
    for n in sorted(dropped):
        warnings.append(f"the answer cites [{n}] but there are only {n_sources} sources; citation dropped")
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", cleaned).strip() if dropped else cleaned
