"""Word-level helpers of the output checks (`verify.py`): content words, sentences, `[n]` markers.

Content words: NFKC-lowercased letter/digit runs, minus English stop words (`ragmesh_common.text.stopwords`) and answer boilerplate
("answer", "source", "according"), minus one-letter tokens. `[n]` markers beyond the quotes the model was
shown are removed from the answer with a warning (`drop_out_of_range`).
"""

from __future__ import annotations

import re
import unicodedata

import re2

from ragmesh_common.text.stopwords import ENGLISH

_WORD = re.compile(r"[^\W_]+")
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

# Stop words, the pieces of contractions the word pattern splits off ("don't" → "don"), and answer boilerplate.
STOP_WORDS: frozenset[str] = ENGLISH | frozenset(
    [
        "aren",
        "couldn",
        "didn",
        "doesn",
        "don",
        "hadn",
        "hasn",
        "haven",
        "isn",
        "ll",
        "mustn",
        "re",
        "shan",
        "shouldn",
        "ve",
        "wasn",
        "weren",
        "won",
        "wouldn",
        "us",
        "answer",
        "answers",
        "question",
        "questions",
        "source",
        "sources",
        "context",
        "document",
        "documents",
        "according",
        "based",
        "provided",
        "information",
        "mentioned",
        "stated",
        "says",
        "said",
        "following",
        "given",
        "sure",
        "okay",
        "ok",
        "please",
    ]
)


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
    return str(re2.sub(r"[ \t]+([.,;:!?])", r"\1", cleaned)).strip() if dropped else cleaned  # RE2: linear
