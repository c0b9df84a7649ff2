"""Sentence splitting with offsets: every sentence is an exact slice of the text it came from.

A text is split at line breaks and at `.`, `!` or `?` (optionally followed by citation markers such as `[12]`
and a closing quote or bracket) before whitespace, but not after a common abbreviation ("e.g.", "Dr.", "z.B.") or a single letter
("J. Smith"), nor before a word in lower case ("U.S. patents", "a.m. and"); spans exclude the outer whitespace.
"""

from __future__ import annotations

import re

import re2

_LINE = re.compile(r"[^\n]+")
# Citation markers that open a line (a chunk cut between a sentence and its markers): they belong to no sentence.
_LEADING_MARKERS = re.compile(r"(?:\[\d{1,4}\][ \t]*)+(?=\S)")
# A closing quote or bracket, or citation markers ("founded in 1911.[12] The…", "… Anserinae. [9] [16] The…", as
# HTML pages joined with spaces write them), may follow the end mark.
_END = re.compile(r"(?<=[.!?])(?:[ \t]*\[\d{1,4}\])*[\"'”’)\]]?\s+")
# RE2 (linear time; \w as letters, digits and _ in any script): a long run of word characters made the
# backtracking engine quadratic
_LAST_WORD = re2.compile(r"([\pL\pN_.]+)[.!?][\"'”’)\]]?$")
ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "vs",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "inc",
        "ltd",
        "co",
        "corp",
        "st",
        "no",
        "fig",
        "approx",
        "ca",
        "jr",
        "sr",
        "dept",
        "z.b",
        "bzw",
        "ggf",
        "usw",
        "u.a",
        "d.h",
    ]
)
# A sentence that opens with a pronoun is about its predecessor's subject ("It was founded in 1911.").
PRONOUN_START = re.compile(
    r"^\W*(?:it|its|he|his|she|her|they|their|them|this|these|that|those|the\s+company|"
    r"er|sie|es|dies|diese[rs]?|il|elle|ils|elles|ce|cette)\b",
    re.IGNORECASE,
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text` (see the module docstring)."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        start = line.start()
        for end_match in _END.finditer(line.group(0)):
            cut = line.start() + end_match.start()
            last_word = _LAST_WORD.search(text[start:cut])
            if last_word and (last_word.group(1).lower() in ABBREVIATIONS or len(last_word.group(1)) == 1):
                continue
            if line.group(0)[end_match.end() : end_match.end() + 1].islower():
                continue  # "… most annual U.S. patents …": a sentence does not open in lower case
            spans.append((start, cut))
            start = line.start() + end_match.end()
        spans.append((start, line.end()))
    result = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        if leading := _LEADING_MARKERS.match(text, s, e):  # the markers of the sentence before ("[9] [16] The…")
            s = leading.end()
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            result.append((s, e))
    return result


def split_sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]
