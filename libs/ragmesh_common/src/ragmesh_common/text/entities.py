"""Rule-based named-entity spotting: no model, one tokeniser and one left-to-right phrase pass for both uses.

`spot(text, for_question=...)` is the spotter: it tokenises once (`_TOKEN`) and gathers runs of capitalised
words (names, acronyms, CamelCase, joined by connectors such as "of"), then reads them in one of two modes:

- questions (`for_question=True`, `extract_entities`): the gateway's router, grading and rewrite. Also finds
  quoted strings, years/decades and numbers with units; a capitalised word mid-sentence starts a name even
  when it is a stop word ("The Exies"), digits continue a name ("Apollo 11"), a possessive continues into a
  capitalised word ("Woman's Viewpoint"), and a lone capitalised word at a sentence start is skipped.
- documents (`for_question=False`): the graph service's entity extraction (`ragmesh_graph.extract`), which
  runs it per sentence. Stricter words (a capitalised word needs lower-case letters after it; acronyms are 2-6
  capitals with an optional plural "s", "APIs" -> "API", and not `NOT_ACRONYMS` such as "THE" or "IV"); leading
  and trailing stop words (plus a document's own words: "Figure", "Table") are trimmed; a possessive ends a
  name ("Acme Corp's APIs" -> "Acme Corp", "API"); a single word or an over-long run keeps only its acronyms,
  CamelCase words, and a lone capitalised word that does not start the sentence.

Found spans come back in order of appearance as `Mention(start, text, kind)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragmesh_common.text.stopwords import ENGLISH

MAX_CHARS = 2000
MAX_PHRASE_WORDS = 6  # documents: a longer capitalised run is a title or a heading, not one name

KIND_QUOTED = "quoted"
KIND_NAME = "name"  # a multi-word name, or (documents) a lone capitalised word
KIND_ACRONYM = "acronym"
KIND_CAMEL = "camel"
KIND_NUMBER = "number"
KIND_YEAR = "year"

# Quoted spans: straight or curly double quotes, guillemets, curly single quotes (straight ones collide with
# apostrophes).
_QUOTED = re.compile(r'"([^"\n]{1,120})"|“([^”\n]{1,120})”|‘([^’\n]{1,120})’|«([^»\n]{1,120})»')
# Tokens: initialisms (U.S., D.P.), single-letter initials (E.), words with inner -'’&. or digits, or any symbol.
_TOKEN = re.compile(r"(?:[A-Z]\.){2,}|[A-Z]\.(?=\s)|\w+(?:[-'’.&]\w+)*(?:['’]s?\b)?|\S")
_NUMBER_UNIT = re.compile(
    r"(?<![\w.,])(?:[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|thousand|bn|k|m)\b)?"
    r"|\d[\d,]*(?:\.\d+)?%|\d[\d,]*(?:\.\d+)?\s?(?:percent|kg|g|mg|km|m|cm|mm|mi|ft|lb|lbs|gb|mb|tb|kb|ghz|"
    r"mhz|ms|s|sec|seconds|minutes|hours|days|weeks|months|years|kw|mw|w|v|usd|eur|gbp|million|billion)\b)",
    re.IGNORECASE,
)
_YEAR = re.compile(r"(?<![\w.$€£-])(?:1[5-9]\d\d|20\d\d)(?:s|'s)?(?![\w%]|\.\d|\s?(?:%|percent)\b)")
# Questions: acronyms (with digits: "GPT4", "3M") and CamelCase ("iPhone", "PostgreSQL"); any other word with a
# capital first letter is capitalised.
_ACRONYM = re.compile(
    r"^(?:[A-Z]\.){2,}$|^[A-Z][A-Z0-9&]*[A-Z0-9]$|^[A-Z]+[0-9][A-Za-z0-9]*$|"
    r"^[0-9]+[A-Z][A-Za-z0-9]*$"
)
_CAMEL = re.compile(r"^[a-z]+[A-Z]\w*$|^[A-Z][a-z]+[A-Z]\w*$")
# Documents: stricter, since running text has all-caps emphasis and odd tokens a question rarely has.
_DOC_ACRONYM = re.compile(r"[A-Z]{2,6}s?")  # "NASA", "APIs"
_INNER_MARK = re.compile(r"[-'’]")
_DOC_CAMEL = re.compile(r"[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*")  # an inner lower->upper switch: "WidgetPro", "iPhone"
_SENTENCE_END = re.compile(r"[.!?:;]")
_DOC_SENTENCE_END = re.compile(r"[.!?;]")  # a colon introduces a list of names in running text

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
# Capitalised words that start a document's sentences or phrases without being names: the stop words,
# greetings, and the words a document refers to its own parts with ("See Figure 3", "Table 2").
DOCUMENT_STOPWORDS = ENGLISH | frozenset(
    [
        "dear",
        "hello",
        "hi",
        "note",
        "please",
        "see",
        "figure",
        "fig",
        "table",
        "section",
        "chapter",
        "page",
        "appendix",
        "example",
        "today",
        "yesterday",
        "tomorrow",
    ]
)
# Lower-case words allowed inside a capitalised phrase ("Bank of America", "Ludwig van Beethoven").
_CONNECTORS = frozenset(
    {"of", "de", "del", "der", "den", "van", "von", "la", "le", "du", "da", "di", "&", "y", "bin", "al"}
)
# Documents: "Department for Education" too; never "and" or "the" ("Acme and Globex" are two entities).
DOCUMENT_CONNECTORS = frozenset({"of", "for", "de", "du", "der", "von", "van", "la", "le", "&"})
# All-caps tokens that are emphasis or numerals, not acronyms (documents).
NOT_ACRONYMS = frozenset(
    {
        "II",
        "III",
        "IV",
        "VI",
        "VII",
        "VIII",
        "IX",
        "XI",
        "XII",
        "OK",
        "AM",
        "PM",
        "THE",
        "AND",
        "FOR",
        "NOT",
        "BUT",
        "ARE",
        "YOU",
        "ALL",
        "NEW",
        "NOTE",
        "TODO",
        "WARNING",
        "NB",
    }
)


@dataclass(frozen=True)
class Mention:
    """One spotted span: its offset in the text, its surface form and its kind (`KIND_*`)."""

    start: int
    text: str
    kind: str


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    sentence_start: bool
    after_punct: bool  # punctuation (a comma, a bracket) separates it from the previous token


def _tokens(text: str, sentence_end: re.Pattern[str] = _SENTENCE_END) -> list[Token]:
    out: list[Token] = []
    at_start, punct = True, False
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if len(tok) == 1 and not tok.isalnum():
            if sentence_end.match(tok):
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


def word_kind(word: str, *, for_question: bool = True) -> str | None:
    """`KIND_ACRONYM`, `KIND_CAMEL`, `KIND_NAME` (capitalised) or None (lower-case, "I", a symbol)."""
    if word == "I":
        return None
    if for_question:
        if _ACRONYM.match(word):
            return KIND_ACRONYM
        if _CAMEL.match(word):
            return KIND_CAMEL
        return KIND_NAME if word[:1].isupper() else None
    word = _strip_possessive(word)
    if _DOC_ACRONYM.fullmatch(word) and word.rstrip("s") not in NOT_ACRONYMS:
        return KIND_ACRONYM
    if _DOC_CAMEL.fullmatch(word) and not word.isupper():
        return KIND_CAMEL
    return KIND_NAME if _is_title(word) else None


def _is_title(word: str) -> bool:
    """A capital then lower-case letters or digits, in any script ("Wańkowicz", "Zürich", "O'Neil-Smith")."""
    head, *rest = _INNER_MARK.split(word)
    return (
        len(head) >= 2
        and head[0].isupper()
        and all(c.islower() or c.isdigit() for c in head[1:])
        and all(part.isalpha() for part in rest)
    )


def _starts_name(tok: Token, for_question: bool) -> bool:
    if word_kind(tok.text, for_question=for_question) is None:
        return False
    if for_question:
        # Mid-sentence, a capital letter is deliberate ("The Beatles", "Let It Be"); at a sentence start it is not.
        return not (tok.sentence_start and tok.text.lower() in STOP_CAPS)
    return _strip_possessive(tok.text).lower() not in DOCUMENT_STOPWORDS  # "The Acme Corp" starts at "Acme"


def _runs(tokens: list[Token], for_question: bool) -> list[list[tuple[Token, str]]]:
    """Runs of capitalised words (with their kinds, connectors as "connector") in order of appearance."""
    connectors = _CONNECTORS if for_question else DOCUMENT_CONNECTORS
    found: list[list[tuple[Token, str]]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not _starts_name(tok, for_question):
            i += 1
            continue
        run = [(tok, word_kind(tok.text, for_question=for_question) or KIND_NAME)]
        j = i + 1
        while j < len(tokens):
            nxt = tokens[j]
            if nxt.sentence_start or nxt.after_punct:
                break
            last = run[-1][0].text
            if _strip_possessive(last) != last and not (
                # "Jane Smith's first novel" ends the name; in a question "Reader's Digest" does not.
                for_question and nxt.text[:1].isupper() and not _ACRONYM.match(nxt.text)
            ):
                break
            kind = word_kind(nxt.text, for_question=for_question)
            if for_question and kind is None and nxt.text.isdigit() and not _YEAR.fullmatch(nxt.text):
                kind = KIND_NAME  # "Apollo 11"
            if kind is not None:
                run.append((nxt, kind))
                j += 1
                continue
            # "of" / "of the" inside a name, only when a capitalised word follows.
            lower = nxt.text.lower()
            span = 2 if for_question and lower == "of" and j + 1 < len(tokens) and tokens[j + 1].text == "the" else 1
            if (
                lower in connectors
                and j + span < len(tokens)
                and (
                    tokens[j + span].text[:1].isupper()
                    if for_question
                    else word_kind(tokens[j + span].text, for_question=False) is not None
                )
                and not tokens[j + span].after_punct
                and not tokens[j + span].sentence_start
            ):
                run.extend((t, "connector") for t in tokens[j : j + span])
                j += span
                continue
            break
        found.append(run)
        i = j
    return found


def _question_mentions(run: list[tuple[Token, str]]) -> list[Mention]:
    tok, kind = run[0]
    words = [t.text for t, _ in run]
    # A lone capitalised word opening a sentence is usually just the first word; acronyms and CamelCase stay.
    single = len(words) == 1
    if single and tok.sentence_start and kind == KIND_NAME:
        return []
    phrase = " ".join([*words[:-1], _strip_possessive(words[-1])])
    if single and (len(phrase) == 1 or phrase.lower() in STOP_CAPS):
        return []
    return [Mention(tok.start, phrase, kind if single else KIND_NAME)]


def _document_mentions(run: list[tuple[Token, str]]) -> list[Mention]:
    # Trailing stop words go ("Acme Corp This"); leading ones never start a run.
    while run and (run[-1][1] == "connector" or _strip_possessive(run[-1][0].text).lower() in DOCUMENT_STOPWORDS):
        run = run[:-1]
    if not run:
        return []
    words = [_strip_possessive(t.text) for t, _ in run]
    if sum(kind != "connector" for _, kind in run) >= 2 and len(run) <= MAX_PHRASE_WORDS:
        return [Mention(run[0][0].start, " ".join(words), KIND_NAME)]
    # A single word or an over-long run: keep its acronyms and CamelCase names on their own, and a
    # capitalised word that does not start the sentence ("met Google"; "Yesterday" would be noise).
    out: list[Mention] = []
    for (tok, kind), word in zip(run, words, strict=True):
        if kind == KIND_ACRONYM:
            out.append(Mention(tok.start, word[:-1] if word.endswith("s") else word, KIND_ACRONYM))  # "APIs"
        elif kind == KIND_CAMEL or (kind == KIND_NAME and len(run) == 1 and not tok.sentence_start):
            out.append(Mention(tok.start, word, kind))
    return out


def spot(text: str, *, for_question: bool = True) -> list[Mention]:
    """Every mention in `text` (cut at `MAX_CHARS` for questions), in order of appearance, not deduplicated.

    Documents should be passed one sentence at a time: only the first word counts as a sentence start there.
    """
    if not text or not isinstance(text, str):
        return []
    if for_question:
        text = text[:MAX_CHARS]
    spans: list[Mention] = []
    covered: list[tuple[int, int]] = []
    for m in _QUOTED.finditer(text):
        value = next(g for g in m.groups() if g is not None).strip()
        if not for_question:
            value = value.strip(" .,;:")
            if not (
                len(value) >= 2 and len(value.split()) <= MAX_PHRASE_WORDS and value.lower() not in DOCUMENT_STOPWORDS
            ):
                value = ""
        if value:
            spans.append(Mention(m.start(), value, KIND_QUOTED))
            covered.append((m.start(), m.end()))

    def free(pos: int) -> bool:
        return not any(a <= pos < b for a, b in covered)

    if for_question:
        for m in _NUMBER_UNIT.finditer(text):
            if free(m.start()):
                spans.append(Mention(m.start(), m.group(0).strip(), KIND_NUMBER))
                covered.append((m.start(), m.end()))
        tokens = [t for t in _tokens(text) if free(t.start)]
    else:
        # A quoted term reads as a space: the words on either side of it still form a phrase.
        blanked = _QUOTED.sub(lambda m: " " * len(m.group(0)), text)
        tokens = _tokens(blanked, _DOC_SENTENCE_END)
    for run in _runs(tokens, for_question):
        spans.extend(_question_mentions(run) if for_question else _document_mentions(run))
    if for_question:
        for m in _YEAR.finditer(text):
            if free(m.start()):
                spans.append(Mention(m.start(), m.group(0), KIND_YEAR))
    return sorted(spans, key=lambda s: s.start)


def extract_entities(text: str) -> list[str]:
    """Named entities in the question `text`, in order of appearance, deduplicated (case-insensitive)."""
    seen: set[str] = set()
    out: list[str] = []
    for mention in spot(text, for_question=True):
        key = mention.text.lower()
        if key not in seen:
            seen.add(key)
            out.append(mention.text)
    return out


def is_name(entity: str) -> bool:
    """True for an entity that names a thing (not a bare year or a quantity)."""
    return not (_YEAR.fullmatch(entity) or _NUMBER_UNIT.fullmatch(entity) or entity.replace(",", "").isdigit())
