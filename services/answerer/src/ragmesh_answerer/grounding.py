"""Citation markers of the answer: the `[n]` a sentence cites, `[n]` beyond the quotes the model was shown
removed with a warning (`drop_out_of_range`), and a sentence without its markers and "The answer is:" prefix
(`clean_sentence`). Words, stop words and sentences: `ragmesh_common.text`.
"""

from __future__ import annotations

import re

import re2

_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")
_ANSWER_PREFIX = re.compile(r"^\s*(?:(?:the\s+)?answer(?:\s+is)?\s*[:\-–]\s*|a\s*:\s*)", re.IGNORECASE)


def clean_sentence(sentence: str) -> str:
    """`sentence` without its `[n]` markers and a leading "The answer is:" / "A:" (what verification reads)."""
    # RE2 (linear): the model's text may hold long runs of white space before a marker
    return _ANSWER_PREFIX.sub("", str(re2.sub(r"\s*\[[\d,\s]+\]", "", sentence))).strip()


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
