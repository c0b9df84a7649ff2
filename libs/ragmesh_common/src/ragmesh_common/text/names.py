"""Names a sentence states, and whether the evidence states them too (no model: capitalisation rules).

`names(text)`: capitalised words not at a sentence start; at the start only when all caps or mixed case
(IBM, McKinsey) or followed by another capitalised word (Jane Miller). `capitalised(text)`: every capitalised
content word, the start included. `name_supported(name, words, text)`: every part of the name is a word of
the evidence (by stem, same initial), or an acronym whose letters start consecutive words of it
(CEO = chief executive officer). `without_qualifier(title)`: a title without its trailing "(…)" qualifier
("Kiss and Tell (1945 film)" → "Kiss and Tell").
"""

from __future__ import annotations

import re

import re2

from ragmesh_common.text.words import QUESTION_WORDS, STOP_WORDS, normalise, stem, words, written_as_acronym

_TOKEN = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_POSSESSIVE = re.compile(r"['’]s?$")
_NOT_NAMES = frozenset(["answer", "quote", "quotes"])
_QUALIFIER = re2.compile(r"\s*\([^)]*\)\s*$")  # RE2: linear on any title


# "May" is a stop word ("may") except as a month beside a number: "in May 2025", "5 May" (stop 59: "What was the
# cost in May 2025?" lost its month and matched every row of 2025)
_MONTHS_LIKE_STOP_WORDS = frozenset({"May"})
_NUMBER_AFTER = re2.compile(r"^\s*\d")
_NUMBER_BEFORE = re2.compile(r"\d\s*$")


def _dated(text: str, m: re.Match[str]) -> bool:
    """The capitalised stop word at `m` is a month beside a number ("May 2025", "5 May")."""
    return m.group(0) in _MONTHS_LIKE_STOP_WORDS and bool(
        _NUMBER_AFTER.search(text[m.end() : m.end() + 8])
        or _NUMBER_BEFORE.search(text[max(0, m.start() - 8) : m.start()])
    )


def without_qualifier(title: str) -> str:
    """`title` without a trailing "(…)" qualifier and the spaces around it."""
    return str(_QUALIFIER.sub("", title))


def names(text: str) -> list[str]:
    """Names `text` states (see the module docstring)."""
    text = normalise(text)
    tokens = list(_TOKEN.finditer(text))
    found: list[str] = []
    for i, m in enumerate(tokens):
        token = _POSSESSIVE.sub("", m.group(0))
        if (
            len(token) < 2
            or not token[0].isupper()
            or (token.lower() in STOP_WORDS and not _dated(text, m) and not written_as_acronym(token, text))
        ):
            continue
        before = text[: m.start()].rstrip(" \t\"'“”‘’([*")
        at_start = not before or before[-1] in ".!?:;\n•-–—>" or i == 0
        if at_start:
            inner_caps = sum(c.isupper() for c in token) >= 2
            following = tokens[i + 1].group(0) if i + 1 < len(tokens) else ""
            next_is_name = (
                bool(following)
                and following[0].isupper()
                and following.lower() not in STOP_WORDS
                and text[m.end() : tokens[i + 1].start()].strip() == ""
            )
            if not (inner_caps or next_is_name):
                continue
        found.append(token)
    return found


def capitalised(text: str) -> list[str]:
    """Every capitalised content word, the sentence start included (question words and boilerplate left out)."""
    return [
        t
        for t in (_POSSESSIVE.sub("", m.group(0)) for m in _TOKEN.finditer(normalise(text)))
        if len(t) >= 2
        and t[0].isupper()
        and t.lower() not in STOP_WORDS
        and t.lower() not in QUESTION_WORDS
        and t.lower() not in _NOT_NAMES
    ]


def acronym_in(acronym: str, text: str) -> bool:
    """True when consecutive words of `text` have `acronym`'s letters as initials (CEO: chief executive officer)."""
    letters = acronym.lower()
    initials = [w[0] for w in words(text)]
    n = len(letters)
    return any("".join(initials[i : i + n]) == letters for i in range(len(initials) - n + 1))


def name_supported(name: str, evidence_words: set[str], evidence_text: str) -> bool:
    """Every part of `name` is among `evidence_words` (lower-case), or it is an acronym of `evidence_text`."""
    if name.isupper() and 2 <= len(name) <= 6 and acronym_in(name, evidence_text):
        return True
    parts = [p for p in words(name) if len(p) >= 2]
    return all(p in evidence_words or stem(p) in {stem(w) for w in evidence_words if w[:1] == p[:1]} for p in parts)
