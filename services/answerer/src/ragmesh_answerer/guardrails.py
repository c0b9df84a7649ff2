"""Input guardrails: empty or over-long questions and prompt-injection patterns.

Every rule is one named, case-insensitive regex in `RULES`; a question is refused when any fires,
and the response lists which. Span `guardrail` carries the rule names only, never the text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from opentelemetry import trace
from ragmesh_common import attributes as attr

tracer = trace.get_tracer(__name__)

_PREV = r"(?:previous|prior|above|earlier|preceding|all|any|the|your|these|those|system)"
_INSTR = r"(?:instructions?|prompts?|rules?|directions?|guidelines?|context|messages?)"

_I, _M = re.IGNORECASE, re.MULTILINE
# (name, pattern, flags). Word-bounded so ordinary questions ("what is our API key rotation policy?")
# stay allowed: the secrets rule needs a request verb aimed at the secret itself (not "tell me how to
# reset my password"), and "DAN" is matched case-sensitively (an acronym) so the name "Dan" passes.
_TABLE: list[tuple[str, str, int]] = [
    ("ignore_instructions",
     rf"\b(?:ignore|disregard|forget|override|bypass|skip)\s+(?:(?:all|any|of)\s+)*"
     rf"(?:{_PREV}\s+){{0,3}}{_INSTR}\b", _I),
    ("reveal_system_prompt",
     r"\b(?:reveal|show|print|display|repeat|output|tell\s+me|what\s+(?:is|are)|leak|dump)\b[^.?!\n]{0,40}"
     r"\b(?:system|hidden|initial|original|secret)\s+(?:prompt|instructions?|message)", _I),
    ("role_override",
     r"\byou\s+are\s+now\b|\bfrom\s+now\s+on\s+you\s+(?:are|will)\b"
     r"|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered)|\bpretend\s+(?:to\s+be|you\s+are)\b", _I),
    ("jailbreak",
     r"(?i:\bjail\s*-?\s*break(?:s|ing|ed)?\b|\bdo\s+anything\s+now\b|\bdeveloper\s+mode\b|\bgod\s+mode\b)"
     r"|\bDAN\b", 0),
    ("role_tags",
     r"<\|\s*(?:system|user|assistant|im_start|im_end|begin_of_text|start_header_id)\s*\|>"
     r"|^\s*#{2,}\s*(?:system|assistant|instruction)s?\b|\[/?(?:INST|SYS)\]|<</?SYS>>", _I | _M),
    ("secret_exfiltration",
     r"\b(?:print|show|reveal|give|tell|list|dump|output|leak|send|expose|display)\b"
     r"(?:\s+(?!how\b|to\b|reset|change|rotate|update|set\b|create|choose)\w+){0,4}?\s+"
     r"(?:the\s+|all\s+|your\s+|any\s+)?(?:secrets?|passwords?|api[\s_-]?keys?|credentials?|access\s+tokens?"
     r"|private\s+keys?|env(?:ironment)?\s+variables?)\b", _I),
]
RULES: dict[str, re.Pattern[str]] = {name: re.compile(pattern, flags) for name, pattern, flags in _TABLE}


@dataclass(frozen=True)
class GuardrailResult:
    allowed: bool
    reason: str = ""
    rules: list[str] = field(default_factory=list)


def check_input(question: str, max_chars: int) -> GuardrailResult:
    """Checks a user question; the reason is written for the user."""
    with tracer.start_as_current_span("guardrail") as span:
        result = _check(question, max_chars)
        span.set_attribute(attr.RAG_GUARDRAIL_ALLOWED, result.allowed)
        span.set_attribute(attr.RAG_GUARDRAIL_RULES, result.rules)
        return result


def _check(question: str, max_chars: int) -> GuardrailResult:
    if not question or not question.strip():
        return GuardrailResult(False, "the question is empty", ["empty"])
    if len(question) > max_chars:
        return GuardrailResult(False, f"the question is {len(question)} characters long; the limit is {max_chars}",
                               ["too_long"])
    fired = [name for name, pattern in RULES.items() if pattern.search(question)]
    if fired:
        return GuardrailResult(
            False, "the question looks like an attempt to override the assistant's instructions or extract secrets "
            f"({', '.join(fired)}); please rephrase it as a question about your documents", fired)
    return GuardrailResult(True)
