"""What a question asks: its answer type and its key terms.

`question_type(text)`: when / what year / what time → `DATE`; how many, how much, what percentage, what is the population
(number, amount, height, length, area, capacity) of → `NUMBER`; who, "… by whom" → `PERSON` (a person or an
organisation); where, in (or of) which country/city/place, in what Australian city → `PLACE`; a request around the question
("Can you tell me who …", "Können Sie mir sagen, wann …") does not hide what it asks (`asked_question`); a question its last sentence
asks with a leading verb and no wh-word or alternative ("Are X and Y both film directors?", "Does Z also have
one?", "Ist X …?") → `YES_NO`, which no span of a document answers as such; anything else `OTHER`
(English, German, French). `Question.parse` adds the key terms: names (lower-cased words of the names the
question states), acronyms (all caps, which also match the words they abbreviate) and focus terms (the
other content words, compared by stem and word family: "government" matches "governed", and by WordNet sense:
"shipped" matches "sent", `SYNONYM_SENSES`); `coverage` and
`missing_key_terms` say how much of the question a text mentions. `options` are the alternatives a question
offers at its end ("Which band was formed first, The Exies or Circus Diablo?", "Is it abstract or
concrete?"): its answer is one of them (`offers`).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import re
from dataclasses import dataclass

import re2

from ragmesh_common.text.names import acronym_in, names
from ragmesh_common.text.numbers import strip_numbers
from ragmesh_common.text.words import (
    QUESTION_WORDS,
    STOP_WORDS,
    family_in,
    normalise,
    same_sense,
    stem,
    words,
    written_as_acronym,
)

# A focus term also counts as found when a word of the text can mean the same (`words.same_sense` in the words'
# `SYNONYM_SENSES` commonest senses: "shipped" for "sent", "established" for "founded"); 0: stems and families only.
SYNONYM_SENSES = 2


class AnswerType(enum.Enum):
    DATE = "date"
    NUMBER = "number"
    PERSON = "person"
    PLACE = "place"
    YES_NO = "yes or no"
    OTHER = "other"


_DATE_Q = re.compile(
    r"^\s*(?:when|since\s+when|wann|seit\s+wann|quand|depuis\s+quand)\b"
    r"|\b(?:what|which|in\s+what|in\s+which)\s+(?:year|date|month|day|decade|century)\b"
    r"|\bwhat\s+time\b(?!\s+zone)"
    # "What was the receipt date?", "What is the date of the merger?" (as _NUMBER_Q's "What is the population …")
    r"|\bwhat\s+(?:is|was|are|were)\s+(?:[^\W\d_][\w.-]*(?:['’]s)?\s+){0,3}?(?:date|birthday|deadline)\b(?!['’])"
    r"|\bin\s+welchem\s+jahr\b|\ben\s+quelle\s+année\b|\bà\s+quelle\s+date\b",
    re.IGNORECASE,
)
_NUMBER_Q = re.compile(
    r"\bhow\s+(?:many|much|long|old|far|big|large|often|tall|high)\b"
    r"|\bwhat\s+(?:percentage|percent|share|number|amount)\b|\bwie\s+(?:viele?|lange|alt|oft|hoch)\b"
    r"|\bwhat\s+(?:is|was|are|were)\s+(?:[^\W\d_][\w.-]*(?:['’]s)?\s+){1,3}?"
    r"(?:population|number|amount|height|length|area|capacity)\b(?!['’])"
    r"|\bcombien\b",
    re.IGNORECASE,
)
_PERSON_Q = re.compile(
    r"^\s*(?:who|whom|whose|wer|wem|wen|wessen|qui)\b|\b(?:by|with|to|for|from)\s+whom?\b", re.IGNORECASE
)
_PLACE_Q = re.compile(
    r"^\s*(?:where|wo|woher|wohin|où)\b"
    # "in which country", "of what city", "in what Australian city" ("state" only right after the wh-word:
    # "What articles state that …" asks no place)
    r"|\b(?:in|from|to|of|at|near)\s+(?:what|which)\s+"
    r"(?:state|(?:[^\W\d_]+\s+)?(?:country|city|town|region|province|county|continent|place|location|venue"
    r"|stadium|arena))\b"
    r"|^\s*(?:what|which)\s+(?:state|(?:[^\W\d_]+\s+)?(?:country|city|town|region|province|county|continent|place"
    r"|location|venue|stadium|arena))\b"
    # "What is the IBM headquarters city?", "What was the capital of Prussia?", "What is the name of the city where
    # …": the place noun heads what is asked (followed by "of", "in", "where", … or the end; not "the city council",
    # "the city's mayor" or "the city known for"); a capital only "of" something ("What is the capital?" may be money)
    r"|^\s*(?:what|which)\s+(?:is|was|are|were)\s+(?:[^\W\d_][\w.-]*\s+){1,4}?"
    r"(?:(?:country|city|town|region|province|county|continent|location|venue|stadium|arena|birthplace|hometown)"
    r"(?=\s*[?.!]*\s*$|\s+(?:of|in|on|at|for|where|that|which|whose)\b|\s*,)|capital(?=\s+of\b))",
    re.IGNORECASE,
)
# A question that asks where or when with its last word ("… and is based where?", "… was built when?"), in lower
# case. Not "who": a subject asked so ("… contractual links between who?") is as often a group or a role as a
# person (on the SQuAD tuning half, two right answers lost to the person type).
_IN_SITU = re.compile(r"\b(where|wo|où|when|wann|quand)[\s?!.]*$")
_IN_SITU_TYPE = {
    **dict.fromkeys(("where", "wo", "où"), AnswerType.PLACE),
    **dict.fromkeys(("when", "wann", "quand"), AnswerType.DATE),
}


# The verb a yes/no question opens with (English, German; French "est-ce que").
_POLAR_Q = re.compile(
    r"^\s*(?:(?:is|are|was|were|am|do|does|did|has|have|had|can|could|will|would|should|shall|may|might|must)"
    r"(?:n't)?|ist|sind|war|waren|hat|haben|hatte|hatten|kann|können|gibt|wird|werden|est-ce\s+que)\s+\w",
    re.IGNORECASE,
)
_WH = re.compile(
    r"\b(?:who|whom|whose|what|which|when|where|why|how|wer|wen|wem|was|welche[rsmn]?|wann|wo|warum|wie"
    r"|qui|que|quel(?:le)?s?|quand|où|pourquoi|comment)\b",
    re.IGNORECASE,
)
# "…, A or B?" / "… A oder B?" / "… A ou B?": the alternatives at the question's end (RE2: linear; Python's
# engine backtracks quadratically over a long run of spaces)
_ALTERNATIVE = re2.compile(r"(?i)^(.*?)\s+(?:or|oder|ou)\s+([^,;:]+?)\s*\?*\s*$")
# a choice between named things: the wh-phrase then its verb ("Which band was formed first, …", "Who is the
# oldest, …", "Which came first …"), not a wh-question that lists things ("… from the Quran, Torah or Bible?")
_CHOICE_Q = re.compile(
    r"^\s*(?:which|what|who)(?:\s+[^\W\d_]+){0,4}?\s+(?:is|are|was|were|came|comes|has|had|did|does)\b",
    re.IGNORECASE,
)
_PREPOSITIONS = frozenset(
    ["in", "of", "from", "with", "to", "for", "by", "as", "at", "on", "like", "into", "than", "between", "and"]
)
_LINKS = frozenset(["of", "the", "de", "von", "van", "der", "du", "la", "le", "and", "&"])
_TOKENS = re.compile(r"[^\s,;:?!()\"“”]+")


def _in_name(token: str) -> bool:
    """A word a name can hold: capitalised, a number, or a linking word ("of" in "Bank of America")."""
    return token[:1].isupper() or token[:1].isdigit() or token.lower() in _LINKS


def _name_run(tokens: list[str]) -> str:
    """The capitalised words `tokens` start with (linking words inside: "Bank of America"), articles aside."""
    while tokens and tokens[0].lower() in ("the", "a", "an"):
        tokens = tokens[1:]
    run: list[str] = []
    for token in tokens:
        if (token[:1].isupper() or token[:1].isdigit()) or (run and _in_name(token)):
            run.append(token)
        else:
            break
    while run and run[-1].lower() in _LINKS:
        run.pop()
    return " ".join(run)


def last_sentence(text: str) -> str:
    """The sentence that asks: "The director X has an OBE. Does Y also have one?" → "Does Y also have one?"."""
    parts = [p for p in re.split(r"(?<=[.?!])\s+(?=[A-Z\u00c0-\u00de])", text.strip()) if p.strip()]
    return parts[-1] if parts else text


def question_options(text: str) -> tuple[str, ...]:
    """The alternatives the question ends with, or (). A wh-question that chooses ("Who is the oldest, Sid Haig
    or Vic Darchinyan?") offers the names beside its "or"; a question that opens with its verb offers the
    words beside it ("Is a problem instance abstract or concrete?" → abstract, concrete)."""
    asked = last_sentence(normalise(text))
    found = _ALTERNATIVE.match(asked)
    if not found:
        return ()
    before = _TOKENS.findall(found.group(1))
    after = _TOKENS.findall(found.group(2))
    if not before or not after:
        return ()
    if _POLAR_Q.match(asked):
        left, right = before[-1].strip(".'’"), after[0].strip(".'’")
        if right.lower() in STOP_WORDS or left.lower() in STOP_WORDS:
            return ()  # "…, or would they vary?": a clause, not a word, on one side
    elif _CHOICE_Q.match(asked):
        tail = found.group(1).rsplit(",", 1)[-1]
        # the capitalised run that ends right before "or" (read backwards), and the one after it
        words_before = _TOKENS.findall(tail)
        start = len(words_before)
        while start > 0 and _in_name(words_before[start - 1]):
            start -= 1
        previous = words_before[start - 1].lower() if start > 0 else ""
        if previous in _PREPOSITIONS or tail.count("(") > tail.count(")"):
            return ()  # "… not known to exist in P or NP-complete?", "(Chartered or CPA)": no choice offered
        left, right = _name_run(words_before[start:]), _name_run(after)
    else:
        return ()
    return (left, right) if left and right and left.lower() != right.lower() else ()


# Words that ask for a summary or for the themes of a collection and say nothing about its topic ("the main themes
# in my documents about X", "Summarise what we know about Y"): the summary's topic (`Question.topic`) and the graph's
# community choice leave them out.
SUMMARY_WORDS = frozenset(
    [
        "summarise",
        "summarize",
        "summary",
        "summaries",
        "overview",
        "overviews",
        "gist",
        "brief",
        "briefly",
        "outline",
        "recap",
        "describe",
        "theme",
        "themes",
        "topic",
        "topics",
        "idea",
        "ideas",
        "issue",
        "issues",
        "subject",
        "subjects",
        "trend",
        "trends",
        "point",
        "points",
        "takeaway",
        "takeaways",
        "finding",
        "findings",
        "main",
        "key",
        "major",
        "common",
        "recurring",
        "overall",
        "central",
        "top",
        "general",
        "whole",
        "entire",
        "everything",
        "document",
        "documents",
        "file",
        "files",
        "collection",
        "corpus",
        "data",
        "source",
        "sources",
        "say",
        "says",
        "know",
        "tell",
        "give",
        "contain",  # "What does the equations document contain?": the topic is the equations
        "contains",
        "cover",
        "covers",
        "discuss",
        "discusses",
    ]
)

# Verbs a where-question uses only to ask where: they say nothing the place does not.
_PLACE_VERBS = frozenset({"located", "situated", "sited", "lie", "lies"})
# Nouns that only say what kind of answer is asked ("In what place …?" is "Where …?"): no key term.
_ASKING = re.compile(r"\b(?:what|which)\s+(\w+)", re.IGNORECASE)
_ASKING_NOUNS = {AnswerType.PLACE: frozenset({"place", "location"}), AnswerType.DATE: frozenset({"time"})}


# A request around the question ("Can you tell me who …", "Do you know where …", "Tell me when …", "Können Sie mir
# sagen, wann …", "Pouvez-vous me dire quand …"): the question is what follows it. A request to tell is one
# whatever follows ("Can you tell me about IBM?" asks no yes or no); "do you know" only before an embedded question
# ("Do you know Fresno?" is a yes/no question).
_FRAME = re.compile(
    r"^\s*(?:please\s+)?(?:(?P<tell>"
    r"(?:can|could|would|will)\s+(?:you|anyone|someone)\s+(?:please\s+)?(?:tell|show|explain\s+to)\s+(?:me|us)"
    r"|(?:tell|show)\s+(?:me|us)(?:\s+please)?"
    r"|(?:können|könnten|kannst|könntest)\s+(?:sie|du)\s+mir\s+(?:bitte\s+)?sagen|(?:sagen\s+sie|sag)\s+mir(?:\s+bitte)?"
    r"|(?:pouvez|pourriez)-vous\s+me\s+dire|(?:peux|pourrais)-tu\s+me\s+dire|(?:dites|dis)-moi"
    r")|(?:do|does)\s+(?:you|anyone|someone)\s+know|i(?:\s+would|['’]d)\s+like\s+to\s+know"
    r"|i\s+(?:want|need)\s+to\s+know|i\s+wonder(?:ed)?|wissen\s+sie|weißt\s+du|savez-vous|sais-tu"
    r")\s*[,:]?\s+(?=\w)",
    re.IGNORECASE,
)
# What an embedded yes/no question opens with after its frame ("Do you know if …", "… ob …", "… si …").
_EMBEDDED_POLAR = re.compile(r"^(?:if|whether|ob|si|s')\b", re.IGNORECASE)


# A superlative that asks for a table's row with the largest or the smallest value of a column ("Which product had
# the highest revenue?"): the answerer's `tables.extreme` reads it, the gateway's table step gives it the whole table.
MOST_WORDS = frozenset({"most", "highest", "largest", "greatest", "biggest", "maximum"})
LEAST_WORDS = frozenset({"least", "lowest", "smallest", "fewest", "minimum"})


def superlative(text: str) -> str | None:
    """ "most" when `text` asks for the largest (`MOST_WORDS`), "least" for the smallest, else None (neither, or
    both)."""
    said = set(words(text))
    most, least = bool(said & MOST_WORDS), bool(said & LEAST_WORDS)
    return None if most == least else ("most" if most else "least")


# The words that open a question for a count of things ("How many customers are from Chile?"; not "how much"): the
# answerer's `tables.count` counts a table's rows for it, the gateway's table step gives it the whole table.
HOW_MANY = frozenset({("how", "many"), ("wie", "viele")})


def asks_how_many(text: str) -> bool:
    """`text` asks how many (`HOW_MANY`: two words in a row, any case), the request around it aside."""
    said = words(asked_question(normalise(text)))
    return any(pair in HOW_MANY for pair in itertools.pairwise(said))


def asked_question(text: str) -> str:
    """`text` without a request around it: "Can you tell me who founded IBM?" → "who founded IBM?"."""
    found = _FRAME.match(text)
    if not found:
        return text
    rest = text[found.end() :]
    if found.group("tell") or _EMBEDDED_POLAR.match(rest) or _WH.match(rest):
        return rest
    return text


def question_type(text: str) -> AnswerType:
    text = normalise(text).strip()
    framed = asked_question(text)
    if framed != text and _EMBEDDED_POLAR.match(framed):
        return AnswerType.YES_NO
    text = framed
    asked = last_sentence(text)
    if _POLAR_Q.match(asked) and not _WH.search(asked) and not _ALTERNATIVE.match(asked):
        return AnswerType.YES_NO
    if _DATE_Q.search(text):
        return AnswerType.DATE
    if _NUMBER_Q.search(text):
        return AnswerType.NUMBER
    if _PERSON_Q.search(text):
        return AnswerType.PERSON
    if _PLACE_Q.search(text):
        return AnswerType.PLACE
    if found := _IN_SITU.search(asked):
        return _IN_SITU_TYPE[found.group(1)]
    return AnswerType.OTHER


@dataclass(frozen=True)
class Question:
    text: str
    answer_type: AnswerType
    entities: tuple[str, ...]  # name words of the question (lowercase)
    acronyms: tuple[str, ...]  # all-caps tokens, which also match the words they abbreviate
    focus: tuple[str, ...]  # the other key terms (compared by stem)
    options: tuple[str, ...] = ()  # the alternatives it offers ("…, A or B?"): the answer is one of them

    @classmethod
    def parse(cls, question: str) -> Question:
        text = normalise(question).strip()
        asked = asked_question(text)  # the request around it is no key term ("tell", "sagen", "dire")
        raw_names = [n for n in names(asked) if n.lower() not in QUESTION_WORDS or written_as_acronym(n, asked)]
        acronyms = tuple(dict.fromkeys(n for n in raw_names if n.isupper() and 2 <= len(n) <= 6))
        entity_words = [w for n in raw_names if n not in acronyms for w in words(n) if len(w) >= 2]
        entities = tuple(dict.fromkeys(entity_words))
        named = {w.lower() for w in (*entities, *acronyms)}
        focus = tuple(
            dict.fromkeys(
                w
                for w in words(strip_numbers(asked))
                if w not in STOP_WORDS and w not in QUESTION_WORDS and w not in named and len(w) > 1
            )
        )
        kind = question_type(text)
        if kind is AnswerType.PLACE:  # "Where is X located?": "where" asks it, the sentence may just say "X in Y"
            focus = tuple(w for w in focus if w not in _PLACE_VERBS)
        asking = _ASKING_NOUNS.get(kind)
        if asking and (found := _ASKING.search(asked)) and found.group(1).lower() in asking:
            focus = tuple(w for w in focus if w != found.group(1).lower())  # "in what place", "at what time"
        return cls(text, kind, entities, acronyms, focus, question_options(text))

    def offers(self, answer: str) -> bool:
        """`answer` is one of the question's options (any answer, when it offers none)."""
        return not self.options or self.option_of(answer) is not None

    def option_of(self, answer: str) -> str | None:
        """The option `answer` names: the one it shares a word with, when that is exactly one ("Nick Hexum" for
        the option "Nick Hexum"; not "Mark King or Nick Hexum"); words all options share tell none apart."""
        said = {stem(w) for w in words(answer) if w not in STOP_WORDS}
        stems = [{stem(w) for w in words(o) if w not in STOP_WORDS} for o in self.options]
        shared = set.intersection(*stems) if stems else set()  # "voltage" of "high-voltage or low-voltage"
        matching = [o for o, own in zip(self.options, stems, strict=True) if said & (own - shared)]
        return matching[0] if len(matching) == 1 else None

    def topic(self) -> Question:
        """The question without the key terms that only ask for a summary or the themes of a collection
        ("Summarise what we know about IBM", "the main themes in my documents about X": `SUMMARY_WORDS`)."""
        return dataclasses.replace(self, focus=tuple(f for f in self.focus if f not in SUMMARY_WORDS))

    def about(self, text: str) -> bool:
        """`text` names one of the question's key terms (any text, when it has none)."""
        entities, acronyms, focus = self.coverage(text)
        return not self.key_terms() or bool(entities or acronyms or focus)

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
        focus = [f for f in self.focus if family_in(stem(f), text_stems) or self._synonym_in(f, text_words)]
        return entities, acronyms, focus

    def _synonym_in(self, term: str, text_words: set[str]) -> bool:
        return any(same_sense(term, w, SYNONYM_SENSES) for w in text_words)  # stop words have no senses

    def says(self, word: str) -> bool:
        """`word` may mean one of the focus terms (`SYNONYM_SENSES`; a word of their family is a key stem already)."""
        w = word.lower()
        return any(same_sense(f, w, SYNONYM_SENSES) for f in self.focus)

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
