"""The answer pipeline: guard the input, prompt the model, stream its tokens, check the output."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from ragmesh_common import attributes as attr
from ragmesh_common.errors import InvalidArgument

from ragmesh_answerer.config import Settings
from ragmesh_answerer.grounding import attribute
from ragmesh_answerer.guardrails import GuardrailResult, check_input
from ragmesh_answerer.llm import Generation, OllamaChat
from ragmesh_answerer.prompting import Source, build_prompt

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

MAX_TOKENS_LIMIT = 4096
HISTORY_ROLES = frozenset({"user", "assistant"})


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


@dataclass(frozen=True)
class AnswerInput:
    question: str
    sources: list[Source]
    graph_facts: list[str] = field(default_factory=list)
    history: list[tuple[str, str]] = field(default_factory=list)
    max_tokens: int = 0              # 0 = the service default
    temperature: float | None = None  # None = the service default


class Answerer:
    """Guarded, grounded answers from `llm` over the sources the caller retrieved."""

    def __init__(self, settings: Settings, llm: OllamaChat) -> None:
        self.settings = settings
        self.llm = llm

    def check_input(self, question: str) -> GuardrailResult:
        return check_input(question, self.settings.max_question_chars)

    def _validate(self, request: AnswerInput) -> tuple[int, float]:
        verdict = self.check_input(request.question)
        if not verdict.allowed:
            raise InvalidArgument(f"question refused: {verdict.reason}")
        if not request.sources:
            raise InvalidArgument("at least one source is required (answers without sources are not generated here)")
        if not 0 <= request.max_tokens <= MAX_TOKENS_LIMIT:
            raise InvalidArgument(f"max_tokens must be within 0..{MAX_TOKENS_LIMIT} (0 = default), "
                                  f"got {request.max_tokens}")
        temperature = self.settings.temperature if request.temperature is None else request.temperature
        if not 0.0 <= temperature <= 2.0:
            raise InvalidArgument(f"temperature must be within 0..2, got {temperature}")
        for i, (role, _) in enumerate(request.history):
            if role not in HISTORY_ROLES:
                raise InvalidArgument(f"history[{i}].role must be user or assistant, got {role!r}")
        return request.max_tokens or self.settings.max_tokens, temperature

    async def answer(self, request: AnswerInput) -> AsyncIterator[str | AnswerResult]:
        """Yields the answer's pieces as the model writes them, then one `AnswerResult`."""
        max_tokens, temperature = self._validate(request)
        prompt = build_prompt(request.question, request.sources, request.graph_facts, request.history,
                              context_chars=self.settings.max_context_chars,
                              history_turns=self.settings.history_turns)
        if prompt.truncated_sources:
            logger.info("%d of %d sources shortened to fit %d characters", prompt.truncated_sources,
                        len(request.sources), self.settings.max_context_chars)
        generation = Generation()
        span = tracer.start_span("generate", attributes={
            attr.GEN_AI_SYSTEM: "ollama",
            attr.GEN_AI_OPERATION: "chat",
            attr.GEN_AI_REQUEST_MODEL: self.llm.model,
            attr.GEN_AI_REQUEST_MAX_TOKENS: max_tokens,
            attr.GEN_AI_REQUEST_TEMPERATURE: temperature,
            attr.RAG_SOURCES: len(request.sources),
        })
        try:
            async for piece in self.llm.stream(prompt.messages, max_tokens=max_tokens, temperature=temperature,
                                               seed=self.settings.seed, result=generation):
                yield piece
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, generation.prompt_tokens)
            span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, generation.completion_tokens)
            span.end()
        yield self.check_output(generation, request.sources, prompt.shown_sources, max_tokens)

    def check_output(self, generation: Generation, sources: list[Source], shown: list[str],
                     max_tokens: int) -> AnswerResult:
        """Citations, grounding score and warnings for a finished generation."""
        with tracer.start_as_current_span("output_check") as span:
            attribution = attribute(generation.text.strip(), shown, self.settings.min_sentence_support)
            warnings = list(attribution.warnings)
            grounded = attribution.grounding_score >= self.settings.min_grounding
            if not attribution.answer:
                warnings.append("the model returned an empty answer")
            elif attribution.content_sentences == 0:
                warnings.append("the answer makes no statement that can be checked against the sources")
            elif not grounded:
                warnings.append(f"only {attribution.grounding_score:.0%} of the answer's statements are supported "
                                "by the sources; verify it before relying on it")
            if generation.done_reason == "length":
                warnings.append(f"the answer was cut off at the token limit ({max_tokens} tokens)")
            citations = [Citation(c.source_index, sources[c.source_index].chunk_id, c.support)
                         for c in attribution.citations]
            span.set_attribute(attr.RAG_GROUNDING_SCORE, attribution.grounding_score)
            span.set_attribute(attr.RAG_CITATIONS, len(citations))
            return AnswerResult(
                answer=attribution.answer, citations=citations, grounding_score=attribution.grounding_score,
                grounded=grounded and bool(attribution.answer), warnings=warnings, model=self.llm.model,
                prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
            )
