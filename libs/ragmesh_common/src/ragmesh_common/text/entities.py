"""Rule-based named-entity spotting: no model, a single left-to-right pass over tokens.

Found, in order of appearance and deduplicated case-insensitively: quoted strings, capitalised phrases
(a lone capitalised word at a sentence start is skipped — it is usually just the first word), acronyms,
CamelCase words, years/decades and numbers with units.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragmesh_common.text.stopwords import ENGLISH

MAX_CHARS = 2000

# Quoted spans: straight or curly double quotes, curly single quotes (straight ones collide with apostrophes).
_QUOTED = re.compile(r'"([^"\n]{1,120})"|“([^”\n]{1,120})”|‘([^’\n]{1,120})’')
# Tokens: initialisms (U.S., D.P.), single-letter initials (E.), words with inner -'’&. or digits, or any symbol.
_TOKEN = re.compile(r"(?:[A-Z]\.){2,}|[A-Z]\.(?=\s)|\w+(?:[-'’.&]\w+)*(?:['’]s?\b)?|\S")
_NUMBER_UNIT = re.compile(
    r"(?<![\w.])(?:[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|thousand|bn|k|m)\b)?"
    r"|\d[\d,]*(?:\.\d+)?%|\d[\d,]*(?:\.\d+)?\s?(?:percent|kg|g|mg|km|m|cm|mm|mi|ft|lb|lbs|gb|mb|tb|kb|ghz|"
    r"mhz|ms|s|sec|seconds|minutes|hours|days|weeks|months|years|kw|mw|w|v|usd|eur|gbp|million|billion)\b)",
    re.IGNORECASE,
)
_YEAR = re.compile(r"(?<![\w.$€£-])(?:1[5-9]\d\d|20\d\d)(?:s|'s)?(?![\w%]|\.\d|\s?(?:%|percent)\b)")
_ACRONYM = re.compile(
    r"^(?:[A-Z]\.){2,}$|^[A-Z][A-Z0-9&]*[A-Z0-9]$|^[A-Z]+[0-9][A-Za-z0-9]*$|"
    r"^[0-9]+[A-Z][A-Za-z0-9]*$"
)
_CAMEL = re.compile(r"^[a-z]+[A-Z]\w*$|^[A-Z][a-z]+[A-Z]\w*$")
_SENTENCE_END = re.compile(r"[.!?:;]")

# Capitalised words that open questions or sentences but are not names: the stop words, the verbs of asking,
# and ordinals and adjectives that start a sentence far more often than a name.
STOP_CAPS = ENGLISH | frozenset(
    [
        "tell",
        "give",
        "show",
        "list",
        "name",
        "describe",
        "explain",
        "summarize",
        "summarise",
        "compare",
        "find",
        "please",
        "first",
        "last",
        "next",
        "new",
        "old",
        "one",
    ]
)
# Lower-case words allowed inside a capitalised phrase ("Bank of America", "Ludwig van Beethoven").
_CONNECTORS = frozenset(
    {"of", "de", "del", "der", "den", "van", "von", "la", "le", "du", "da", "di", "&", "y", "bin", "al"}
)


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    sentence_start: bool
    after_punct: bool  # punctuation (a comma, a bracket) separates it from the previous token


def _tokens(text: str) -> list[Token]:
    out: list[Token] = []
    at_start, punct = True, False
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if len(tok) == 1 and not tok.isalnum():
            if _SENTENCE_END.match(tok):
                at_start = True
            punct = True
            continue
        out.append(Token(tok, m.start(), at_start, punct))
        at_start, punct = False, False
    return out


def _strip_possessive(word: str) -> str:
    for suffix in ("'s", "’s", "'", "’"):
        if word.endswith(suffix) and len(word) > len(suffix):
            return word[: -len(suffix)]
    return word


def _is_cap(word: str) -> bool:
    return word[:1].isupper() or bool(_ACRONYM.match(word)) or bool(_CAMEL.match(word))


def _starts_name(tok: Token) -> bool:
    # Mid-sentence, a capital letter is deliberate ("The Beatles", "Let It Be"); at a sentence start it is not.
    if not _is_cap(tok.text) or tok.text == "I":
        return False
    return not (tok.sentence_start and tok.text.lower() in STOP_CAPS)


def _capitalised_phrases(tokens: list[Token]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not _starts_name(tok):
            i += 1
            continue
        words = [tok.text]
        j = i + 1
        while j < len(tokens):
            nxt = tokens[j]
            if nxt.sentence_start or nxt.after_punct:
                break
            possessive = _strip_possessive(words[-1]) != words[-1]
            if possessive and not (nxt.text[:1].isupper() and not _ACRONYM.match(nxt.text)):
                break  # "Jane Smith's first novel" ends the name; "Reader's Digest" does not
            if (_is_cap(nxt.text) and nxt.text != "I") or (nxt.text.isdigit() and not _YEAR.fullmatch(nxt.text)):
                words.append(nxt.text)
                j += 1
                continue
            # "of" / "of the" inside a name, only when a capitalised word follows.
            lower = nxt.text.lower()
            span = 2 if lower == "of" and j + 1 < len(tokens) and tokens[j + 1].text == "the" else 1
            if (
                lower in _CONNECTORS
                and j + span < len(tokens)
                and tokens[j + span].text[:1].isupper()
                and not tokens[j + span].after_punct
                and not tokens[j + span].sentence_start
            ):
                words.extend(t.text for t in tokens[j : j + span])
                j += span
                continue
            break
        # A lone capitalised word opening a sentence is usually just the first word; acronyms and CamelCase stay.
        single = len(words) == 1
        if not (single and tok.sentence_start and not _ACRONYM.match(tok.text) and not _CAMEL.match(tok.text)):
            phrase = " ".join([*words[:-1], _strip_possessive(words[-1])])
            if not (single and (len(phrase) == 1 or phrase.lower() in STOP_CAPS)):
                found.append((tok.start, phrase))
        i = j
    return found


def extract_entities(text: str) -> list[str]:
    """Named entities in `text`, in order of appearance, deduplicated (case-insensitive)."""
    if not text or not isinstance(text, str):
        return []
    text = text[:MAX_CHARS]
    spans: list[tuple[int, str]] = []
    covered: list[tuple[int, int]] = []
    for m in _QUOTED.finditer(text):
        value = next(g for g in m.groups() if g is not None).strip()
        if value:
            spans.append((m.start(), value))
            covered.append((m.start(), m.end()))

    def free(pos: int) -> bool:
        return not any(a <= pos < b for a, b in covered)

    for m in _NUMBER_UNIT.finditer(text):
        if free(m.start()):
            spans.append((m.start(), m.group(0).strip()))
            covered.append((m.start(), m.end()))
    tokens = [t for t in _tokens(text) if free(t.start)]
    spans.extend(_capitalised_phrases(tokens))
    for m in _YEAR.finditer(text):
        if free(m.start()):
            spans.append((m.start(), m.group(0)))
    spans.sort(key=lambda s: s[0])
    seen: set[str] = set()
    out: list[str] = []
    for _, value in spans:
        key = value.lower()
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def is_name(entity: str) -> bool:
    """True for an entity that names a thing (not a bare year or a quantity)."""
    return not (_YEAR.fullmatch(entity) or _NUMBER_UNIT.fullmatch(entity) or entity.replace(",", "").isdigit())
