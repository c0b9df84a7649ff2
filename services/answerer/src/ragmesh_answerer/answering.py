"""The answer pipeline: guard the input, find the answer in the evidence, prompt the model, stream what verifies.

1. Evidence: the quotes for the prompt (`evidence.py`) and the extractive short answer (`relation.py`): the
   span of the asked type that the sources' sentences tie closest to the question's terms. Its sentence is
   quoted first in the prompt, so the model phrases around it.
2. Nothing to extract (no sentence about the question states an answer of the asked type): the model is not
   asked; the reply is "what the documents say", the best quotes marked unverified (`withheld`).
3. The model's draft is read sentence by sentence as it streams. A sentence is sent (`Sentence`) once it
   passes verification (`verify.py`); the first one must also state the extracted short answer. When it does
   not, the model is overruled: generation stops and the evidence sentence that states the short answer is
   sent instead. A sentence that fails is never sent, nor one that copies a table's row ("| Grain | … | 200 |"
   is no prose: a row answer is read out with its headers); raw draft tokens only with `stream_draft`.
4. A question about a collection or a topic as a whole (`summary`: the gateway's router says so) has no span to
   extract: its answer is the sources' own sentences about its topic, each cited and verified (`summary.py`);
   the model is not asked. No sentence about the topic: "what the documents say", as in 2.
5. No sentence states an answer, but a table among the sources does: the cell of the one row that names the
   question's names (or its key terms, or its year), in the one column whose header names its other key terms
   (`tables.py`), is the span, its row the evidence sentence; a form's "Key: value" line likewise. A table's
   rows are never read as sentences. When sources give different cells for that row and column (a spreadsheet
   says 100, a slide's chart 110), the reply says they disagree and lists each value with its source; the model is
   not asked and nothing is verified. A superlative ("Which year had the most saltwater ducks?") is the label of
   the row with the column's largest value; tables whose largest rows differ disagree the same way. Rows that tie
   for it, and the rows a how-many question over a table's value counts ("How many customers are from Chile?"),
   are an answer of several rows (`tables.Tally`): its statement, then each row read out and cited, verified only
   when the rows hold it (`Tally.holds`); the model is not asked. A count over a table the gateway read only in part
   (`partial_tables`) is "at least N".
6. A question that asks only what or who something is ("What is TableFormer?") is answered first by the sentence
   that defines it: "X is a …", "X means …", "We propose X, a …" (`definitions.py`); the complement is the span.
7. Nothing extracted and no table: a source that is a list under a heading naming the question ("Next Steps" for
   "What are the next steps?") answers with its items, verbatim and cited (`lists.py`); the model is not asked.
8. A question that asks which boxes of a checklist are ticked ("Which tasks are done before release?") is
   answered by the ticked items ("[x] Design"), verbatim and cited, before anything else (`lists.checked`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from ragmesh_answerer.config import Settings
from ragmesh_answerer.evidence import EvidenceQuote, select_evidence
from ragmesh_answerer.grounding import drop_out_of_range
from ragmesh_answerer.guardrails import GuardrailResult, check_form, check_input
from ragmesh_answerer.lists import Listed, checked, led_in, listed
from ragmesh_answerer.llm import ChatModel, Generation
from ragmesh_answerer.prompting import Source, build_prompt
from ragmesh_answerer.relation import Reader, Span, load_model
from ragmesh_answerer.span_reader import Reading, SpanReader
from ragmesh_answerer.summary import Summary, summarise
from ragmesh_answerer.tables import TABLE, Tally, count, describe, extreme, row_text
from ragmesh_answerer.tables import Reading as TableReading
from ragmesh_answerer.tables import read as read_tables
from ragmesh_answerer.verify import SentenceVerdict, Verdict, Verification, exact_quotes, verify
from ragmesh_common import attributes as attr
from ragmesh_common import limits
from ragmesh_common.errors import InvalidArgument, Unavailable
from ragmesh_common.metrics import count_generation
from ragmesh_common.telemetry import llm_content_attributes, llm_output_attributes, token_attributes
from ragmesh_common.text import questions, spelling
from ragmesh_common.text.numbers import number_supported, numbers
from ragmesh_common.text.questions import AnswerType, Question
from ragmesh_common.text.sentences import sentence_spans
from ragmesh_common.text.words import same_sense, specificity

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

MAX_TOKENS_LIMIT = 4096
HISTORY_ROLES = frozenset({"user", "assistant"})
# A short answer is one sentence: a blank line means the model has moved on to something else.
STOP_SEQUENCES = ("\n\n",)
WITHHELD_MESSAGE = "I could not verify an answer in your documents. What they say (unverified, check the sources):"
DISAGREE_MESSAGE = "Your documents disagree, so no answer is verified. What each says (check the sources):"
QUOTES_SHOWN = 2  # quotes in "what the documents say"
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")
_TABLE_ROW = re.compile(r"(?:\|[^|\n]*){3}\|")  # three cells between bars: a table's row, not prose


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
    prompt_tokens: int | None = None  # None: the model server did not count them
    completion_tokens: int | None = None
    short_answer: str = ""
    evidence: list[EvidenceQuote] = field(default_factory=list)
    sentences: list[SentenceVerdict] = field(default_factory=list)
    verified: bool = False
    withheld: bool = False
    draft: str | None = None  # the unverified model answer, when withheld or overruled
    span: Span | None = None  # the extractive short answer
    span_chunk_id: str = ""  # the chunk it is quoted from
    overruled: bool = False  # the model's answer was replaced by the evidence sentence
    respelled: list[tuple[str, str]] = field(default_factory=list)  # (written, read as): the question's slips


@dataclass(frozen=True)
class Sentence:
    """A verified answer sentence as streamed: its text (source markers), its sources, whether copied."""

    index: int
    text: str
    sources: tuple[int, ...]
    extractive: bool = False


@dataclass(frozen=True)
class AnswerInput:
    question: str
    sources: list[Source]
    graph_facts: list[str] = field(default_factory=list)
    history: list[tuple[str, str]] = field(default_factory=list)
    max_tokens: int = 0  # 0 = the service default
    temperature: float | None = None  # None = the service default
    stream_draft: bool = False  # also yield the raw draft's pieces (str)
    deadline: float | None = None  # the caller's deadline (time.monotonic()); bounds the generation
    resolved_question: str = ""  # a multi-step answer's last question, bridge filled: what the answer is checked on
    summary: bool = False  # a question about a collection or a topic as a whole: the sources' sentences (summary.py)
    bridges: tuple[str, ...] = ()  # the entities earlier steps found and later steps searched with: never the answer
    partial_tables: bool = False  # the gateway read a table only in part: a count of its rows is a lower bound


class Answerer:
    """Guarded, verified answers from `llm` over the sources the caller retrieved."""

    def __init__(
        self, settings: Settings, llm: ChatModel, reader: Reader | None = None, span_reader: SpanReader | None = None
    ) -> None:
        self.settings = settings
        self.llm = llm
        self.reader = reader
        self.span_reader = span_reader

    async def load_reader(self) -> None:
        """Loads the spaCy pipeline, the word frequencies of the term weights and WordNet (synonyms of the
        question's terms) once (in a thread: it takes seconds); the service is SERVING only after."""
        if self.reader is None:
            await asyncio.to_thread(specificity, "the")
            await asyncio.to_thread(same_sense, "answer", "reply", questions.SYNONYM_SENSES)
            nlp = await asyncio.to_thread(load_model, self.settings.spacy_model)
            if self.settings.span_reader and self.span_reader is None:
                self.span_reader = await asyncio.to_thread(SpanReader.load)
            self.reader = Reader(nlp, self.settings.answer_min_confidence)

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
        if request.resolved_question:
            malformed = check_form(request.resolved_question, limits.QUESTION.value, ())
            if malformed is not None:
                raise InvalidArgument(f"resolved_question refused: {malformed.reason}")
        problem = limits.too_long(limits.BRIDGES, "bridges", len(request.bridges))
        for i, bridge in enumerate(request.bridges):
            problem = problem or limits.too_long(limits.TITLE, f"bridges[{i}]", len(bridge))
            if not bridge.strip():
                problem = problem or f"bridges[{i}] is empty"
        if problem:
            raise InvalidArgument(problem)
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

    async def _read(self, question: str, sources: Sequence[Source]) -> Reading | None:
        """The span reader's logits over the sources (in a thread: a forward pass per source), or None when it is
        off or fails: the learned ranking then decides alone (logged, and an error on the span)."""
        if self.span_reader is None:
            return None
        with tracer.start_as_current_span("read spans", attributes={attr.RAG_SOURCES: len(sources)}) as span:
            try:
                return await asyncio.to_thread(self.span_reader.read, question, [s.text for s in sources])
            except Exception as exc:  # noqa: BLE001 (any failure of the optional reader degrades, never fails the answer)
                logger.warning("span reader failed, the learned ranking decides alone: %s", exc)
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                return None

    async def answer(self, request: AnswerInput) -> AsyncGenerator[str | Sentence | AnswerResult, None]:
        """Yields each verified `Sentence` as the model writes it (and the raw pieces with `stream_draft`),
        then one `AnswerResult` (see the module docstring). A key word of the question the sources never write is
        read as the sources' word it is a slip of (`respelled`), and the result says so (`AnswerResult.respelled`:
        not a warning, the answer is verified for the question so read; the gateway tells the user in `notes`)."""
        max_tokens, temperature = self._validate(request)
        request, read_as = respelled(request) if self.settings.respell_questions else (request, [])
        if read_as:
            logger.info("question read with the sources' spelling: %s", read_as)
            trace.get_current_span().set_attribute(attr.RAG_QUESTION_RESPELLED, [f"{a} -> {b}" for a, b in read_as])
        async for event in self._answer(request, max_tokens, temperature):
            if read_as and isinstance(event, AnswerResult):
                event.respelled = list(read_as)
            yield event

    async def _answer(
        self, request: AnswerInput, max_tokens: int, temperature: float
    ) -> AsyncGenerator[str | Sentence | AnswerResult, None]:
        if self.reader is None:
            raise Unavailable("the answerer is still loading its language analysis model; retry shortly")
        if request.summary:
            with tracer.start_as_current_span("summarise") as span:
                summary = summarise(request.question, request.sources, self.settings.min_sentence_support)
                span.set_attribute(attr.RAG_ANSWER_VERIFIED, summary is not None)
            if summary is not None:
                for n, (quote, shown) in enumerate(zip(summary.sentences, summary.shown, strict=True)):
                    yield Sentence(n, shown, (quote.source_index,), True)
                yield self._summary_result(summary, request.sources)
                return
            logger.info("no sentence of %d sources is about the topic of a summary question", len(request.sources))
            yield self._unasked(self._quotes(request), request.sources)
            return
        # a multi-step answer's last question, its bridge filled, says what the answer must be tied to
        question = Question.parse(request.resolved_question or request.question)
        reading = (
            await self._read(request.resolved_question or request.question, request.sources)
            if self.reader.weighs_reading(question)
            else None
        )
        ticked = checked(question, request.sources)  # "Which tasks are done?": the checklist's ticked boxes
        if ticked is not None:
            for event in self._listed(ticked, request.sources):
                yield event
            return
        with tracer.start_as_current_span("extract"):
            evidence_sentences = self.reader.sentences([(s.text, s.heading_text) for s in request.sources])
            found = self.reader.extract(question, evidence_sentences, reading, request.bridges)
            table = TableReading(None)
            if found is None and question.answer_type is not AnswerType.YES_NO and not question.options:
                table = _table_reading(question, request.sources, request.partial_tables)
                found = table.answer
        if table.disagreeing or len(table.tallies) > 1:
            logger.info("the sources' tables disagree: %d values", len(table.disagreeing) or len(table.tallies))
            yield self._disagreement(table, request.sources)
            return
        if table.tallies:  # rows that tie for the extreme, or the rows a count counts
            for event in self._tallied(table.tallies[0], request):
                yield event
            return
        items = (listed(question, request.sources) or led_in(question, request.sources)) if found is None else None
        if items is not None:
            for event in self._listed(items, request.sources):
                yield event
            return
        quotes = self._quotes(request)
        if found is None:
            logger.info("no sentence of %d sources answers the question as asked", len(request.sources))
            if not request.stream_draft:
                yield self._unasked(quotes, request.sources)
                return
        else:
            quotes = _answer_quote_first(quotes, found, request.sources)
        # Graph facts are not document text (no offsets to quote, nothing to verify against), so the
        # evidence-first prompt leaves them out; the gateway still reports them.
        messages = build_prompt(
            request.question, [q.text for q in quotes], request.history, history_turns=self.settings.history_turns
        )
        gate = _Gate(request.question, quotes, found, self.settings.min_sentence_support)
        generation = Generation()
        span = tracer.start_span(
            "generate",
            attributes={
                attr.GEN_AI_SYSTEM: self.llm.system,
                attr.GEN_AI_OPERATION: "chat",
                attr.GEN_AI_REQUEST_MODEL: self.llm.model,
                attr.GEN_AI_REQUEST_MAX_TOKENS: max_tokens,
                attr.GEN_AI_REQUEST_TEMPERATURE: temperature,
                attr.RAG_SOURCES: len(request.sources),
                attr.RAG_ANSWER_EVIDENCE: len(quotes),
                attr.OI_SPAN_KIND: "LLM",
                attr.OI_LLM_MODEL: self.llm.model,
                **llm_content_attributes(messages),
            },
        )
        outcome = "error"
        try:
            stream = self.llm.stream(
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=self.settings.seed,
                result=generation,
                stop=list(STOP_SEQUENCES),
                deadline=request.deadline,
            )
            try:
                async for piece in stream:
                    if request.stream_draft:
                        yield piece
                    for sentence in gate.feed(piece):
                        yield sentence
                    if gate.closed and not request.stream_draft:
                        break  # overruled: the rest of the draft will not be shown
            finally:
                close = getattr(stream, "aclose", None)  # an async generator: stop the model's stream now
                if close is not None:
                    await close()
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        else:
            outcome = "ok"
        finally:
            prompt, completion = generation.prompt_tokens, generation.completion_tokens
            if prompt is not None:  # absent, not 0, when the server did not count them
                span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, prompt)
            if completion is not None:
                span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, completion)
            if prompt is not None and completion is not None:
                span.set_attributes(token_attributes(prompt, completion))
            span.set_attributes(llm_output_attributes(generation.text))
            if generation.done_reason:
                span.set_attribute(attr.GEN_AI_RESPONSE_FINISH_REASONS, [generation.done_reason])
            count_generation(self.llm.model, outcome, prompt or 0, completion or 0)
            span.end()
        for sentence in gate.finish():
            yield sentence
        yield self.check_output(generation, request.question, request.sources, quotes, max_tokens, gate)

    def _quotes(self, request: AnswerInput) -> list[EvidenceQuote]:
        return select_evidence(
            request.question, request.sources, self.settings.max_quotes, self.settings.max_context_chars
        )

    def _unasked(self, quotes: Sequence[EvidenceQuote], sources: Sequence[Source]) -> AnswerResult:
        """What the documents say, the model not asked (it used no tokens)."""
        return self._documents_say(quotes, sources, Generation(prompt_tokens=0, completion_tokens=0), [])

    def _summary_result(self, summary: Summary, sources: Sequence[Source]) -> AnswerResult:
        """A verified summary: the sources' own sentences, each cited; the model was not asked."""
        cited = sorted({q.source_index for q in summary.sentences})
        return self._extracted(
            summary.text,
            [Citation(i, sources[i].chunk_id, 1.0) for i in cited],
            summary.sentences[0].text,
            list(summary.sentences),
            summary.verification.sentences,
            verified=True,
        )

    def _extracted(
        self,
        answer: str,
        citations: list[Citation],
        short_answer: str,
        evidence: list[EvidenceQuote],
        sentences: list[SentenceVerdict],
        *,
        verified: bool,
    ) -> AnswerResult:
        """An answer the documents' own text makes (a summary, a list, a table's rows): grounded, the model not
        asked (it used no tokens)."""
        return AnswerResult(
            answer=answer,
            citations=citations,
            grounding_score=1.0,
            grounded=True,
            model=self.llm.model,
            prompt_tokens=0,
            completion_tokens=0,
            short_answer=short_answer,
            evidence=evidence,
            sentences=sentences,
            verified=verified,
            withheld=False,
        )

    def _listed(self, items: Listed, sources: Sequence[Source]) -> Iterator[Sentence | AnswerResult]:
        """A list's answer as events: each "- item [n]" line a verified sentence, then the result."""
        for n, line in enumerate(items.text.splitlines()):
            yield Sentence(n, line, (items.source_index,), True)
        yield self._list_result(items, sources)

    def _list_result(self, items: Listed, sources: Sequence[Source]) -> AnswerResult:
        """A list under a heading that names the question: its items, verbatim and cited; the model not asked."""
        quotes = [item.as_quote() for item in items.items]
        numbered = "\n".join(f"- {item.text} [{n}]" for n, item in enumerate(items.items, 1))  # [n]: the n-th quote
        verification = exact_quotes(
            verify("", numbered, quotes, self.settings.min_sentence_support, summary=True), quotes
        )
        return self._extracted(
            items.text,
            [Citation(items.source_index, sources[items.source_index].chunk_id, 1.0)],
            items.short,
            list(items.items),
            verification.sentences,
            verified=verification.verified,
        )

    def _tallied(self, tally: Tally, request: AnswerInput) -> Iterator[Sentence | AnswerResult]:
        """An answer that rests on several rows of a table (`tables.Tally`) as events: its statement, then each cited
        row read out with its headers, each a verified sentence, then the result; the model not asked. When the
        rows do not hold what the statement says (`Tally.holds`), what the documents say instead, unverified."""
        quotes = [_row_quote(cell, request.sources) for cell in tally.cited]
        lines = [f"- {row_text(cell.sentence, cell.start, request.question)}" for cell in tally.cited]
        rows = exact_quotes(
            verify(
                "",
                "\n".join(f"{line} [{n}]" for n, line in enumerate(lines, 1)),
                [q.as_quote() for q in quotes],
                self.settings.min_sentence_support,
                summary=True,
            ),
            [q.as_quote() for q in quotes],
        )
        holds = tally.holds(request.sources)
        if not (holds and rows.verified):
            logger.info("a table's rows do not hold what their tally says (%s)", tally.statement)
            yield self._unasked(quotes, request.sources)
            return
        cited = tuple(sorted({cell.sentence.source_index for cell in tally.cited}))
        statement = f"{tally.statement} [{', '.join(str(i + 1) for i in cited)}]"
        verdict = SentenceVerdict(
            statement,
            checkable=True,
            supported=True,
            verdict=Verdict.SUPPORTED,
            support=1.0,
            evidence=tuple(range(len(quotes))),
            sources=cited,
            reason="each row it names or counts is cited and holds the value",
            short_answer=True,
        )
        events = [Sentence(0, statement, cited, True)] + [
            Sentence(n, f"{line} [{cell.sentence.source_index + 1}]", (cell.sentence.source_index,), True)
            for n, (line, cell) in enumerate(zip(lines, tally.cited, strict=True), 1)
        ]
        yield from events
        yield self._extracted(
            "\n".join(event.text for event in events),
            [Citation(i, request.sources[i].chunk_id, 1.0) for i in cited],
            tally.short,
            quotes,
            [verdict, *rows.sentences],
            verified=True,
        )

    def _disagreement(self, table: TableReading, sources: Sequence[Source]) -> AnswerResult:
        """The sources' tables give different values for the same row and column (or different rows for a
        superlative, or different counts): each value (or count) with its row, column and source; nothing verified
        (the model not asked)."""
        if table.tallies:  # each table's count: its statement, its first row quoted, every row it cites cited
            quotes = [_row_quote(tally.cited[0], sources) for tally in table.tallies]
            said = [tally.statement.removesuffix(".") for tally in table.tallies]
            marks = [sorted({c.sentence.source_index + 1 for c in tally.cited}) for tally in table.tallies]
        else:
            quotes = [_row_quote(cell, sources) for cell in table.disagreeing]
            said = [describe(cell) for cell in table.disagreeing]
            marks = [[cell.sentence.source_index + 1] for cell in table.disagreeing]
        shown = "\n".join(f"- {text} [{', '.join(map(str, mark))}]" for text, mark in zip(said, marks, strict=True))
        values = ", ".join(f'"{text}"' for text in said)
        return AnswerResult(
            answer=f"{DISAGREE_MESSAGE}\n{shown}",
            citations=[],
            grounding_score=0.0,
            grounded=False,
            warnings=[f"the sources disagree: their tables give {values}"],
            model=self.llm.model,
            prompt_tokens=0,
            completion_tokens=0,
            short_answer=DISAGREE_MESSAGE,
            evidence=quotes,
            verified=False,
            withheld=True,
        )

    def _documents_say(
        self,
        quotes: Sequence[EvidenceQuote],
        sources: Sequence[Source],
        generation: Generation,
        warnings: list[str],
        verification: Verification | None = None,
    ) -> AnswerResult:
        """Nothing verified: the best quotes, marked unverified, instead of an empty message."""
        shown = "\n".join(f'> "{q.text}" [{q.source_index + 1}]' for q in quotes[:QUOTES_SHOWN])
        warnings.append(
            "no answer could be verified: no passage ties an answer of the asked type to the question; "
            "the best quotes are shown unverified"
        )
        draft = generation.text.strip()
        return AnswerResult(
            answer=f"{WITHHELD_MESSAGE}\n{shown}" if shown else WITHHELD_MESSAGE,
            citations=[],
            grounding_score=0.0,
            grounded=False,
            warnings=warnings,
            model=self.llm.model,
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens,
            short_answer=WITHHELD_MESSAGE,
            evidence=list(quotes),
            sentences=verification.sentences if verification else [],
            verified=False,
            withheld=True,
            draft=draft or None,
        )

    def check_output(
        self,
        generation: Generation,
        question: str,
        sources: Sequence[Source],
        quotes: Sequence[EvidenceQuote],
        max_tokens: int,
        gate: _Gate,
    ) -> AnswerResult:
        """The final result: what the gate let through, the draft's verdicts, citations and warnings."""
        with tracer.start_as_current_span("output_check") as span:
            warnings: list[str] = []
            draft = drop_out_of_range(generation.text.strip(), len(quotes), warnings)
            result = verify(question, draft, [q.as_quote() for q in quotes], self.settings.min_sentence_support)
            if not draft:
                warnings.append("the model returned an empty answer")
            if generation.done_reason == "length" and not gate.overruled:
                warnings.append(f"the answer was cut off at the token limit ({max_tokens} tokens)")
            withheld = gate.span is None or not gate.sent
            span.set_attribute(attr.RAG_ANSWER_VERIFIED, not withheld)
            span.set_attribute(attr.RAG_ANSWER_WITHHELD, withheld)
            if withheld:
                return self._documents_say(quotes, sources, generation, warnings, result)
            support: dict[int, float] = {}
            for sentence in gate.sent:
                for j in sentence.sources:
                    support[j] = 1.0 if sentence.extractive else max(support.get(j, 0.0), gate.support(sentence))
            citations = sorted(
                (Citation(j, sources[j].chunk_id, round(s, 4)) for j, s in support.items()),
                key=lambda c: (-c.support, c.source_index),
            )
            span.set_attribute(attr.RAG_GROUNDING_SCORE, 1.0)
            span.set_attribute(attr.RAG_CITATIONS, len(citations))
            return AnswerResult(
                answer=" ".join(s.text for s in gate.sent),
                citations=citations,
                grounding_score=1.0,
                grounded=True,
                warnings=warnings,
                model=self.llm.model,
                prompt_tokens=generation.prompt_tokens,
                completion_tokens=generation.completion_tokens,
                short_answer=gate.span.text if gate.span else "",
                evidence=list(quotes),
                sentences=result.sentences,
                verified=True,
                withheld=False,
                draft=draft if gate.overruled and draft else None,
                span=gate.span,
                span_chunk_id=sources[gate.span.sentence.source_index].chunk_id if gate.span else "",
                overruled=gate.overruled,
            )


class _Gate:
    """Reads the draft as it streams and lets through only the sentences that verify (see the module
    docstring); the first must state the extracted short answer, or the evidence sentence replaces it."""

    def __init__(self, question: str, quotes: Sequence[EvidenceQuote], span: Span | None, threshold: float) -> None:
        self.question = question
        self.quotes = list(quotes)
        self.span = span
        self.threshold = threshold
        self.buffer = ""
        self.accepted: list[str] = []  # model sentences that passed, as written (quote markers)
        self.sent: list[Sentence] = []
        self._support: dict[int, float] = {}
        self.overruled = False
        self.closed = False

    def support(self, sentence: Sentence) -> float:
        return self._support.get(sentence.index, 0.0)

    def feed(self, piece: str) -> list[Sentence]:
        if self.closed:
            return []
        self.buffer += piece
        spans = sentence_spans(self.buffer)
        if len(spans) < 2:
            return []
        out: list[Sentence] = []
        for s, e in spans[:-1]:
            out += self._judge(self.buffer[s:e])
            if self.closed:
                break
        self.buffer = self.buffer[spans[-1][0] :]
        return out

    def finish(self) -> list[Sentence]:
        out: list[Sentence] = []
        if not self.closed and self.buffer.strip():
            out += self._judge(self.buffer.strip())
        self.buffer = ""
        if not self.sent and self.span is not None and not self.closed:
            out += self._overrule()  # the model said nothing checkable: the evidence speaks
        self.closed = True
        return out

    def _judge(self, text: str) -> list[Sentence]:
        warnings: list[str] = []
        text = drop_out_of_range(text, len(self.quotes), warnings)
        if not re.search(r"[^\W_]", _MARKER.sub("", text)):
            return []  # a citation after a sentence already judged ("… in 1911. [1]")
        result = verify(
            self.question, " ".join([*self.accepted, text]), [q.as_quote() for q in self.quotes], self.threshold
        )
        if len(result.sentences) <= len(self.accepted) or not result.sentences[-1].checkable:
            return []  # "Sure!": nothing to check, nothing shown
        verdict = result.sentences[-1]
        first = not self.accepted
        prose = not _TABLE_ROW.search(text)  # a copied table row ("| Grain | Corn, … | 200 |") is no sentence
        if prose and verdict.supported and (not first or self.span is None or _states(text, self.span)):
            self.accepted.append(text)
            sources = tuple(sorted({self.quotes[j].source_index for j in verdict.evidence}))
            shown = _to_source_markers(text, self.quotes).strip()
            if sources and not _MARKER.search(shown):  # every sentence shown says where it comes from
                shown += f" [{', '.join(str(j + 1) for j in sources)}]"
            sentence = Sentence(len(self.sent), shown, sources)
            self._support[sentence.index] = verdict.support
            self.sent.append(sentence)
            return [sentence]
        if first and self.span is not None:
            return self._overrule()
        return []  # a later sentence that fails is not shown

    def _overrule(self) -> list[Sentence]:
        """The evidence speaks: the sentence that states the short answer (and those it rests on: a choice's
        other dated option), each with its source marker."""
        assert self.span is not None
        self.overruled, self.closed = True, True
        out: list[Sentence] = []
        for where in (self.span.sentence, *self.span.also):
            if self.span.label == TABLE and where == self.span.sentence:  # a row: its named cells after their headers
                said = row_text(where, self.span.start, self.question)
            else:
                said = where.text
            sentence = Sentence(
                len(self.sent), f"{said} [{where.source_index + 1}]", (where.source_index,), extractive=True
            )
            self.sent.append(sentence)
            out.append(sentence)
        return out


def respelled(request: AnswerInput) -> tuple[AnswerInput, list[tuple[str, str]]]:
    """`request` with its question (and resolved question) read as its sources spell them (`read_as_sources`), and
    the (written, read as) pairs."""
    question, read_as = read_as_sources(request.question, request.sources)
    resolved, resolved_as = (
        read_as_sources(request.resolved_question, request.sources) if request.resolved_question else ("", [])
    )
    pairs = list(dict.fromkeys([*read_as, *resolved_as]))
    if not pairs:
        return request, []
    return dataclasses.replace(request, question=question, resolved_question=resolved), pairs


def read_as_sources(question: str, sources: Sequence[Source]) -> tuple[str, list[tuple[str, str]]]:
    """`question` with its slips read as the sources' texts and headings spell them (`ragmesh_common.text.spelling`:
    only the sources' words, which the caller may read, are candidates), and the (written, read as) pairs."""
    return spelling.respelled(question, [text for s in sources for text in (s.text, s.heading_text)])


def _table_reading(question: Question, sources: Sequence[Source], partial: bool) -> TableReading:
    """What the sources' tables say when no sentence does (module docstring, 5): a count of rows ("How many
    customers are from Chile?": only where its noun names no column of numbers), else a row's cell, else a column's
    largest or smallest row ("Which year had the most …?")."""
    counted = count(question, sources, partial=partial)
    if counted.tallies:
        return counted
    table = read_tables(question, sources)
    if table.answer is not None or table.disagreeing or table.tallies:
        return table
    return extreme(question, sources)


def _row_quote(cell: Span, sources: Sequence[Source]) -> EvidenceQuote:
    """A table cell's row as an evidence quote: the row's line, under its source's headings and the table's header
    (what the row's cells are)."""
    where = cell.sentence
    heading = sources[where.source_index].heading_text
    header = where.context.split("\n", 1)[0] if "\n" in where.context else ""
    return EvidenceQuote(
        where.source_index,
        sources[where.source_index].chunk_id,
        where.text,
        where.start,
        where.end,
        "\n".join(part for part in (heading, header) if part),
        1.0,
    )


def _states(text: str, span: Span) -> bool:
    """`text` states the span: its words in a row (case and punctuation aside), or at least all its numbers."""
    said = _flat(text)
    if f" {_flat(span.text)} " in f" {said} ":
        return True
    stated = numbers(span.text)
    return bool(stated) and all(number_supported(n, numbers(text)) for n in stated)


def _flat(text: str) -> str:
    return " ".join(re.findall(r"[^\W_]+", text.lower()))


def _answer_quote_first(quotes: list[EvidenceQuote], span: Span, sources: Sequence[Source]) -> list[EvidenceQuote]:
    """The quotes with the sentence that states the short answer first (added when evidence selection left it
    out), so that the model sees it and phrases around it."""
    where = span.sentence
    heading = sources[where.source_index].heading_text
    table = span.label == TABLE
    if table:  # a row is read with its table's header (the column names say what its cells are)
        heading = "\n".join(part for part in (heading, where.context.split("\n", 1)[0]) if part)
    inside = [
        q for q in quotes if q.source_index == where.source_index and q.start <= where.start and where.end <= q.end
    ]
    rest = [q for q in quotes if q not in inside]
    first = ([] if table else inside) or [
        EvidenceQuote(
            where.source_index,
            sources[where.source_index].chunk_id,
            where.text,
            where.start,
            where.end,
            heading,
            span.score,
        )
    ]
    return first + rest


def _to_source_markers(text: str, quotes: Sequence[EvidenceQuote]) -> str:
    """The model cites quotes ([n] = the n-th quote); the reply cites sources, as the gateway numbers them."""

    def fix(match: re.Match[str]) -> str:
        numbers = [int(n) for n in match.group(1).split(",")]
        mapped = dict.fromkeys(quotes[n - 1].source_index + 1 for n in numbers if 1 <= n <= len(quotes))
        return f"[{', '.join(map(str, mapped))}]" if mapped else ""

    return _MARKER.sub(fix, text)
