"""The chat prompt: numbered sources within a character budget, graph facts, recent history, the question."""
from __future__ import annotations

from dataclasses import dataclass

from ragmesh.common.v1 import common_pb2

SYSTEM_PROMPT = (
    "You are a careful assistant that answers questions about company documents. "
    "Answer only from the numbered documents given by the user. "
    "Cite the documents you use with their numbers in square brackets, like [1]. "
    "If the documents do not contain the answer, say that you do not know. Keep the answer short."
)
MAX_FACTS = 20
MAX_FACT_CHARS = 300
MAX_TURN_CHARS = 1000
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
    def heading(self) -> str:
        return SECTION_SEPARATOR.join(part for part in (self.title, *self.section_path) if part) or "(untitled)"


@dataclass(frozen=True)
class Prompt:
    messages: list[dict[str, str]]
    shown_sources: list[str]  # each source as the model saw it (heading + possibly shortened text)
    truncated_sources: int


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:max(limit - 2, 0)]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut + " …"


def fit_sources(sources: list[Source], budget: int) -> tuple[list[str], int]:
    """Each source as `[n] heading\\ntext`, sharing `budget` characters fairly.

    Water-filling in rank order: each source may use what is left divided by the sources still to place,
    so short sources leave room for longer ones further down.
    """
    shown: list[str] = []
    truncated = 0
    remaining = budget
    for i, source in enumerate(sources):
        head = f"[{i + 1}] {source.heading}\n"
        share = remaining // (len(sources) - i)
        text = _shorten(source.text.strip(), max(share - len(head), 0))
        truncated += text != source.text.strip()
        block = head + text
        shown.append(block)
        remaining -= len(block)
    return shown, truncated


def build_prompt(question: str, sources: list[Source], graph_facts: list[str],
                 history: list[tuple[str, str]], *, context_chars: int, history_turns: int) -> Prompt:
    shown, truncated = fit_sources(sources, context_chars)
    # This layout (documents first, then the bare question and a short instruction) is the one that made
    # SmolLM2-135M answer from the text instead of "The answer is: 2"; "Question:"/"Sources:" labels did not.
    parts = ["Documents:", "\n\n".join(shown)]
    facts = [_shorten(f.strip(), MAX_FACT_CHARS) for f in graph_facts if f.strip()][:MAX_FACTS]
    if facts:
        parts += ["", "Related facts:", "\n".join(f"- {f}" for f in facts)]
    parts += ["", f"{question.strip()} Answer from the documents."]
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    recent = history[-history_turns:] if history_turns else []
    messages += [{"role": role, "content": _shorten(content, MAX_TURN_CHARS)} for role, content in recent]
    messages.append({"role": "user", "content": "\n".join(parts)})
    return Prompt(messages, shown, truncated)
