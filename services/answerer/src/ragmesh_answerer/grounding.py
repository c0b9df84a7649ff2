"""Word-level helpers of the output checks (`verify.py`): content words, sentences, `[n]` markers.

Content words: NFKC-lowercased letter/digit runs, minus English stop words and answer boilerplate
("answer", "source", "according"), minus one-letter tokens. `[n]` markers beyond the quotes the model was
shown are removed from the answer with a warning (`drop_out_of_range`).
"""
from __future__ import annotations

import re
import unicodedata

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


def drop_out_of_range(answer: str, n_sources: int, warnings: list[str]) -> str:
    """`answer` without `[n]` markers beyond the `n_sources` numbered in the prompt (a warning for each)."""
    dropped: set[int] = set()

    def fix(match: re.Match[str]) -> str:
        numbers = [int(n) for n in match.group(1).split(",")]
        kept = [n for n in numbers if 1 <= n <= n_sources]
        dropped.update(n for n in numbers if not 1 <= n <= n_sources)
        return f"[{', '.join(map(str, kept))}]" if kept else ""

    cleaned = _MARKER.sub(fix, answer)
    for n in sorted(dropped):
        warnings.append(f"the answer cites [{n}] but only {n_sources} quotes were given; citation dropped")
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", cleaned).strip() if dropped else cleaned
