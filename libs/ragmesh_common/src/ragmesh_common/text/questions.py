"""What a question asks: its answer type and its key terms.

`question_type(text)`: when / what year → `DATE`; how many, how much, what percentage → `NUMBER`; who →
`PERSON` (a person or an organisation); where, in which country/city → `PLACE`; anything else `OTHER`
(English, German, French). `Question.parse` adds the key terms: names (lower-cased words of the names the
question states), acronyms (all caps, which also match the words they abbreviate) and focus terms (the
other content words, compared by stem and word family: "government" matches "governed"); `coverage` and `missing_key_terms` say how much of the question a
text mentions.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ragmesh_common.text.names import acronym_in, names
from ragmesh_common.text.numbers import strip_numbers
from ragmesh_common.text.words import QUESTION_WORDS, STOP_WORDS, normalise, related, stem, words


def _family_in(root: str, stems: set[str]) -> bool:
    """`root` or a word of its family ("founding" for "foundation") is among `stems`."""
    return root in stems or any(related(root, s) for s in stems if s[:4] == root[:4])


class AnswerType(enum.Enum):
    DATE = "date"
    NUMBER = "number"
    PERSON = "person"
    PLACE = "place"
    OTHER = "other"


_DATE_Q = re.compile(
    r"^\s*(?:when|since\s+when|wann|seit\s+wann|quand|depuis\s+quand)\b"
    r"|\b(?:what|which|in\s+what|in\s+which)\s+(?:year|date|month|day|decade|century)\b"
    r"|\bin\s+welchem\s+jahr\b|\ben\s+quelle\s+année\b|\bà\s+quelle\s+date\b",
    re.IGNORECASE,
)
_NUMBER_Q = re.compile(
    r"\bhow\s+(?:many|much|long|old|far|big|large|often|tall|high)\b"
    r"|\bwhat\s+(?:percentage|percent|share|number|amount)\b|\bwie\s+(?:viele?|lange|alt|oft|hoch)\b"
    r"|\bcombien\b",
    re.IGNORECASE,
)
_PERSON_Q = re.compile(r"^\s*(?:who|whom|whose|wer|wem|wen|wessen|qui)\b", re.IGNORECASE)
_PLACE_Q = re.compile(
    r"^\s*(?:where|wo|woher|wohin|où)\b"
    r"|\b(?:in|from|to)\s+(?:what|which)\s+(?:country|city|state|town|region|province|county|continent)\b"
    r"|^\s*(?:what|which)\s+(?:country|city|state|town|region|province|county|continent)\b",
    re.IGNORECASE,
)


def question_type(text: str) -> AnswerType:
    text = normalise(text).strip()
    if _DATE_Q.search(text):
        return AnswerType.DATE
    if _NUMBER_Q.search(text):
        return AnswerType.NUMBER
    if _PERSON_Q.search(text):
        return AnswerType.PERSON
    if _PLACE_Q.search(text):
        return AnswerType.PLACE
    return AnswerType.OTHER


@dataclass(frozen=True)
class Question:
    text: str
    answer_type: AnswerType
    entities: tuple[str, ...]  # name words of the question (lowercase)
    acronyms: tuple[str, ...]  # all-caps tokens, which also match the words they abbreviate
    focus: tuple[str, ...]  # the other key terms (compared by stem)

    @classmethod
    def parse(cls, question: str) -> Question:
        text = normalise(question).strip()
        raw_names = [n for n in names(text) if n.lower() not in QUESTION_WORDS]
        acronyms = tuple(dict.fromkeys(n for n in raw_names if n.isupper() and 2 <= len(n) <= 6))
        entity_words = [w for n in raw_names if n not in acronyms for w in words(n) if len(w) >= 2]
        entities = tuple(dict.fromkeys(entity_words))
        named = {w.lower() for w in (*entities, *acronyms)}
        focus = tuple(
            dict.fromkeys(
                w
                for w in words(strip_numbers(text))
                if w not in STOP_WORDS and w not in QUESTION_WORDS and w not in named and len(w) > 1
            )
        )
        return cls(text, question_type(text), entities, acronyms, focus)

    def key_terms(self) -> int:
        return len(self.entities) + len(self.acronyms) + len(self.focus)

    def key_stems(self) -> set[str]:
        return {stem(w) for w in (*self.entities, *self.focus)} | {a.lower() for a in self.acronyms}

    def coverage(self, text: str) -> tuple[list[str], list[str], list[str]]:
        """(entities, acronyms, focus terms) of the question found in `text`."""
        text_words = set(words(text))
        text_stems = {stem(w) for w in text_words}
        entities = [e for e in self.entities if e in text_words or stem(e) in text_stems]
        acronyms = [a for a in self.acronyms if a.lower() in text_words or acronym_in(a, text)]
        focus = [f for f in self.focus if _family_in(stem(f), text_stems)]
        return entities, acronyms, focus

    def missing_key_terms(self, text: str) -> list[str]:
        """Why `text` is not about the question ([] when it is): the key terms it lacks, if too many."""
        entities, acronyms, focus = self.coverage(text)
        missing: list[str] = []
        if self.entities and len(entities) * 2 < len(self.entities):
            missing += [e for e in self.entities if e not in entities]
        others = len(self.acronyms) + len(self.focus)
        if (others and (len(acronyms) + len(focus)) * 3 < others) or (others and not acronyms and not focus):
            missing += [a for a in self.acronyms if a not in acronyms]
            missing += [f for f in self.focus if f not in focus]
        return missing
