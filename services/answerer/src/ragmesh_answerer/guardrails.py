"""Input guardrails: empty or over-long questions, control characters and prompt-injection patterns.

Every injection rule is one named regex in `RULES` (English, German and French phrasings under the same
name); a question is refused when any fires, and the response lists which. The user turns of the chat
history are checked with the same rules, because an injection planted in an earlier turn reaches the
model through the history; a rule that fires there is reported as `history:<rule>`. Control characters
(other than tab, line feed, carriage return), NUL bytes and lone surrogates are refused anywhere
(`control_characters`). Span `guardrail` carries the rule names only, never the text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry import trace

from ragmesh_common import attributes as attr

tracer = trace.get_tracer(__name__)

_PREV = r"(?:previous|prior|above|earlier|preceding|all|any|the|your|these|those|system)"
_INSTR = r"(?:instructions?|prompts?|rules?|directions?|guidelines?|context|messages?)"
# German and French: an imperative aimed at the assistant's own instructions. The object needs a
# determiner or qualifier in front ("vergiss deine Regeln", "ignore les instructions précédentes"), so a
# question about instructions ("Wie lauten die Anweisungen zur Installation?") has no verb to match.
_DE_PREV = (
    r"(?:alle|jegliche|sämtliche|vorherigen?|vorigen?|bisherigen?|obigen?|früheren?|deine[nrs]?|ihre[nrs]?"
    r"|die|der|den|diese[nrs]?|system)"
)
_DE_INSTR = r"(?:anweisungen|anweisung|instruktionen|regeln|vorgaben|befehle|richtlinien|prompts?|systemprompt)"
_FR_PREV = r"(?:toutes|tous|les|tes|vos|ces|la|le|précédentes?|antérieures?)"
_FR_INSTR = r"(?:instructions?|consignes?|règles?|directives?|prompts?|ordres?)"

_I, _M = re.IGNORECASE, re.MULTILINE
# (name, pattern, flags). Word-bounded so ordinary questions ("what is our API key rotation policy?")
# stay allowed: the secrets rule needs a request verb aimed at the secret itself (not "tell me how to
# reset my password"), and "DAN" is matched case-sensitively (an acronym) so the name "Dan" passes.
_TABLE: list[tuple[str, str, int]] = [
    (
        "ignore_instructions",
        rf"\b(?:ignore|disregard|forget|override|bypass|skip)\s+(?:(?:all|any|of)\s+)*"
        rf"(?:{_PREV}\s+){{0,3}}{_INSTR}\b"
        rf"|\b(?:ignorier(?:e|en)?|vergiss|vergessen|missachte|übergehe|verwirf)\s+(?:sie\s+)?(?:{_DE_PREV}\s+){{1,3}}"
        rf"{_DE_INSTR}\b"
        rf"|(?<!j')(?<!je\s)\b(?:ignore[rz]?|oublie[rz]?|néglige[rz]?)\s+(?:{_FR_PREV}\s+){{1,3}}{_FR_INSTR}\b",
        _I,
    ),
    (
        "reveal_system_prompt",
        r"\b(?:reveal|show|print|display|repeat|output|tell\s+me|what\s+(?:is|are)|leak|dump)\b[^.?!\n]{0,40}"
        r"\b(?:system|hidden|initial|original|secret)\s+(?:prompt|instructions?|message)"
        r"|\b(?:zeige?|nenne|verrate|enthülle|wiederhole|gib|drucke)\b[^.?!\n]{0,40}"
        r"(?:system-?\s?prompt|system-?\s?anweisungen?|systemnachricht|versteckten?\s+(?:anweisungen|prompt))"
        r"|\b(?:révèle|montre|affiche|donne|répète|dévoile|imprime)[sz]?\b[^.?!\n]{0,40}"
        r"\b(?:prompt|instructions?|consignes?|message)\s+(?:système|systeme|cachée?s?|initiale?s?|secrète?s?)",
        _I,
    ),
    (
        "role_override",
        r"\byou\s+are\s+now\b|\bfrom\s+now\s+on\s+you\s+(?:are|will)\b"
        r"|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered)|\bpretend\s+(?:to\s+be|you\s+are)\b"
        r"|\bdu\s+bist\s+(?:jetzt|nun|ab\s+(?:jetzt|sofort))\b|\bab\s+(?:jetzt|sofort)\s+bist\s+du\b"
        r"|\btu\s+es\s+(?:maintenant|désormais|dorénavant)\b|\bvous\s+êtes\s+(?:maintenant|désormais)\b"
        r"|\bfais\s+comme\s+si\s+tu\s+étais\b",
        _I,
    ),
    (
        "jailbreak",
        r"(?i:\bjail\s*-?\s*break(?:s|ing|ed)?\b|\bdo\s+anything\s+now\b|\bdeveloper\s+mode\b|\bgod\s+mode\b)"
        r"|\bDAN\b",
        0,
    ),
    (
        "role_tags",
        r"<\|\s*(?:system|user|assistant|im_start|im_end|begin_of_text|start_header_id)\s*\|>"
        r"|^\s*#{2,}\s*(?:system|assistant|instruction)s?\b|\[/?(?:INST|SYS)\]|<</?SYS>>",
        _I | _M,
    ),
    (
        "secret_exfiltration",
        r"\b(?:print|show|reveal|give|tell|list|dump|output|leak|send|expose|display)\b"
        r"(?:\s+(?!how\b|to\b|reset|change|rotate|update|set\b|create|choose)\w+){0,4}?\s+"
        r"(?:the\s+|all\s+|your\s+|any\s+)?(?:secrets?|passwords?|api[\s_-]?keys?|credentials?|access\s+tokens?"
        r"|private\s+keys?|env(?:ironment)?\s+variables?)\b",
        _I,
    ),
]
RULES: dict[str, re.Pattern[str]] = {name: re.compile(pattern, flags) for name, pattern, flags in _TABLE}
CONTROL_RULE = "control_characters"
HISTORY_PREFIX = "history:"
_ALLOWED_CONTROLS = frozenset("\t\n\r")


@dataclass(frozen=True)
class GuardrailResult:
    allowed: bool
    reason: str = ""
    rules: list[str] = field(default_factory=list)


def check_input(question: str, max_chars: int, history: Sequence[tuple[str, str]] = ()) -> GuardrailResult:
    """Checks a user question and the chat history before it; the reason is written for the user."""
    with tracer.start_as_current_span("guardrail") as span:
        result = _check(question, max_chars, history)
        span.set_attribute(attr.RAG_GUARDRAIL_ALLOWED, result.allowed)
        span.set_attribute(attr.RAG_GUARDRAIL_RULES, result.rules)
        return result


def bad_character(text: str) -> str | None:
    """A description of the first control character, NUL or lone surrogate in `text`, or None."""
    for i, ch in enumerate(text):
        category = unicodedata.category(ch)
        if (category == "Cc" and ch not in _ALLOWED_CONTROLS) or category == "Cs":
            kind = "a NUL byte" if ch == "\0" else "a lone surrogate" if category == "Cs" else "a control character"
            return f"{kind} (U+{ord(ch):04X}) at position {i}"
    return None


def injection_rules(text: str) -> list[str]:
    return [name for name, pattern in RULES.items() if pattern.search(text)]


def _check(question: str, max_chars: int, history: Sequence[tuple[str, str]]) -> GuardrailResult:
    malformed = check_form(question, max_chars, history)
    if malformed is not None:
        return malformed
    return _check_injection(question, history)


def check_form(question: str, max_chars: int, history: Sequence[tuple[str, str]] = ()) -> GuardrailResult | None:
    """The refusal of a malformed question or history (control characters, empty, too long), or None. Not the
    guardrail (no span, no injection rules): `Answer` checks this much, `CheckInput` runs the guardrail."""
    found = bad_character(question)
    if found:
        return GuardrailResult(False, f"the question contains {found}; remove it and ask again", [CONTROL_RULE])
    for i, (_, content) in enumerate(history):
        found = bad_character(content)
        if found:
            return GuardrailResult(
                False,
                f"turn {i + 1} of the chat history contains {found}; start a new chat",
                [HISTORY_PREFIX + CONTROL_RULE],
            )
    if not question or not question.strip():
        return GuardrailResult(False, "the question is empty", ["empty"])
    if len(question) > max_chars:
        return GuardrailResult(
            False, f"the question is {len(question)} characters long; the limit is {max_chars}", ["too_long"]
        )
    return None


def _check_injection(question: str, history: Sequence[tuple[str, str]]) -> GuardrailResult:
    fired = injection_rules(question)
    if fired:
        return GuardrailResult(
            False,
            "the question looks like an attempt to override the assistant's instructions or extract secrets "
            f"({', '.join(fired)}); please rephrase it as a question about your documents",
            fired,
        )
    for i, (role, content) in enumerate(history):
        fired = injection_rules(content) if role == "user" else []
        if fired:
            return GuardrailResult(
                False,
                f"turn {i + 1} of the chat history looks like an attempt to override the assistant's "
                f"instructions or extract secrets ({', '.join(fired)}); start a new chat",
                [HISTORY_PREFIX + name for name in fired],
            )
    return GuardrailResult(True)
