"""A step, and a pipeline of steps.

A step is one small unit of a request: it reads and writes the `RequestState`, and owns its span, its stage
record (the `progress` event), its timeout and its degrade rule. `Step.execute` applies the common part:

- it runs only when `applies(state)` (by default: while there is still something to answer);
- its span is `span_name(state)` (`None`: no span of its own, the gRPC client span is the step's span);
- a gRPC error in a *required* step fails the request as `StepFailed` naming the step (HTTP 503 or the
  caller's 4xx, set on the span); in an *optional* step it degrades: `fallback(state, reason)` keeps the
  request going, and the degradation is logged, put on the span and reported in the final event;
- the stage record is `{"stage": name, "ms": ..., **what run returned}`, with `degraded` for an optional step.

A `Pipeline` is two ordered lists of steps: those run before the response starts (their failures become
HTTP statuses) and those streamed after it (their failures become an `error` event).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any, ClassVar, Protocol

from grpc import aio
from opentelemetry import trace

from ragmesh_common import attributes as attr
from ragmesh_gateway.mesh import StepFailed
from ragmesh_gateway.pipeline.events import Event, cached_events, decline_events, event
from ragmesh_gateway.pipeline.state import RequestState

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)


def elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


@contextlib.contextmanager
def step_span(name: str | None) -> Iterator[trace.Span]:
    """The step's span, or the invalid span (attributes dropped) when the step has none. Exceptions are not
    recorded as span errors here: a step sets the error status itself when the failure is a fault."""
    if name is None:
        yield trace.INVALID_SPAN
        return
    with tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False) as span:
        yield span


class Step:
    """One named step. Subclasses set `name` (the stage and the step named in errors and degradations),
    `span` and `required`, take their clients and timeout in `__init__`, and implement `run`."""

    name: ClassVar[str]
    span: ClassVar[str | None] = None
    required: ClassVar[bool] = True

    def applies(self, state: RequestState) -> bool:
        return state.answering

    def span_name(self, state: RequestState) -> str | None:
        return self.span

    async def run(self, state: RequestState) -> dict[str, Any]:
        """Does the step's work on `state`; returns the stage record's own fields."""
        raise NotImplementedError

    def fallback(self, state: RequestState, reason: str) -> dict[str, Any]:
        """An optional step's degrade rule: what the request goes on with (default: nothing added)."""
        state.degrade(self.name, reason)
        return {}

    def degraded_reason(self, exc: aio.AioRpcError) -> str:
        return f"{self.name} {exc.code().name}"

    async def execute(self, state: RequestState) -> dict[str, Any] | None:
        """Runs the step under its span and returns its stage record (also kept on `state.stages`), or None
        when it does not apply."""
        if not self.applies(state):
            return None
        started = time.perf_counter()
        with step_span(self.span_name(state)) as span:
            try:
                fields = await self.run(state)
            except StepFailed as refused:
                if refused.http_status >= 500:  # a fault; a refusal of the caller's input (4xx) is not
                    span.set_status(trace.Status(trace.StatusCode.ERROR, refused.message))
                raise
            except aio.AioRpcError as exc:
                if self.required:
                    failed = StepFailed.from_rpc(self.name, exc)
                    span.set_status(trace.Status(trace.StatusCode.ERROR, failed.message))
                    raise failed from exc
                fields = self.fallback(state, self.degraded_reason(exc))
        record = {"stage": self.name, "ms": elapsed_ms(started), **fields}
        if not self.required:
            record["degraded"] = state.degraded_in(self.name)
        state.stages.append(record)
        return record

    async def stream(self, state: RequestState) -> AsyncGenerator[Event, None]:
        """A step after the response started: its progress event (a streaming step yields more)."""
        record = await self.execute(state)
        if record is not None:
            yield event("progress", status="done", **record)


class FinalHook(Protocol):
    """Runs on the final event's data (answered or declined) before it is sent, and may add fields to it."""

    async def on_final(self, state: RequestState, data: dict[str, Any]) -> None: ...


class Pipeline:
    """`before` runs in `prepare` (a failure is an HTTP error); `during` streams after the response started;
    `finish` hooks see the final event before it goes out (conversation.RecordTurn stores the turn)."""

    def __init__(self, before: Sequence[Step], during: Sequence[Step] = (), finish: Sequence[FinalHook] = ()) -> None:
        self.before = tuple(before)
        self.during = tuple(during)
        self.finish = tuple(finish)

    async def _finished(self, state: RequestState, item: Event) -> Event:
        if item["event"] == "final":
            for hook in self.finish:
                await hook.on_final(state, item["data"])
        return item

    async def prepare(self, state: RequestState) -> RequestState:
        """Raises StepFailed (4xx/503) before any byte is streamed."""
        for step in self.before:
            await step.execute(state)
        return state

    async def stream(self, state: RequestState) -> AsyncGenerator[Event, None]:
        """The progress of the steps already run, then the streamed steps' events; a failure ends the stream
        with one `error` event naming the step."""
        for stage in state.stages:
            yield event("progress", status="done", **stage)
        for record in state.agent_steps:  # a multi-step answer's steps (pipeline/agentic.py)
            yield event("step", **record)
        state.trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
        if state.cached is not None:
            span = trace.get_current_span()
            span.set_attribute(attr.RAG_OUTCOME, state.outcome.value)
            span.set_attribute(attr.RAG_CACHE_HIT, True)
            span.set_attribute(attr.RAG_CACHE_TRACE_ID, state.cached.trace_id)
            for item in cached_events(state):  # a conversation records a cached answer as its turn too
                yield await self._finished(state, item)
            return
        if not state.answering:
            trace.get_current_span().set_attribute(attr.RAG_OUTCOME, state.outcome.value)
            for item in decline_events(state):
                yield await self._finished(state, item)
            return
        try:
            for step in self.during:
                # closed at once when the client leaves, so that a step's call is cancelled (its slot frees)
                async with contextlib.aclosing(step.stream(state)) as events:
                    async for item in events:
                        yield await self._finished(state, item)
        except StepFailed as failed:
            # a busy answerer is load, not a fault: a warning, so that a burst does not flood the error log
            (logger.warning if failed.retry_after else logger.error)("%s step failed: %s", failed.step, failed)
            yield event("error", **failed.payload(), trace_id=state.trace_id)
