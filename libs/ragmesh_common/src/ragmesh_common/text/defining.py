"""defining: what a question asks the definition of, and whether a text says what that is.

"What is TableFormer?", "Who is Ada Brill?", "What does OTSL stand for?", "Define net retention": the question
asks what one term is (`asked_term`). A text states it (`defines`) when the term, as a whole word, is followed by
"is a / an / the / one …" (also are, was, were), by an appositive ", a / an …" ("We propose TableFormer, a
transformer based model …"; not ", the …", which as often starts a clause: "in DocLayNet, the difference is …"), or
by "means", "refers to", "stands for", "is defined as" — a bracketed aside ("OTSL (Optimised Table Structure
Language) is …") may come before the verb; an acronym is also defined where it follows its words in brackets
("our Optimised Table Structure Language (OTSL)"), and a glossary's entry opening a line defines its term ("CSS:
Cascading Style Sheets", "SLA – Service Level Agreement"). The term must head its clause: the call duck is no duck.
Surface patterns only (no parse): the gateway uses them to choose which sources reach the answerer; the answerer's
own parse (`ragmesh_answerer.definitions`) still decides what the definition is.
"""

from __future__ import annotations

import re

import re2

from ragmesh_common.text.words import normalise

MAX_TERM_WORDS = 6
# a word that may come right before a term being defined: "the duck is …", "in Europe a duck is …", "we present
# DocLayNet, a …" (function words and introducing verbs; not a general stop-word list, which holds nouns like "call")
LEADING = frozenset(
    [
        "the",
        "a",
        "an",
        "this",
        "that",
        "these",
        "those",
        "our",
        "its",
        "their",
        "his",
        "her",
        "my",
        "your",
        "here",
        "there",
        "so",
        "thus",
        "then",
        "now",
        "also",
        "today",
        "and",
        "or",
        "but",
        "of",
        "in",
        "on",
        "at",
        "for",
        "by",
        "with",
        "from",
        "to",
        "as",
        "present",
        "presents",
        "presented",
        "propose",
        "proposes",
        "proposed",
        "introduce",
        "introduces",
        "introduced",
        "called",
        "named",
        "termed",
    ]
)
_ASKS = (
    re.compile(r"^(?:what|who)(?:'s|\s+(?:is|are|was|were))\s+(?P<term>[^?]+?)\s*\??$", re.IGNORECASE),
    re.compile(r"^what\s+(?:does|do|did)\s+(?P<term>[^?]+?)\s+(?:mean|stand\s+for)\s*\??$", re.IGNORECASE),
    re.compile(r"^(?:define|definition\s+of)\s+(?P<term>[^?.]+?)\s*[?.]?$", re.IGNORECASE),
)
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
# a preposition that ends the asked term is stranded: the question asks about a relation of the term
_STRANDED = frozenset({"for", "of", "to", "in", "on", "with", "about", "from", "by", "at", "as", "into"})
# what follows a term that is being defined, matched at the character after it (RE2: linear time; the leading
# whitespace run made the backtracking engine quadratic when searched for)
_DEFINES = re2.compile(
    r"(?i)\s*(?:,\s+(?:a|an)\s"
    r"|(?:\([^()\n]{0,120}\)\s*)?(?:is|are|was|were)\s+(?:a|an|the|one)\s"
    r"|(?:\([^()\n]{0,120}\)\s*)?(?:means|refers\s+to|stands\s+for|is\s+defined\s+as)\s)"
)

# a glossary's entry, matched at the character after a term that opens its line: a colon or a spaced dash, then what
# it says ("CSS: Cascading Style Sheets", "SLA – Service Level Agreement"; the parser writes a description list so)
_GLOSSED = re2.compile(r"[ \t]*(?::|[ \t][-–—])[ \t]+\S")


def asked_term(question: str) -> str | None:
    """The term a question asks the definition of ("TableFormer" of "What is TableFormer?"), without a leading
    article; None for any other question, or a term of more than `MAX_TERM_WORDS` words."""
    text = " ".join(normalise(question).split())
    for pattern in _ASKS:
        found = pattern.match(text)
        if found:
            term = _ARTICLE.sub("", found.group("term")).strip(" \"'“”")
            if not term or len(term.split()) > MAX_TERM_WORDS or term.split()[-1].lower() in _STRANDED:
                return None  # "What is HTML used for?" asks what it is for, not what it is
            return term
    return None


def defines(term: str, text: str) -> bool:
    """`text` says what `term` is: the term as a whole word (any case), heading its clause (`_leads`), followed by
    a defining phrase (module docstring)."""
    if is_acronym(term) and f"({term})" in text:  # "our Optimised Table Structure Language (OTSL)": written out
        return True
    lowered, wanted = normalise(text).lower(), term.lower()
    start = lowered.find(wanted)
    while start >= 0:
        end = start + len(wanted)
        whole = (start == 0 or not lowered[start - 1].isalnum()) and (end == len(lowered) or not lowered[end].isalnum())
        if whole and _leads(lowered[:start]) and _DEFINES.match(lowered, end):
            return True
        if whole and _opens_line(lowered[:start]) and _GLOSSED.match(lowered, end):
            return True
        start = lowered.find(wanted, start + 1)
    return False


def _opens_line(before: str) -> bool:
    """The term after `before` opens its line, a bullet aside (a glossary's entry, a description list's term)."""
    return not before[before.rfind("\n") + 1 :].strip(" \t-*•")


def _leads(before: str) -> bool:
    """The term after `before` heads what is said of it: it opens the text or a sentence, or follows a function
    word or an introducing verb ("the duck is …", "we present DocLayNet, a …") — not a word it is part of a name
    with ("the call duck is the smallest breed" says what a call duck is, not a duck)."""
    stripped = before.rstrip()
    if not stripped or stripped[-1] in ".!?:;\n\"'“(*":
        return True
    word = stripped.split()[-1].strip("\"'“”(*,")
    return word in LEADING


def is_acronym(term: str) -> bool:
    """One word with at least two capitals ("OTSL", "PhD"): written out before it in brackets, it is defined
    (here, and where the answerer looks for its words: `ragmesh_answerer.definitions.spelled_out`)."""
    return " " not in term and sum(c.isupper() for c in term) >= 2
