"""definitions: "What is X?" answered by the sentence that says what X is.

"What is TableFormer?" on the TableFormer paper was withheld (no span of the asked type: the question asks for a
description, not a date, name or number), and "What is a Boots self-locking nut?" got the short answer "one piece"
from "The Boots self-locking nut is of one piece, all-metal construction designed to hold tight despite severe
vibration". A question that asks only what or who something is (`asked`, on the question's parse: "What is X?",
"Who was X?", "What does X mean?", "… stand for?") is answered by a sentence whose parse defines X (`defined`):

- X (or a name in apposition to the subject: "International Business Machines Corporation (IBM) is …") is the
  subject of "be" with a complement right after it: "X is a transformer based model …" (the complement, `attr`, is the
  answer), or "X is of one piece, all-metal construction …" (the `of` phrase);
- X is the subject of "refers to", "means", "stands for", "is defined as" (their object);
- X stands in apposition: "We propose TableFormer, a transformer based model that predicts …" (the appositive);
- only where no sentence does any of that: X is what something is called or known as ("A male is called a drake":
  "A male"; `_named_so`), in a source not about X itself (the page "Duck" saying "the female is called a duck").

The subject must be X itself: the same content words (stemmed; articles and possessives aside), so "TableFormer
predictions are …" defines nothing. A sentence that says what X is *not* ("X is not a …") defines nothing. The
answer is an exact slice of the sentence; the first defining sentence in the caller's order answers (the sources
come ranked).

Where no sentence defines X: a *bare* X (a thing named, no preposition, clause, ordinal or superlative: "What is
a duck?") gets no other span ("drake" from "A male is called a drake and the female is called a duck" answered it);
a *name* ("What is DocLayNet?") gets no number or date ("close to 95" from "… DocLayNet (close to 95%) …").
Measured with the verifier bench's SQuAD sample (600 + HotpotQA, the 55 questions `asked` accepts; in bench/README
"Stop 50"): tuning half wrong answers 3 → 2 at the same F1, reporting half 2 more right answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import re2

from ragmesh_common.text.defining import is_acronym
from ragmesh_common.text.words import stem, words

_ARTICLES = frozenset({"a", "an", "the", "s"})
MAX_ACRONYM = 10
# where a word starts (after a space, a hyphen is inside the word: "table-structure")
_WORD_START = re.compile(r"(?<!\S)\S")
# verbs whose object says what their subject is ("X refers to Y", "X means Y", "X stands for Y")
_MEANING_VERBS = frozenset({"mean", "refer", "stand", "define", "denote"})
# verbs that give a thing its name: "A male is called a drake" (the term is their object predicate)
_NAMING_VERBS = frozenset({"call", "term", "name", "dub"})
# a term with one of these asks which one, not what it is ("the next steps", "the first president")
_WHICH_ONE = frozenset({"first", "last", "next", "previous", "current", "main", "latest", "new", "other"})
MAX_TERM_WORDS = 8
_COPULAS = frozenset({"is", "are", "was", "were"})
_NOUN_PHRASE_OPENERS = frozenset({"a", "an", "the", "one"})  # "X is a …", not "X is used to …"
_SENTENCE_ENDS = frozenset({".", ";", "!", "?", "\n"})
# an appositive led by one of these lists members or instances, not what its head is
_INTRODUCES_MEMBERS = frozenset({"namely", "including", "especially", "e.g.", "i.e.", "like", "such"})
# a glossary's line: a term (at most 61 characters) opening a line (after a bullet), set off by a colon or a dash, and
# what it says up to a semicolon or the line's end ("CSS: Cascading Style Sheets; Used for styling and layout")
_GLOSSARY_LINE = re2.compile(
    r"(?m)^[ \t]*(?:[-*•][ \t]+)?(?P<term>[^\W\d_][^:;\n]{0,60}?)[ \t]*(?::|[ \t][-–—])[ \t]+(?P<said>[^;\n]*[^;\s.])"
)
# capitalised words in a row, "of", "and", "for", "the" or "&" between two of them ("Bank of America")
_CAPITALISED_RUN = re2.compile(r"[A-Z][\w'-]*(?:\s+(?:(?:of|and|for|the|&)\s+)?[A-Z][\w'-]*)+")
_WORD_END = re.compile(r"[\w'-]+")
_SPELLED_UNTIL = re2.compile(r"\s+[-–—]\s|,\s|\s\(")  # where an acronym's words end and a description starts
# "What is Docling?" / "Who is Quack Quackling?": a name of one to three capitalised words, however it parses
_NAME_ASKED = re.compile(
    r"^(?i:what|who)\s+(?i:is|are|was|were)\s+(?P<term>[A-Z][\w.-]*(?:\s+[A-Z][\w.-]*){0,2})\s*\?$"
)


@dataclass(frozen=True)
class Asked:
    term: str  # what the question asks about: "TableFormer", "a Boots self-locking nut"
    bare: bool  # a thing named, nothing else: only a definition answers (no preposition, clause, ordinal, superlative)
    name: bool  # every word written with a capital ("DocLayNet"): no number or date answers it
    expands: bool = False  # "What does IBM stand for?": the words an acronym abbreviates, not what the thing is


def asked(question: Any) -> Asked | None:
    """What a parsed question asks the definition of, or None. "What is X?" / "Who was X?" (be, the wh-word and X
    its only arguments), "What does X mean?" / "… stand for?" / "… refer to?"; "What is the capital of France?"
    qualifies (not bare), "What is terra preta called?" or "What was notable about X?" do not (another verb or
    complement)."""
    root = next((t for t in question if t.dep_ == "ROOT"), None)
    if root is None:
        return None
    name_asked = _NAME_ASKED.match(question.text)
    if name_asked is not None and root.lemma_.lower() != "be":  # "What is Docling?": the name parsed as a gerund
        return Asked(name_asked.group("term"), True, True)
    wh = [t for t in question if t.tag_ in ("WP", "WDT") and t.lower_ in ("what", "who")]
    subjects = [c for c in root.children if c.dep_ == "nsubj" and c.tag_ not in ("WP", "WDT")]
    if not subjects and root.lemma_.lower() == "be":  # "What is an estuary?": the term parsed as a second attr
        subjects = [c for c in root.children if c.dep_ == "attr" and c.tag_ not in ("WP", "WDT")]
    if len(wh) != 1 or len(subjects) != 1:
        return None
    subject = subjects[0]
    allowed = {root.i, wh[0].i, *(t.i for t in subject.subtree)}
    lemma = root.lemma_.lower()
    if lemma == "be" and wh[0].head.i == root.i and wh[0].dep_ in ("attr", "nsubj"):
        pass
    elif lemma in _MEANING_VERBS and root.tag_ == "VB":
        allowed |= {c.i for c in root.children if c.dep_ in ("aux", "prep") and not c.is_punct}
    else:
        return None
    if any(t.i not in allowed and not t.is_punct for t in question):
        return None
    term = question[subject.left_edge.i : subject.right_edge.i + 1]
    if len(term) > MAX_TERM_WORDS:
        return None
    if any(t.dep_ == "prep" and not any(c.dep_ in ("pobj", "pcomp") for c in t.children) for t in term):
        return None  # "What is HTML used for?": a stranded preposition asks what the thing is for, not what it is
    named = [t for t in term if t.lower_ not in _ARTICLES and not t.is_punct]
    bare = not any(
        t.pos_ == "ADP"
        or t.dep_ in ("relcl", "acl", "advcl")
        or t.tag_ in ("JJS", "RBS", "POS")
        or t.ent_type_ == "ORDINAL"
        or t.lower_ in _WHICH_ONE
        for t in term
    )
    name = bool(named) and all(any(c.isupper() for c in t.text) for t in named)
    expands = lemma == "stand" and is_acronym(term.text.strip())
    return Asked(term.text, bare, name, expands)


def _stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in words(text.replace("'s", " ").replace("’s", " ")) if w not in _ARTICLES)


def defined(term: str, docs: Sequence[Any], topics: Sequence[str] = ()) -> tuple[int, int, int]:
    """The first (doc index, start char, end char) of what a parsed sentence says `term` is; else of what a
    sentence names so ("A male is called a drake" → "A male", `_named_so`), unless its source is about the term
    (`topics`, each doc's source heading: on the page "Duck", "the female is called a duck" is a narrower sense of
    the page's own topic, not what a duck is); (-1, 0, 0) if none."""
    want = _stems(term)
    if not want:
        return -1, 0, 0
    for n, doc in enumerate(docs):
        found = _definition(doc, want)
        if found is not None:
            return n, found[0], found[1]
    for n, doc in enumerate(docs):
        if n < len(topics) and want <= _stems(topics[n]):
            continue
        found = _named_so(doc, want)
        if found is not None:
            return n, found[0], found[1]
    return -1, 0, 0


def _named_so(doc: Any, want: frozenset[str]) -> tuple[int, int] | None:
    """What a naming construction gives the term to: the passive subject of "is called / termed / named X" (its
    object predicate) or "is known as X" ("A male is called a drake", "A young duck is known as a duckling")."""
    for token in doc:
        if not _names(token, want):
            continue
        if token.dep_ == "oprd" and token.head.lemma_.lower() in _NAMING_VERBS:
            verb = token.head
        elif token.dep_ == "pobj" and token.head.lower_ == "as" and token.head.head.lemma_.lower() == "know":
            verb = token.head.head
        else:
            continue
        if any(c.dep_ == "neg" for c in verb.children):
            continue
        subject = next((c for c in verb.children if c.dep_ == "nsubjpass"), None)
        if subject is not None and not _names(subject, want):
            return _slice(doc, subject.left_edge.i, subject.right_edge.i)
    return None


def spelled_out(term: str, texts: Sequence[str]) -> tuple[int, int, int]:
    """Where an acronym is written out: the first (text index, start char, end char) of the words before "(TERM)"
    whose letters spell it ("our Optimised Table Structure Language (OTSL)" → "Optimised Table Structure
    Language"); (-1, 0, 0) when `term` is no acronym (at least two capitals, no space) or no text spells it."""
    short = term.strip()
    if not is_acronym(short) or len(short) > MAX_ACRONYM:
        return -1, 0, 0
    marker = f"({short})"
    for n, text in enumerate(texts):
        at = text.find(marker)
        while at >= 0:
            found = _long_form(short, text, at)
            if found is not None:
                return n, found[0], found[1]
            at = text.find(marker, at + 1)
    return -1, 0, 0


def initialled(term: str, texts: Sequence[str]) -> tuple[int, int, int]:
    """Where an acronym's words are written in a sentence that also uses it, without the brackets `spelled_out`
    reads: the first (text index, start char, end char) of a run of capitalised words whose initials are the
    acronym's letters, in order and no more ("International Business Machines Corporation (using the trademark
    IBM)" → "International Business Machines"; "of", "and", "for", "the" inside the run are skipped). (-1, 0, 0)
    when none."""
    short = term.strip()
    for n, text in enumerate(texts):
        if not re.search(rf"\b{re.escape(short)}\b", text):
            continue
        found = written_out(short, text)
        if found is not None:
            return n, found[0], found[1]
    return -1, 0, 0


def written_out(short: str, text: str) -> tuple[int, int] | None:
    """The first (start char, end char) in `text` of a run of capitalised words whose initials are the letters of
    the acronym `short`, in order and no more ("of", "and", "for", "the" inside the run skipped: "Mississippi
    Institute of Arts and Letters" writes out MIAL); None when none, or when `short` is no acronym."""
    if not is_acronym(short) or len(short) > MAX_ACRONYM:
        return None
    letters = short.lower()
    for run in _CAPITALISED_RUN.finditer(text):
        capitals = [m for m in _WORD_START.finditer(run.group(0)) if run.group(0)[m.start()].isupper()]
        for first in range(len(capitals) - len(letters) + 1):
            chosen = capitals[first : first + len(letters)]
            if "".join(run.group(0)[m.start()].lower() for m in chosen) == letters:
                words_end = _WORD_END.match(run.group(0), chosen[-1].start())
                assert words_end is not None
                return run.start() + chosen[0].start(), run.start() + words_end.end()
    return None


def glossed(term: str, texts: Sequence[str]) -> tuple[int, int, int]:
    """A glossary's entry for `term`: the first (text index, start char, end char) of what follows the term where
    it opens a line (a bullet aside) and a colon or dash sets it off ("CSS: Cascading Style Sheets; Used for
    styling", a description list's term as the parser writes it; "SLA - Service Level Agreement"): the entry's
    first description, up to a semicolon; for an acronym, its words up to a dash or comma when they spell it
    ("HTML: HyperText Markup Language - used for …" → "HyperText Markup Language"). (-1, 0, 0) when none."""
    want, short = _stems(term), term.strip()
    if not want:
        return -1, 0, 0
    acronym = is_acronym(short)
    for n, text in enumerate(texts):
        for entry in _GLOSSARY_LINE.finditer(text):
            if _stems(entry.group(1)) != want:
                continue
            start, end = entry.span(2)
            said = text[start:end]
            cut = _SPELLED_UNTIL.search(said) if acronym else None
            if cut is not None and _spells(short.lower(), said[: cut.start()].lower()):
                end = start + cut.start()
            return n, start, end
    return -1, 0, 0


def _long_form(short: str, text: str, at: int) -> tuple[int, int] | None:
    """The shortest run of the words right before `at` that spells `short` (Schwartz and Hearst's rule: every
    letter of the acronym, right to left, found in order in the words, its first letter starting the first word),
    at most len(short) + 5 words; None if there is none."""
    before = text[:at].rstrip()
    starts = [m.start() for m in _WORD_START.finditer(before)]
    for k in range(1, min(len(starts), len(short) + 5) + 1):
        first = starts[-k]
        if _spells(short.lower(), before[first:].lower()):
            return first, len(before)
    return None


def _spells(short: str, long: str) -> bool:
    letters = [c for c in short if c.isalnum()]
    if not letters or not long or long[0] != letters[0]:
        return False
    j = len(long) - 1
    for i in range(len(letters) - 1, -1, -1):
        while j >= 0 and (long[j] != letters[i] or (i == 0 and j > 0 and long[j - 1].isalnum())):
            j -= 1
        if j < 0:
            return False
        j -= 1
    return True


def _names(token: Any, want: frozenset[str]) -> bool:
    """Is the phrase headed by `token` (its subtree without a relative clause or appositive) exactly the term?"""
    left = token.left_edge.i
    right = token.i
    for child in token.rights:  # "the capital of France": the of-phrase is part of the term
        if child.dep_ in ("prep", "compound", "amod"):
            right = child.right_edge.i
    return _stems(token.doc[left : right + 1].text) == want


def _set_off_by_comma(appos: Any) -> bool:
    """ "We propose TableFormer, a transformer based model" is a definition; "zhèng (Chinese: 正)" is a gloss in
    brackets, and "the key features of OTSL, namely its reduced vocabulary size" names what the phrase that holds
    the term (an of-phrase's object) stands for, not the term."""
    first = appos.left_edge.i
    head = appos.head
    return (
        first > 0
        and appos.doc[first - 1].text == ","
        and not appos.doc[first].is_bracket
        and appos.doc[first].lower_ not in _INTRODUCES_MEMBERS
        and head.dep_ != "pobj"
    )


def _slice(doc: Any, first: int, last: int) -> tuple[int, int]:
    """Character offsets of tokens first..last, without a leading article, a closing aside in brackets ("Jan Andrzej Menich
    (1695–1696)": the dates are not what he was) or trailing punctuation."""
    while first < last and doc[first].pos_ == "DET" and doc[first].lower_ in _ARTICLES:
        first += 1  # "the Swynnerton Plan" is answered "Swynnerton Plan", as every extracted span
    opening = next((t.i for t in doc[first + 1 : last + 1] if t.text in ("(", "[")), None)
    if opening is not None:
        last = opening - 1
    while last > first and (doc[last].is_punct or doc[last].is_space):
        last -= 1
    return doc[first].idx, doc[last].idx + len(doc[last].text)


def _definition(doc: Any, want: frozenset[str]) -> tuple[int, int] | None:
    for token in doc:
        named = _names(token, want) or any(c.dep_ == "appos" and _names(c, want) for c in token.children)
        if token.dep_ in ("nsubj", "nsubjpass") and named:
            verb = token.head
            if any(c.dep_ == "neg" for c in verb.children):
                continue
            found = _complement(verb, token)
            if found is not None:
                return _slice(doc, *found)
        if token.dep_ == "appos" and _names(token.head, want) and _set_off_by_comma(token):
            return _slice(doc, token.left_edge.i, token.right_edge.i)
    return _opening_copula(doc, want)


def _opening_copula(doc: Any, want: frozenset[str]) -> tuple[int, int] | None:
    """ "X is a …" read from the words where the parse does not: a sentence that opens with the term (an article
    before it), then "is" / "are" / "was" / "were" and a noun phrase's article; the rest of the sentence. The small
    parser reads "The elastic stop nut is a standard nut with the height increased …" as two subjects ("stop",
    "nut") and a clause, so no subject was the term."""
    tokens = [t for t in doc if not t.is_space]
    for k, token in enumerate(tokens[1 : MAX_TERM_WORDS + 2], start=1):
        if token.lower_ not in _COPULAS:
            continue
        if _stems(doc[tokens[0].i : token.i].text) != want or k + 2 >= len(tokens):
            return None
        if tokens[k + 1].lower_ not in _NOUN_PHRASE_OPENERS:
            return None
        last = next((t.i - 1 for t in tokens[k + 2 :] if t.text in _SENTENCE_ENDS), tokens[-1].i)
        return _slice(doc, tokens[k + 1].i, last) if last > tokens[k + 1].i else None
    return None


def _complement(verb: Any, subject: Any) -> tuple[int, int] | None:
    """The tokens of what `verb` says its subject is: be + attribute or of-phrase; mean/refer to/stand for +
    object; "is defined as" + its as-phrase."""
    lemma = verb.lemma_.lower()
    for child in verb.rights:
        between = verb.doc[verb.i + 1 : child.left_edge.i]
        if any(t.dep_ != "advmod" and not t.is_space for t in between):
            return None  # "X is able to predict: 1) a sequence …": what follows the verb is no complement
        if lemma == "be" and child.dep_ == "attr":
            return child.left_edge.i, child.right_edge.i
        obj = _object(child) if child.dep_ == "prep" else None
        if lemma == "be" and obj is not None and child.lower_ == "of":
            return obj.left_edge.i, child.right_edge.i
        if lemma == "define" and subject.dep_ != "nsubjpass":
            return None  # "X defines 5 tokens" says what X does; "X is defined as …" what it is
        if lemma in _MEANING_VERBS:
            if child.dep_ == "dobj":
                return child.left_edge.i, child.right_edge.i
            if obj is not None and child.lower_ in ("to", "for", "as"):
                return obj.left_edge.i, child.right_edge.i
    return None


def _object(prep: Any) -> Any:
    """A preposition's object, or None."""
    return next((c for c in prep.children if c.dep_ == "pobj"), None)
