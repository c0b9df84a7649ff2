"""Follow-up rewriting: turn "When was it founded?" into "When was IBM founded?" using the chat history.

Rules first (`rewrite_followup`, synchronous, no I/O): a question without an unresolved reference is left
alone; a pronoun takes the main entity of the latest user turn that names one (for he/she after a "who"
question, the first entity of the answer); an ellipsis ("What about Microsoft?") re-asks the previous
question with the new entity. `arewrite_followup` adds an optional LLM fallback, called only when a
reference was found but the rules could not resolve it; any failure keeps the original question.
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ragmesh_gateway.query.entities import extract_entities, is_name

logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 2000
LOOKBACK_TURNS = 3  # user turns searched for an antecedent
LLM_TIMEOUT_S = 3.0

_ELLIPSIS = re.compile(r"^\s*(?:and\s+)?(?:what|how)\s+about\s+(?P<a>.+?)\s*[?.!]*\s*$|"
                       r"^\s*(?:and|also|same\s+for|the\s+same\s+for|what\s+of|and\s+for|and\s+what\s+of)\s+"
                       r"(?P<b>.+?)\s*[?.!]*\s*$", re.IGNORECASE)
_PERSONAL = {"he": "", "him": "", "she": "", "his": "'s", "her": "'s"}
_NEUTER = {"it": "", "they": "", "them": "", "its": "'s", "their": "'s"}
_PRONOUN = re.compile(r"\b(it|its|they|them|their|he|him|his|she|her)\b", re.IGNORECASE)
# Expletive "it" refers to nothing: "is it possible to …", "it takes three days to …".
_EXPLETIVE_IT = re.compile(r"\bit\s+(?:is|was|'s|will be|would be)\s+(?:possible|necessary|true|likely|important|"
                           r"hard|easy|allowed|required|ok|okay|safe|better|worth)\b|\bit\s+takes?\b|"
                           r"\bis\s+it\s+(?:possible|necessary|true|ok|okay|allowed|required|safe|worth)\b",
                           re.IGNORECASE)
_DEMONSTRATIVE = re.compile(r"\b(this|that|these|those)\b(?:\s+(?P<noun>[a-z][\w-]*))?", re.IGNORECASE)
# Nouns that stand for "the thing we were talking about" after a demonstrative.
_GENERIC_NOUNS = frozenset("""
one ones thing things company companies product products person people team teams project projects document
documents report reports policy policies tool tools service services system systems version versions feature
features organization organisation organizations organisations group groups model models product item items
place city country topic case plan program programme file files
""".split())
_WH = re.compile(r"^\s*(?:tell me (?:more )?about|what (?:is|are|was|were)|who (?:is|are|was|were)|"
                 r"what about|describe|explain|how (?:does|do|did|is|are)|where (?:is|are)|when (?:is|was)|"
                 r"why (?:is|are|does|do|did))\s+", re.IGNORECASE)
_FILLER = re.compile(r"[?.!]+\s*$")


@dataclass(frozen=True)
class Rewrite:
    text: str
    rewritten: bool
    reason: str


@dataclass(frozen=True)
class _Reference:
    kind: str  # "pronoun" | "demonstrative" | "ellipsis" | ""
    detail: str = ""


def _find_reference(question: str) -> _Reference:
    m = _ELLIPSIS.match(question)
    if m:
        return _Reference("ellipsis", (m.group("a") or m.group("b") or "").strip())
    for pm in _PRONOUN.finditer(question):
        if pm.group(1).lower() == "it" and _EXPLETIVE_IT.search(question):
            continue
        return _Reference("pronoun", pm.group(1))
    for dm in _DEMONSTRATIVE.finditer(question):
        noun = (dm.group("noun") or "").lower()
        before = question[:dm.start()].rstrip()
        # "the company that makes…" is a relative clause, not a reference.
        if dm.group(1).lower() == "that" and before and re.search(r"[A-Za-z]$", before) \
                and not re.search(r"\b(is|was|about|do|did|does|of|for|with|in|on|to|and|or|than)$", before, re.I):
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
    """The previous question's noun phrase once the wh-part is removed ("What is the travel policy?")."""
    if not _WH.match(text):
        return ""
    rest = _FILLER.sub("", _WH.sub("", text, count=1)).strip()
    words = rest.split()
    return " ".join(words) if 0 < len(words) <= 6 else ""


def _antecedent(history: list[tuple[str, str]], personal: bool) -> tuple[str, str] | None:
    """(entity, the user turn it came from) — the most recent user turn that names something."""
    turns = _user_turns(history)
    for index, text in reversed(turns[-LOOKBACK_TURNS:]):
        if personal and re.match(r"^\s*who\b", text, re.IGNORECASE):
            # "Who founded IBM?" → "When was he born?": he is the answer, not IBM.
            answer = next((c for role, c in history[index + 1:] if role == "assistant" and isinstance(c, str)), "")
            names = [e for e in extract_entities(answer) if is_name(e)]
            if names:
                return names[0], text
        names = [e for e in extract_entities(text) if is_name(e)]
        if names:
            return names[0], text
        if _find_reference(text).kind:
            continue  # itself a follow-up: look further back
        topic = _topic_phrase(text)
        if topic:
            return topic, text
    return None


def _substitute_pronoun(question: str, entity: str) -> str:
    def repl(m: re.Match[str]) -> str:
        word = m.group(1).lower()
        if word == "it" and _EXPLETIVE_IT.search(question[max(0, m.start() - 4):m.end() + 20]):
            return m.group(0)
        if word == "her":
            # "her" is possessive before a noun ("her album"), objective otherwise ("married her?").
            after = question[m.end():]
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
            return entity + m.group(0)[len(m.group(1)):]
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
    return None


def _resolve(question: str, history: list[tuple[str, str]]) -> Rewrite | _Reference:
    """A finished Rewrite, or the reference the rules found but could not resolve."""
    if not isinstance(question, str) or not question.strip():
        return Rewrite(question if isinstance(question, str) else "", False, "empty question")
    if len(question) > MAX_QUESTION_CHARS:
        return Rewrite(question, False, "too long to rewrite")
    if not isinstance(history, list) or not _user_turns(history):
        return Rewrite(question, False, "no history")
    ref = _find_reference(question)
    if not ref.kind:
        names = [e for e in extract_entities(question) if is_name(e)]
        return Rewrite(question, False, "self-contained" if names else "no reference to resolve")
    if ref.kind == "ellipsis":
        text = _resolve_ellipsis(ref.detail, history)
        return Rewrite(text, True, "ellipsis") if text and text != question else ref
    personal = ref.kind == "pronoun" and ref.detail.lower() in _PERSONAL
    found = _antecedent(history, personal)
    if found is None:
        return ref
    entity, _ = found
    if ref.kind == "pronoun":
        text = _substitute_pronoun(question, entity)
    else:
        text = _substitute_demonstrative(question, entity)
    if text == question:
        return ref
    return Rewrite(text, True, f"{ref.kind} → {entity}")


def rewrite_followup(question: str, history: list[tuple[str, str]]) -> Rewrite:
    """Rewrite a follow-up question into a self-contained one by rules. Never raises."""
    try:
        result = _resolve(question, history)
    except Exception:  # noqa: BLE001 — a rewrite must never break a chat; keep the question
        logger.exception("follow-up rewrite failed; keeping the question")
        return Rewrite(question if isinstance(question, str) else "", False, "rewrite error")
    if isinstance(result, Rewrite):
        return result
    return Rewrite(question, False, f"unresolved {result.kind}")


PROMPT = ("Rewrite the last user question so that it can be understood without the conversation. Replace "
          "pronouns and references with what they refer to. Keep the language and meaning. Reply with the "
          "rewritten question only.\n\nConversation:\n{history}\n\nLast question: {question}\nRewritten question:")


def _llm_prompt(question: str, history: list[tuple[str, str]]) -> str:
    lines = [f"{role}: {content[:500]}" for role, content in history[-6:]
             if isinstance(content, str) and role in {"user", "assistant"}]
    return PROMPT.format(history="\n".join(lines), question=question)


def _clean_llm_output(output: object, question: str) -> str | None:
    if not isinstance(output, str):
        return None
    text = output.strip().splitlines()[0].strip() if output.strip() else ""
    text = re.sub(r"^(rewritten question|question)\s*:\s*", "", text, flags=re.IGNORECASE).strip().strip('"“”')
    if not text or len(text) > max(3 * len(question), len(question) + 200):
        return None
    return text


async def arewrite_followup(question: str, history: list[tuple[str, str]],
                            llm: Callable[[str], Awaitable[str]] | None = None,
                            timeout: float = LLM_TIMEOUT_S) -> Rewrite:
    """Rules first; `llm(prompt)` only when a reference was found that the rules could not resolve.

    Any LLM exception, timeout, or empty/overlong reply keeps the original question. Never raises.
    """
    rules = rewrite_followup(question, history)
    if rules.rewritten or llm is None or not rules.reason.startswith("unresolved"):
        return rules
    try:
        output = await asyncio.wait_for(llm(_llm_prompt(question, history)), timeout)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        logger.warning("follow-up rewrite: LLM timed out after %.1fs; keeping the question", timeout)
        return Rewrite(question, False, "llm timeout")
    except Exception as exc:  # noqa: BLE001 — the fallback must never fail the chat
        logger.warning("follow-up rewrite: LLM failed (%s); keeping the question", type(exc).__name__)
        return Rewrite(question, False, "llm error")
    text = _clean_llm_output(output, question)
    if text is None:
        return Rewrite(question, False, "llm output rejected")
    return Rewrite(text, text != question, "llm")
