"""The answer pipeline: guard the input, select evidence, prompt the model, stream its tokens, verify."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from ragmesh_answerer.config import Settings
from ragmesh_answerer.evidence import EvidenceQuote, select_evidence
from ragmesh_answerer.grounding import drop_out_of_range
from ragmesh_answerer.guardrails import GuardrailResult, check_form, check_input
from ragmesh_answerer.llm import Generation, OllamaChat
from ragmesh_answerer.prompting import Source, build_prompt
from ragmesh_answerer.verify import SentenceVerdict, verify
from ragmesh_common import attributes as attr
from ragmesh_common import limits
from ragmesh_common.errors import InvalidArgument

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

MAX_TOKENS_LIMIT = 4096
HISTORY_ROLES = frozenset({"user", "assistant"})
# A short answer is one sentence: a blank line means the model has moved on to something else.
STOP_SEQUENCES = ("\n\n",)
WITHHELD_MESSAGE = (
    "I could not verify an answer in your documents: the passages I found do not support what the "
    "model wrote. Check the sources below, or rephrase the question."
)
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")


@dataclass(frozen=True)
class Citation:
    source_index: int  # 0-based index into the request's sources
    chunk_id: str
    support: float


@dataclass
class AnswerResult:
    answer: str
    citations: list[Citation]
    grounding_score: float
    grounded: bool
    warnings: list[str] = field(default_factory=list)
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    short_answer: str = ""
    evidence: list[EvidenceQuote] = field(default_factory=list)
    sentences: list[SentenceVerdict] = field(default_factory=list)
    verified: bool = False
    withheld: bool = False
    draft: str | None = None  # the unverified model answer, when withheld


@dataclass(frozen=True)
class AnswerInput:
    question: str
    sources: list[Source]
    graph_facts: list[str] = field(default_factory=list)
    history: list[tuple[str, str]] = field(default_factory=list)
    max_tokens: int = 0  # 0 = the service default
    temperature: float | None = None  # None = the service default


class Answerer:
    """Guarded, verified answers from `llm` over the sources the caller retrieved."""

    def __init__(self, settings: Settings, llm: OllamaChat) -> None:
        self.settings = settings
        self.llm = llm

    def check_input(self, question: str, history: Sequence[tuple[str, str]] = ()) -> GuardrailResult:
        return check_input(question, limits.QUESTION.value, history)

    def _validate(self, request: AnswerInput) -> tuple[int, float]:
        for i, (role, _) in enumerate(request.history):
            if role not in HISTORY_ROLES:
                raise InvalidArgument(f"history[{i}].role must be user or assistant, got {role!r}")
        # The guardrail (injection rules) ran once, in CheckInput, before the caller's pipeline read the question
        # (the gateway's guard step); here only what makes the request malformed.
        malformed = check_form(request.question, limits.QUESTION.value, request.history)
        if malformed is not None:
            raise InvalidArgument(f"question refused: {malformed.reason}")
        if not request.sources:
            raise InvalidArgument("at least one source is required (answers without sources are not generated here)")
        if not 0 <= request.max_tokens <= MAX_TOKENS_LIMIT:
            raise InvalidArgument(
                f"max_tokens must be within 0..{MAX_TOKENS_LIMIT} (0 = default), got {request.max_tokens}"
            )
        temperature = self.settings.temperature if request.temperature is None else request.temperature
        if not 0.0 <= temperature <= 2.0:
            raise InvalidArgument(f"temperature must be within 0..2, got {temperature}")
        return request.max_tokens or self.settings.max_tokens, temperature

    async def answer(self, request: AnswerInput) -> AsyncIterator[str | AnswerResult]:
        """Yields the answer's pieces as the model writes them, then one `AnswerResult`."""
        max_tokens, temperature = self._validate(request)
        quotes = select_evidence(
            request.question, request.sources, self.settings.max_quotes, self.settings.max_context_chars
        )
        # Graph facts are not document text (no offsets to quote, nothing to verify against), so the
        # evidence-first prompt leaves them out; the gateway still reports them.
        messages = build_prompt(
            request.question, [q.text for q in quotes], request.history, history_turns=self.settings.history_turns
        )
        generation = Generation()
        span = tracer.start_span(
            "generate",
            attributes={
                attr.GEN_AI_SYSTEM: "ollama",
                attr.GEN_AI_OPERATION: "chat",
                attr.GEN_AI_REQUEST_MODEL: self.llm.model,
                attr.GEN_AI_REQUEST_MAX_TOKENS: max_tokens,
                attr.GEN_AI_REQUEST_TEMPERATURE: temperature,
                attr.RAG_SOURCES: len(request.sources),
                attr.RAG_ANSWER_EVIDENCE: len(quotes),
            },
        )
        try:
            async for piece in self.llm.stream(
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=self.settings.seed,
                result=generation,
                stop=list(STOP_SEQUENCES),
            ):
                yield piece
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, generation.prompt_tokens)
            span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, generation.completion_tokens)
            span.end()
        yield self.check_output(generation, request.question, request.sources, quotes, max_tokens)

    def check_output(
        self,
        generation: Generation,
        question: str,
        sources: Sequence[Source],
        quotes: Sequence[EvidenceQuote],
        max_tokens: int,
    ) -> AnswerResult:
        """Verifies a finished generation against the evidence it was prompted with (`verify.py`)."""
        with tracer.start_as_current_span("output_check") as span:
            warnings: list[str] = []
            draft = drop_out_of_range(generation.text.strip(), len(quotes), warnings)
            result = verify(question, draft, [q.as_quote() for q in quotes], self.settings.min_sentence_support)
            withheld = result.nothing_supported
            if not draft:
                warnings.append("the model returned an empty answer")
            elif not result.checkable:
                warnings.append("the answer makes no statement that can be checked against the sources")
            if withheld:
                warnings.append(
                    "the answer was withheld: none of its statements could be verified against the quoted evidence"
                )
            warnings += result.warnings
            if generation.done_reason == "length":
                warnings.append(f"the answer was cut off at the token limit ({max_tokens} tokens)")
            best: dict[int, float] = {}
            for sentence in result.sentences:
                if sentence.supported:
                    for j in sentence.sources:
                        best[j] = max(best.get(j, 0.0), sentence.support)
            citations = sorted(
                (Citation(j, sources[j].chunk_id, round(s, 4)) for j, s in best.items()),
                key=lambda c: (-c.support, c.source_index),
            )
            span.set_attribute(attr.RAG_GROUNDING_SCORE, result.score)
            span.set_attribute(attr.RAG_CITATIONS, len(citations))
            span.set_attribute(attr.RAG_ANSWER_VERIFIED, result.verified)
            span.set_attribute(attr.RAG_ANSWER_WITHHELD, withheld)
            answer = WITHHELD_MESSAGE if withheld else _to_source_markers(draft, quotes)
            return AnswerResult(
                answer=answer,
                citations=[] if withheld else citations,
                grounding_score=result.score,
                grounded=result.verified,
                warnings=warnings,
                model=self.llm.model,
                prompt_tokens=generation.prompt_tokens,
                completion_tokens=generation.completion_tokens,
                short_answer=WITHHELD_MESSAGE if withheld else _to_source_markers(result.short_answer, quotes),
                evidence=list(quotes),
                sentences=result.sentences,
                verified=result.verified,
                withheld=withheld,
                draft=draft if withheld else None,
            )


def _to_source_markers(text: str, quotes: Sequence[EvidenceQuote]) -> str:
    """The model cites quotes ([n] = the n-th quote); the reply cites sources, as the gateway numbers them."""

    def fix(match: re.Match[str]) -> str:
        numbers = [int(n) for n in match.group(1).split(",")]
        mapped = dict.fromkeys(quotes[n - 1].source_index + 1 for n in numbers if 1 <= n <= len(quotes))
        return f"[{', '.join(map(str, mapped))}]" if mapped else ""

    return _MARKER.sub(fix, text)
