"""Choices the evidence settles: "Which band was formed first, The Exies or Circus Diablo?".

A question that offers two options (`Question.options`) is answered by one of them only when the evidence
settles the choice:
- by dates, when the question asks which came first or last (`first`, `earlier`, `older`, `oldest`, … or
  `later`, `last`, `younger`, `newest`, …): each option's own date is the extractive answer to the question
  asked of that option alone ("When was The Exies band formed?"; "older" and "younger" ask when the option was
  born), and the two dates differ;
- else by what the question says of the answer ("Which singer is American, Mark King or Nick Hexum?" →
  american, singer; `property_question`): one option's sentence states all of it, and every sentence about
  the other option misses some of it (the other option must have evidence: its absence settles nothing).
Any other choice (which is larger: "larger" is never stated) is not settled: the answer is withheld.
"""

from __future__ import annotations

import re
import unicodedata

from ragmesh_common.text.numbers import MONTH_NUMBER, YEAR
from ragmesh_common.text.questions import AnswerType, Question, last_sentence
from ragmesh_common.text.words import stem, words

EARLIER = frozenset(["first", "earlier", "earliest", "older", "oldest", "sooner", "before"])
LATER = frozenset(["later", "latest", "last", "younger", "youngest", "newer", "newest", "recent", "after"])
# an age is a birth date: "Who is older, A or B?" asks when each was born
BIRTH = frozenset(["older", "oldest", "younger", "youngest"])
CUES = EARLIER | LATER

_DAY = re.compile(r"(?<!\d)([0-3]?\d)(?!\d)")


def date_order(question: Question) -> int | None:
    """-1 when the earliest date wins the question's choice, 1 when the latest does, None when the choice is
    not between dates (or its cue words point both ways)."""
    if len(question.options) != 2:
        return None
    said = set(words(last_sentence(question.text)))
    earlier, later = bool(said & EARLIER), bool(said & LATER)
    if earlier == later:
        return None
    return -1 if earlier else 1


def option_question(question: Question, option: str) -> Question:
    """The question asked of one option alone: its words the option's name, its terms the question's own
    but the choice's cue words and the other option's words ("When was Exies band formed?")."""
    said = set(words(last_sentence(question.text)))
    others = {w for o in question.options if o != option for w in words(o)}
    own = tuple(dict.fromkeys(w for w in words(option) if len(w) >= 2))
    focus = [f for f in question.focus if f not in CUES and f not in others and f not in own]
    if said & BIRTH:
        focus.append("born")
    focus = list(dict.fromkeys(focus))
    return Question(
        f"When was {option} {' '.join(focus)}?".replace("  ", " "),
        AnswerType.DATE,
        own,
        (),
        tuple(focus),
    )


def property_question(question: Question) -> Question:
    """What a choice asks of each option besides the options themselves: the question's other names and terms
    ("Which singer is American, A or B?" → american, singer), the choice's cue words aside."""
    mine = {w for o in question.options for w in words(o)}
    return Question(
        question.text,
        AnswerType.OTHER,
        tuple(e for e in question.entities if e not in mine),
        tuple(a for a in question.acronyms if a.lower() not in mine),
        tuple(f for f in question.focus if f not in mine and f not in CUES),
    )


def states_all(asked: Question, text: str) -> bool:
    """`text` states every name and term of `asked` (by stem and word family)."""
    entities, acronyms, focus = asked.coverage(text)
    return (len(entities), len(acronyms), len(focus)) == (len(asked.entities), len(asked.acronyms), len(asked.focus))


def date_key(text: str) -> tuple[int, int, int] | None:
    """(year, month, day) of a date as written ("July 14, 1939", "14 July 1939", "1997"); 0 for a part it
    does not state; None without a year."""
    lowered = unicodedata.normalize("NFKC", text).lower()
    years = YEAR.findall(lowered)
    if not years:
        return None
    month = next((MONTH_NUMBER[w] for w in re.findall(r"[^\W\d_]+", lowered) if w in MONTH_NUMBER), 0)
    day = 0
    if month:
        days = [int(d) for d in _DAY.findall(YEAR.sub(" ", lowered)) if 1 <= int(d) <= 31]
        day = days[0] if days else 0
    return int(years[0]), month, day


def compare(a: tuple[int, int, int], b: tuple[int, int, int]) -> int | None:
    """-1 when `a` is the earlier date, 1 when `b` is, None when they do not tell: equal, or differing only
    at a part one of them does not state (a year alone against a full date compares by year only)."""
    for x, y in zip(a, b, strict=True):
        if x == 0 or y == 0:
            return None
        if x != y:
            return -1 if x < y else 1
    return None


def mention(option: str, text: str) -> tuple[int, int] | None:
    """Where `text` names `option`: the whole name, else its longest word (by stem), as offsets."""
    found = re.search(re.escape(option), text, re.IGNORECASE)
    if found:
        return found.start(), found.end()
    for word in sorted(words(option), key=len, reverse=True):
        if len(word) < 3:
            continue
        for m in re.finditer(r"[^\W\d_]+", text):
            if stem(m.group(0).lower()) == stem(word):
                return m.start(), m.end()
    return None
