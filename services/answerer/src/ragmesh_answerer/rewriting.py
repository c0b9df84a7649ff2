"""Follow-up rewriting with the answer model: the gateway's fallback when its rules cannot resolve a reference.

One short, deterministic generation (temperature 0, a few dozen tokens). The reply's first line is the
question; a reply that is empty, overlong or a refusal keeps the original question (`rewritten=False`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from ragmesh_answerer.guardrails import injection_rules
from ragmesh_answerer.llm import ChatModel, Generation
from ragmesh_answerer.prompting import defang

logger = logging.getLogger(__name__)

MAX_TOKENS = 64
HISTORY_TURNS = 6
TURN_CHARS = 500
SYSTEM = (
    "You rewrite the user's last question so that it can be understood without the conversation. Replace "
    "pronouns and references (it, they, there, then, that one) with what they refer to in the conversation. "
    "Keep the language and the meaning; do not answer it. Reply with the rewritten question only."
)


@dataclass(frozen=True)
class RewriteResult:
    question: str
    rewritten: bool
    model: str


def rewrite_messages(question: str, history: list[tuple[str, str]]) -> list[dict[str, str]]:
    lines = [
        f"{role}: {defang(content[:TURN_CHARS])}"  # turns are data: an injected instruction is replaced
        for role, content in history[-HISTORY_TURNS:]
        if role in {"user", "assistant"}
    ]
    prompt = f"Conversation:\n{chr(10).join(lines)}\n\nLast question: {question}\nRewritten question:"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def clean_output(output: str, question: str) -> str | None:
    """The rewritten question from the model's reply, or None when the reply is unusable."""
    text = output.strip().splitlines()[0].strip() if output.strip() else ""
    text = re.sub(r"^(rewritten question|question)\s*:\s*", "", text, flags=re.IGNORECASE).strip().strip('"“”')
    if not text or len(text) > max(3 * len(question), len(question) + 200):
        return None
    if injection_rules(text):  # the guardrail checked the user's words once; the model's must not add an override
        return None
    return text


async def rewrite_followup(
    llm: ChatModel, question: str, history: list[tuple[str, str]], deadline: float | None = None
) -> RewriteResult:
    """Raises `Unavailable` when the model cannot be reached (the caller keeps its own rule result)."""
    result = Generation()
    async for _ in llm.stream(
        rewrite_messages(question, history),
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        seed=0,
        result=result,
        deadline=deadline,
    ):
        pass
    text = clean_output(result.text, question)
    if text is None:
        logger.info("rewrite: the model's reply was unusable; question kept")
        return RewriteResult(question, False, llm.model)
    return RewriteResult(text, text != question, llm.model)
