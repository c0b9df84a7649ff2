"""The evidence-first prompt: one instruction line, recent history, then the numbered quotes and the question.

Shaped for SmolLM2-135M and chosen by trying variants on 13 hand-written cases (quotes, question, expected
answer) with greedy decoding; the answerer README has the table. The winner is also the shortest (~70 prompt
tokens): a one-line system instruction to copy one short sentence, then `Quotes:` and `Question:`. A worked
example as a previous turn made answers cite `[n]` but leaked: the model answered with the example's facts
("The Zephyr bridge opened in 1932, so…"). Headings are not shown to the model; verification reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragmesh.common.v1 import common_pb2

SYSTEM_PROMPT = "Answer with one short sentence copied from the quotes."
MAX_TURN_CHARS = 500
SECTION_SEPARATOR = " › "


@dataclass(frozen=True)
class Source:
    chunk_id: str
    title: str
    section_path: tuple[str, ...]
    text: str

    @classmethod
    def from_proto(cls, scored: common_pb2.ScoredChunk) -> Source:
        chunk = scored.chunk
        return cls(chunk.chunk_id, chunk.title, tuple(chunk.section_path), chunk.text)

    @property
    def heading_text(self) -> str:
        return SECTION_SEPARATOR.join(part for part in (self.title, *self.section_path) if part)

    @property
    def heading(self) -> str:
        return self.heading_text or "(untitled)"


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 2, 0)]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut + " …"


def build_prompt(
    question: str, quotes: Sequence[str], history: Sequence[tuple[str, str]], *, history_turns: int
) -> list[dict[str, str]]:
    """Chat messages for `question` over `quotes` (numbered [1].. in the given order)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    recent = list(history[-history_turns:]) if history_turns else []
    messages += [{"role": role, "content": _shorten(content, MAX_TURN_CHARS)} for role, content in recent]
    numbered = "\n".join(f"[{i + 1}] {' '.join(quote.split())}" for i, quote in enumerate(quotes))
    messages.append({"role": "user", "content": f"Quotes:\n{numbered}\n\nQuestion: {question.strip()}"})
    return messages
