"""Follow-up rewriting: turn "When was it founded?" into "When was IBM founded?" using the chat history.

Rules first (`rewrite_followup`, synchronous, no I/O): a question without an unresolved reference is left
alone; a pronoun takes the main entity of the latest user turn that names one (for he/she after a "who"
question, the first entity of the answer — a stored turn's answer opens with its short answer); personal and
other pronouns stand for different things ("When did he patent it?": he is the answer, it what was asked about); an ellipsis ("What about Microsoft?") re-asks the previous
question with the new entity; "there" takes the last place named in the history (user questions and
assistant answers), "then" / "that year" / "at that time" the last date; a leading "And" / "But" / "So" /
"Also" before a full question is dropped. `arewrite_followup` adds an LLM fallback (the answerer's `Rewrite`
rpc), called only when a reference was found that the rules could not resolve; any failure keeps the rule
result and says why in `Rewrite.degraded`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import re2

from ragmesh_common.text.entities import STOP_CAPS, extract_entities, is_name

logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 2000
LOOKBACK_TURNS = 3  # user turns searched for an antecedent
LLM_TIMEOUT_S = 3.0

_ELLIPSIS = re.compile(
    r"^\s*(?:and\s+)?(?:what|how)\s+about\s+(?P<a>.+?)\s*[?.!]*\s*$|"
    r"^\s*(?:and|also|same\s+for|the\s+same\s+for|what\s+of|and\s+for|and\s+what\s+of)\s+"
    r"(?P<b>.+?)\s*[?.!]*\s*$",
    re.IGNORECASE,
)
_PERSONAL = {"he": "", "him": "", "she": "", "his": "'s", "her": "'s"}
_NEUTER = {"it": "", "they": "", "them": "", "its": "'s", "their": "'s"}
_PRONOUN = re.compile(r"\b(it|its|they|them|their|he|him|his|she|her)\b", re.IGNORECASE)
# Expletive "it" refers to nothing: "is it possible to …", "it takes three days to …".
_EXPLETIVE_IT = re.compile(
    r"\bit\s+(?:is|was|'s|will be|would be)\s+(?:possible|necessary|true|likely|important|"
    r"hard|easy|allowed|required|ok|okay|safe|better|worth)\b|\bit\s+takes?\b|"
    r"\bis\s+it\s+(?:possible|necessary|true|ok|okay|allowed|required|safe|worth)\b",
    re.IGNORECASE,
)
_DEMONSTRATIVE = re.compile(r"\b(this|that|these|those)\b(?:\s+(?P<noun>[a-z][\w-]*))?", re.IGNORECASE)
# Nouns that stand for "the thing we were talking about" after a demonstrative.
_GENERIC_NOUNS = frozenset(
    [
        "one",
        "ones",
        "thing",
        "things",
        "company",
        "companies",
        "product",
        "products",
        "person",
        "people",
        "team",
        "teams",
        "project",
        "projects",
        "document",
        "documents",
        "report",
        "reports",
        "policy",
        "policies",
        "tool",
        "tools",
        "service",
        "services",
        "system",
        "systems",
        "version",
        "versions",
        "feature",
        "features",
        "organization",
        "organisation",
        "organizations",
        "organisations",
        "group",
        "groups",
        "model",
        "models",
        "product",
        "item",
        "items",
        "place",
        "city",
        "country",
        "topic",
        "case",
        "plan",
        "program",
        "programme",
        "file",
        "files",
    ]
)
_WH = re.compile(
    r"^\s*(?:tell me (?:more )?about|what (?:is|are|was|were)|who (?:is|are|was|were)|"
    r"what about|describe|explain|how (?:does|do|did|is|are)|where (?:is|are)|when (?:is|was)|"
    r"why (?:is|are|does|do|did))\s+",
    re.IGNORECASE,
)
_FILLER = re.compile(r"[?.!]+\s*$")
# a participle (and its preposition) that ends a question's topic: "made of", "used for", "called"
# (a word in -ed only with its preposition: "the shed" is a noun)
_TRAILING_VERB = re2.compile(
    r"\s+(?:(?:[a-z]+ed|made|done|built|known|seen|found|written|given|taken|sold|grown|worn|held|meant)"
    r"\s+(?:of|for|in|on|by|with|from|to|at|about|as|into)|called|named|made|used|based|known|sold|held)$"
)
# "when / where / why / how was X <participle>?": the question's last word is the verb, never the topic's
_ASKS_CIRCUMSTANCE = re2.compile(r"(?i)^\s*(?:when|where|why|how)\s+(?:is|are|was|were)\s")
_TRAILING_PARTICIPLE = re2.compile(r"\s+[a-z]+(?:ed|en|wn|ld|lt|ught)$")
# "the first one", "the second", "the latter", "the last one": an item of the previous answer's list
# (followed by "one", or by the end of the question or a verb: "the first car" is no reference); `one` or `bare`
# is what is replaced, `which` or `alone` the ordinal
_ORDINALS = "first|second|third|fourth|fifth|sixth|last|former|latter"
_ORDINAL = re2.compile(
    rf"(?i)\b(?P<one>the\s+(?P<which>{_ORDINALS})\s+ones?)\b"
    rf"|\b(?P<bare>the\s+(?P<alone>{_ORDINALS}))"
    r"(?:\s*[?.!,]|\s*$|\s+(?:is|was|are|were|has|have|had|do|does|did|made|used|called|mean|means)\b)"
)
_ORDINAL_POSITION = {
    "first": 0,
    "former": 0,
    "second": 1,
    "third": 2,
    "fourth": 3,
    "fifth": 4,
    "sixth": 5,
    "last": -1,
    "latter": -1,
}
_CITED = re2.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
# the list an answer's sentence ends with: after "are", "is", "include(s)" or a colon
_LIST_LEAD = re2.compile(r"(?i)(?:\b(?:are|is|were|was|include|includes|including)\b|:)\s+(?P<items>[^:]+)$")
_LIST_SPLIT = re2.compile(r"(?i)\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+")
_SENTENCE_END = re2.compile(r"[.!?]\s")
# "And when did it move there?": a conjunction before a full question (not an ellipsis like "And Microsoft?").
_LEADING_CONJ = re.compile(
    r"^\s*(?:and|but|so|also|plus|ok(?:ay)?|well)\b(?:\s*,\s+|\s+)(?=(?:what|when|where|who|whom|whose|"
    r"which|why|how|is|are|was|were|do|does|did|can|could|will|would|has|have|had|should|tell|"
    r"give|list|name|describe|explain|show)\b)",
    re.IGNORECASE,
)
# "there" as a place; not the expletive "is there …" / "there is …".
_THERE = re.compile(
    r"\bthere\b(?!\s+(?:is|are|was|were|be|been|being|'s|’s|exists?|seems?|remains?|will|would|"
    r"might|must|may|could|should|has|have|had)\b)",
    re.IGNORECASE,
)
_THERE_EXPLETIVE = re.compile(r"\b(?:is|are|was|were|be|been|will|would|could|can)\s+$", re.IGNORECASE)
_MOTION = re.compile(
    r"\b(?:move|moves|moved|moving|go|goes|went|going|gone|come|comes|came|coming|travel\w*|"
    r"relocat\w*|return\w*|get|got|send|sent|expand\w*|arriv\w*)\s+$",
    re.IGNORECASE,
)
_CAP_PHRASE = r"[A-Z][\w'’.-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w'’.-]*)*(?:,\s+[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)?"
_PLACE = re.compile(r"\b(?:in|at|to|from|near|into|toward|towards|outside|inside)\s+(?:the\s+)?(" + _CAP_PHRASE + ")")
_TIME = re.compile(
    r"\b(?:back then|at that time|at the time|in that year|that year|during that time|by then|"
    r"then(?=\s*(?:[?.!,;]|$)))",
    re.IGNORECASE,
)
_MONTHS = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE = re.compile(
    rf"\b(?:{_MONTHS}\s+\d{{1,2}},?\s+\d{{4}}|\d{{1,2}}\s+{_MONTHS}\s+\d{{4}}|{_MONTHS}\s+\d{{4}}|"
    r"(?<![\w.$€£-])(?:1[5-9]\d\d|20\d\d)(?![\w%]))"
)


# a phrase led by an article, up to five more words, and the end of a question
_ARTICLE_PHRASE = re2.compile(r"(?i)(?:the|a|an)\s+[\w'’-]+(?:\s+[\w'’-]+){0,4}")
# "Who invented the dial recorder?": who / what / which, the verb (past tense or a common one), its object to the end
_LAST_ARTICLE_PHRASE = re2.compile(
    r"(?i)^\s*(?:who|what|which)\s+(?:[a-z]+ed|wrote|made|built|led|won|bought|sold|took|gave|began|drew|ran|"
    r"owns|runs|leads|makes|builds|writes|sells|designs|invents|founds)\s+"
    r"(?P<phrase>(?:the|a|an)\s+(?:[\w'’-]+\s+){0,4}(?P<last>[\w'’-]+))\s*[?.!]*\s*$"
)


@dataclass(frozen=True)
class Rewrite:
    text: str
    rewritten: bool
    reason: str
    degraded: str = ""  # the LLM fallback was needed but failed: why (the rule result stands)


@dataclass(frozen=True)
class _Reference:
    kind: str  # "pronoun" | "demonstrative" | "ellipsis" | ""
    detail: str = ""


def _find_reference(question: str) -> _Reference:
    m = _ELLIPSIS.match(question)
    if m:
        return _Reference("ellipsis", (m.group("a") or m.group("b") or "").strip())
    om = _ORDINAL.search(question)
    if om:
        return _Reference("ordinal", om.group("one") or om.group("bare"))
    for pm in _PRONOUN.finditer(question):
        if pm.group(1).lower() == "it" and _EXPLETIVE_IT.search(question):
            continue
        return _Reference("pronoun", pm.group(1))
    for dm in _DEMONSTRATIVE.finditer(question):
        noun = (dm.group("noun") or "").lower()
        before = question[: dm.start()].rstrip()
        # "the company that makes…" is a relative clause, not a reference.
        if (
            dm.group(1).lower() == "that"
            and before
            and re.search(r"[A-Za-z]$", before)
            and not re.search(r"\b(is|was|about|do|did|does|of|for|with|in|on|to|and|or|than)$", before, re.I)
        ):
            continue
        if not noun or noun in _GENERIC_NOUNS or noun in {"is", "was", "are", "were", "does", "do", "did", "has"}:
            return _Reference("demonstrative", dm.group(0))
    return _Reference("")


def _user_turns(history: list[tuple[str, str]]) -> list[tuple[int, str]]:
    out = []
    for i, turn in enumerate(history):
        if isinstance(turn, (tuple, list)) and len(turn) == 2 and turn[0] == "user" and isinstance(turn[1], str):
            out.append((i, turn[1][:MAX_QUESTION_CHARS]))
    return out


def _topic_phrase(text: str) -> str:
    """The previous question's noun phrase once the wh-part is removed ("What is the travel policy?"), without a
    participle and its preposition after it ("What is the Boots nut made of?" → "the Boots nut"); "" when the
    phrase is itself a reference ("What is the first one made of?" names nothing)."""
    if not _WH.match(text):
        return ""
    rest = _TRAILING_VERB.sub("", _FILLER.sub("", _WH.sub("", text, count=1)).strip())
    if _ASKS_CIRCUMSTANCE.match(text):  # "When was the typewriter introduced?": the participle is no topic
        rest = _TRAILING_PARTICIPLE.sub("", rest)
    words = rest.split()
    if _ORDINAL.search(rest) or any(w.lower() in _NEUTER or w.lower() in _PERSONAL for w in words):
        return ""
    return " ".join(words) if 0 < len(words) <= 6 else ""


def _ordinal_item(reference: str, history: list[tuple[str, str]]) -> str | None:
    """The item of the latest answer's list that "the first one", "the second", "the latter" or "the last one"
    points at: the answer's first sentence ends with a list of 2–6 short items after "are", "is", "include" or a
    colon ("… are the all-metal type and the fiber lock type." → "the all-metal type", "the fiber lock type");
    None without such an answer or with too few items."""
    answer = next(
        (c for role, c in reversed(history) if role == "assistant" and isinstance(c, str) and c.strip()), None
    )
    if answer is None:
        return None
    text = answer.strip()[:MAX_QUESTION_CHARS]
    end = _SENTENCE_END.search(text)
    first = _CITED.sub("", text[: end.start() + 1] if end else text)
    found = _LIST_LEAD.search(first)
    if found is None:
        return None
    listed: str = found.group("items")
    items = [str(i).strip() for i in _LIST_SPLIT.split(listed.strip().rstrip(".!?")) if str(i).strip()]
    if not 2 <= len(items) <= 6 or any(len(i.split()) > 6 for i in items):
        return None
    word = _ORDINAL.search(reference)
    position = _ORDINAL_POSITION[(word.group("which") or word.group("alone")).lower()] if word else None
    if position is None or position >= len(items):
        return None
    return items[position]


def _antecedent(history: list[tuple[str, str]], personal: bool, exclude: str = "") -> tuple[str, str] | None:
    """(entity, the user turn it came from) — the most recent user turn that names something (not `exclude`, what
    another pronoun of the question already stands for)."""
    turns = _user_turns(history)
    for index, text in reversed(turns[-LOOKBACK_TURNS:]):
        if personal and re.match(r"^\s*who\b", text, re.IGNORECASE):
            # "Who founded IBM?" → "When was he born?": he is the answer, not IBM.
            answer = next((c for role, c in history[index + 1 :] if role == "assistant" and isinstance(c, str)), "")
            names = [e for e in extract_entities(answer) if is_name(e) and e != exclude]
            if names:
                return names[0], text
        names = [e for e in extract_entities(text) if is_name(e) and e != exclude]
        if names:
            return names[0], text
        if _find_reference(text).kind:
            continue  # itself a follow-up: look further back
        topic = _topic_phrase(text)
        if topic:
            return topic, text
    for role, content in reversed(history):  # no user turn names anything: the latest answer's first name
        if role == "assistant" and isinstance(content, str):
            names = [e for e in extract_entities(content[:MAX_QUESTION_CHARS]) if is_name(e)]
            return (names[0], content) if names else None
    return None


def _turn_texts(history: list[tuple[str, str]]) -> list[str]:
    """User questions and assistant answers, most recent first."""
    return [
        turn[1][:MAX_QUESTION_CHARS]
        for turn in reversed(history)
        if isinstance(turn, (tuple, list)) and len(turn) == 2 and isinstance(turn[1], str)
    ]


def _last_place(history: list[tuple[str, str]], exclude: str = "") -> str | None:
    """The last place named in the history: a capitalised name after a locative preposition."""
    for text in _turn_texts(history):
        places = [m.group(1).rstrip(".") for m in _PLACE.finditer(text)]
        places = [
            p
            for p in places
            if is_name(p)
            and p.lower() != exclude.lower()
            and not _DATE.fullmatch(p)
            and p.split()[0].lower() not in STOP_CAPS
        ]
        if places:
            return places[-1]
    return None


def _last_date(history: list[tuple[str, str]]) -> str | None:
    for text in _turn_texts(history):
        dates = [m.group(0) for m in _DATE.finditer(text)]
        if dates:
            return dates[-1]
    return None


def _resolve_place_and_time(text: str, history: list[tuple[str, str]], entity: str) -> tuple[str, list[str]] | None:
    """`text` with "there" and "then"/"that year" resolved; None when one is present and cannot be."""
    done: list[str] = []
    m = next((m for m in _THERE.finditer(text) if not _THERE_EXPLETIVE.search(text[: m.start()])), None)
    if m is not None:
        place = _last_place(history, exclude=entity)
        if place is None:
            return None
        prep = "to" if _MOTION.search(text[: m.start()]) else "in"
        text = text[: m.start()] + f"{prep} {place}" + text[m.end() :]
        done.append(f"there → {place}")
    m = _TIME.search(text)
    if m:
        date = _last_date(history)
        if date is None:
            return None
        prep = "in" if re.fullmatch(r"\d{4}|" + _MONTHS + r"\s+\d{4}", date) else "on"
        text = text[: m.start()] + f"{prep} {date}" + text[m.end() :]
        done.append(f"time → {date}")
    return text, done


def _substitute_pronoun(question: str, entity: str, personal: bool) -> str:
    """`question` with its personal (he, she, …) or its other (it, they, …) pronouns standing for `entity`: "When
    did he patent it?" names two things."""

    def repl(m: re.Match[str]) -> str:
        word = m.group(1).lower()
        if (word in _PERSONAL) != personal:
            return m.group(0)
        if word == "it" and _EXPLETIVE_IT.search(question[max(0, m.start() - 4) : m.end() + 20]):
            return m.group(0)
        if word == "her":
            # "her" is possessive before a noun ("her album"), objective otherwise ("married her?").
            after = question[m.end() :]
            return entity + ("'s" if re.match(r"\s+[a-z]", after) else "")
        suffix = {**_PERSONAL, **_NEUTER}[word]
        return entity + suffix

    return _PRONOUN.sub(repl, question)


def _substitute_demonstrative(question: str, entity: str) -> str:
    def repl(m: re.Match[str]) -> str:
        noun = (m.group("noun") or "").lower()
        if noun in _GENERIC_NOUNS:
            return entity
        if not noun or noun in {"is", "was", "are", "were", "does", "do", "did", "has"}:
            return entity + m.group(0)[len(m.group(1)) :]
        return m.group(0)

    return _DEMONSTRATIVE.sub(repl, question, count=1)


def _resolve_ellipsis(new: str, history: list[tuple[str, str]]) -> str | None:
    """Re-ask the previous question about `new`: the old entity of the same sort (name or year) is swapped."""
    turns = _user_turns(history)
    if not turns or not new:
        return None
    previous = turns[-1][1].strip()
    new_entities = extract_entities("about " + new)  # a fragment: its first word is no sentence start
    old_entities = extract_entities(previous)
    if new_entities:
        replacement = new_entities[0]
        same_sort = [e for e in old_entities if is_name(e) == is_name(replacement)]
        if same_sort:
            return re.sub(re.escape(same_sort[0]), lambda _: replacement, previous, count=1)
        if not is_name(replacement):
            return None
    elif any(is_name(e) for e in old_entities):
        return None  # "What about the price?" after "When was IBM founded?": no rule knows what to swap
    topic = _topic_phrase(previous)
    if topic:
        return previous.replace(topic, new, 1)
    return _swap_object(previous, new)


def _swap_object(previous: str, new: str) -> str | None:
    """ "And the time clock?" after "Who invented the dial recorder?": a new phrase with an article takes the place
    of the object a who / what question ends with ("Who invented the time clock?"); None when the new phrase has
    no article or the previous question is not of that shape ("What does a goose eat?" ends with its verb)."""
    if not _ARTICLE_PHRASE.fullmatch(new.strip()):
        return None
    found = _LAST_ARTICLE_PHRASE.search(previous)
    if found is None or found.group("last").lower().endswith("ed"):
        return None
    return previous[: found.start(1)] + new.strip() + previous[found.end(1) :]


def _resolve(question: str, history: list[tuple[str, str]]) -> Rewrite | _Reference:
    """A finished Rewrite, or the reference the rules found but could not resolve."""
    if not isinstance(question, str) or not question.strip():
        return Rewrite(question if isinstance(question, str) else "", False, "empty question")
    if len(question) > MAX_QUESTION_CHARS:
        return Rewrite(question, False, "too long to rewrite")
    if not isinstance(history, list) or not _user_turns(history):
        return Rewrite(question, False, "no history")
    base = question
    conj = _LEADING_CONJ.match(question)
    if conj:
        rest = question[conj.end() :]
        base = rest[:1].upper() + rest[1:]
    reasons = ["leading conjunction"] if conj else []
    ref = _find_reference(base)
    entity = ""
    text = base
    if ref.kind == "ellipsis":
        resolved = _resolve_ellipsis(ref.detail, history)
        if not resolved or resolved == question:
            return ref
        return Rewrite(resolved, True, "ellipsis")
    if ref.kind == "ordinal":
        item = _ordinal_item(ref.detail, history)
        if item is None:
            return ref
        text = base.replace(ref.detail, item, 1)
        reasons.append(f"{ref.detail} → {item}")
    elif ref.kind:
        personal = ref.kind == "pronoun" and ref.detail.lower() in _PERSONAL
        found = _antecedent(history, personal)
        if found is None:
            return ref
        entity = found[0]
        if ref.kind == "pronoun":
            text = _substitute_pronoun(base, entity, personal)
        else:
            text = _substitute_demonstrative(base, entity)
        if text == base:
            return ref
        reasons.append(f"{ref.kind} → {entity}")
        other = _find_reference(text) if ref.kind == "pronoun" else _Reference("")
        if other.kind == "pronoun" and (other.detail.lower() in _PERSONAL) != personal:
            second = _antecedent(history, not personal, exclude=entity)
            if second is not None:  # "it" of "When did he patent it?": the thing the who-question asked about
                text = _substitute_pronoun(text, second[0], not personal)
                reasons.append(f"pronoun → {second[0]}")
    placed = _resolve_place_and_time(text, history, entity)
    if placed is None:
        return _Reference("place or time", text)
    text, done = placed
    reasons += done
    if text == question:
        names = [e for e in extract_entities(question) if is_name(e)]
        return Rewrite(question, False, "self-contained" if names else "no reference to resolve")
    return Rewrite(text, True, "; ".join(reasons))


def rewrite_followup(question: str, history: list[tuple[str, str]]) -> Rewrite:
    """Rewrite a follow-up question into a self-contained one by rules. Never raises."""
    try:
        result = _resolve(question, history)
    except Exception:  # a rewrite must never break a chat; keep the question
        logger.exception("follow-up rewrite failed; keeping the question")
        return Rewrite(question if isinstance(question, str) else "", False, "rewrite error")
    if isinstance(result, Rewrite):
        return result
    if result.kind == "place or time":  # the pronoun may be resolved already: that part stands
        return Rewrite(result.detail, result.detail != question, "unresolved place or time")
    return Rewrite(question, False, f"unresolved {result.kind}")


async def arewrite_followup(
    question: str,
    history: list[tuple[str, str]],
    llm: Callable[[str, list[tuple[str, str]]], Awaitable[str]] | None = None,
    timeout: float = LLM_TIMEOUT_S,
) -> Rewrite:  # passed to asyncio.wait_for around the LLM only
    """Rules first; `llm(question, history)` only when a reference was found that the rules could not resolve.

    Any LLM exception, timeout, or empty/overlong reply keeps the rule result and sets `degraded`. Never raises.
    """
    rules = rewrite_followup(question, history)
    if llm is None or not rules.reason.startswith("unresolved"):
        return rules
    try:
        output = await asyncio.wait_for(llm(question, history), timeout)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        logger.warning("follow-up rewrite: LLM timed out after %.1fs; keeping the question", timeout)
        return Rewrite(
            rules.text, rules.rewritten, rules.reason, degraded=f"rewrite model timed out after {timeout:g}s"
        )
    except Exception as exc:  # noqa: BLE001 - the fallback must never fail the chat
        logger.warning("follow-up rewrite: LLM failed (%s); keeping the question", type(exc).__name__)
        detail = exc.code().name if hasattr(exc, "code") and callable(exc.code) else type(exc).__name__
        return Rewrite(rules.text, rules.rewritten, rules.reason, degraded=f"rewrite model failed ({detail})")
    text = _clean_llm_output(output, question)
    if text is None:
        return Rewrite(rules.text, rules.rewritten, "llm output rejected")
    return Rewrite(text, text != question, "llm")


def _clean_llm_output(output: object, question: str) -> str | None:
    if not isinstance(output, str):
        return None
    text = output.strip().splitlines()[0].strip() if output.strip() else ""
    text = re.sub(r"^(rewritten question|question)\s*:\s*", "", text, flags=re.IGNORECASE).strip().strip('"“”')
    if not text or len(text) > max(3 * len(question), len(question) + 200):
        return None
    return text
