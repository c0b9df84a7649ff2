"""Admission control over gRPC: started / queued headers, queue events, RESOURCE_EXHAUSTED with retry-after.

The model is a gated stand-in (its generation waits until the test opens the gate), so that which request
holds the slot is decided by the test, not by timing.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio

from ragmesh.answerer.v1 import answerer_pb2, answerer_pb2_grpc
from ragmesh.common.v1 import common_pb2
from ragmesh_answerer.config import Settings
from ragmesh_answerer.llm import Generation
from ragmesh_answerer.server import ADMISSION_KEY, RETRY_AFTER_KEY, build_service
from ragmesh_common.context import UserContext
from ragmesh_common.server import GrpcService
from ragmesh_common.testing import channel_as

ANSWER = "IBM was founded in 1911."
SHOWN = f"{ANSWER} [1]"  # verified, with the source it rests on
REQUEST = answerer_pb2.AnswerRequest(
    question="When was IBM founded?",
    sources=[
        common_pb2.ScoredChunk(
            score=0.9,
            chunk=common_pb2.Chunk(chunk_id="ibm-1", title="IBM", text="IBM was founded in 1911 in Endicott."),
        )
    ],
)


class GatedChat:
    """Answers every prompt with ANSWER once `gate` is open."""

    model = "gated"
    system = "openai"
    endpoint = "in-process"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.generating = 0

    async def wait_ready(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        result: Generation,
        stop: list[str] | None = None,
        deadline: float | None = None,
    ) -> AsyncIterator[str]:
        self.generating += 1
        await self.gate.wait()
        result.text, result.done_reason, result.completion_tokens = ANSWER, "stop", 6
        yield ANSWER


@pytest_asyncio.fixture
async def gated() -> AsyncIterator[tuple[GatedChat, answerer_pb2_grpc.AnswererServiceStub]]:
    chat = GatedChat()
    settings = Settings.defaults(
        "http://127.0.0.1:9", port=0, max_concurrent=1, max_queue=1, queue_timeout_seconds=60.0
    )
    service: GrpcService = build_service(settings, llm=chat)
    await service.start()
    channel = channel_as(f"127.0.0.1:{service.port}", UserContext("tester", "eng", ("employee",)))
    try:
        yield chat, answerer_pb2_grpc.AnswererServiceStub(channel)
    finally:
        chat.gate.set()
        await channel.close()
        await service.stop()


def _value(metadata: object, key: str) -> str | None:
    return next((v for k, v in metadata or () if k == key), None)


async def _drain(call: grpc.aio.UnaryStreamCall) -> list[answerer_pb2.AnswerEvent]:
    """The rest of the events, read with `read()` (a call read once cannot be iterated any more)."""
    events = []
    while (event := await call.read()) is not grpc.aio.EOF:
        events.append(event)
    if (code := await call.code()) != grpc.StatusCode.OK:
        raise grpc.aio.AioRpcError(
            code, await call.initial_metadata(), await call.trailing_metadata(), await call.details()
        )
    return events


async def test_one_generates_one_waits_the_next_is_refused_at_once(gated) -> None:
    chat, stub = gated
    first = stub.Answer(REQUEST, timeout=60)
    assert _value(await first.initial_metadata(), ADMISSION_KEY) == "started"
    second = stub.Answer(REQUEST, timeout=60)
    assert _value(await second.initial_metadata(), ADMISSION_KEY) == "queued"
    queued = await second.read()
    assert queued.HasField("queued") and queued.queued.position == 1

    third = stub.Answer(REQUEST, timeout=60)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _drain(third)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "queue is full" in (refused.value.details() or "")
    assert int(_value(refused.value.trailing_metadata(), RETRY_AFTER_KEY) or 0) >= 1

    chat.gate.set()
    first_events, second_events = await asyncio.gather(_drain(first), _drain(second))
    assert first_events[-1].final.answer == SHOWN and second_events[-1].final.answer == SHOWN
    assert chat.generating == 2


async def test_a_caller_that_leaves_the_queue_frees_its_place(gated) -> None:
    chat, stub = gated
    holder = stub.Answer(REQUEST, timeout=60)
    await holder.initial_metadata()
    leaving = stub.Answer(REQUEST, timeout=60)
    assert (await leaving.read()).queued.position == 1
    leaving.cancel()
    # The place is free again once the answerer has seen the cancellation; the queue holds one.
    for _ in range(200):
        taker = stub.Answer(REQUEST, timeout=60)
        try:  # a refusal ends the stream: read() gives EOF, or raises when the status came first (a loaded machine)
            first_event = await taker.read()
        except grpc.aio.AioRpcError as refused:
            assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            first_event = grpc.aio.EOF
        if first_event is not grpc.aio.EOF:
            break
        assert (await taker.code()) == grpc.StatusCode.RESOURCE_EXHAUSTED
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the cancelled waiter's place never freed")
    assert first_event.queued.position == 1
    chat.gate.set()
    assert (await _drain(taker))[-1].final.answer == SHOWN
    assert (await _drain(holder))[-1].final.answer == SHOWN
    assert chat.generating == 2  # the one that left never generated


async def test_settings_validate_the_limits() -> None:
    from ragmesh_common.config import ConfigError

    for overrides in ({"max_concurrent": 0}, {"max_queue": -1}, {"queue_timeout_seconds": 0.0}):
        with pytest.raises(ConfigError):
            Settings.defaults("http://127.0.0.1:9", **overrides)


class EndlessChat(GatedChat):
    """Writes a token every few milliseconds until its stream is closed; counts the streams still open."""

    def __init__(self) -> None:
        super().__init__()
        self.open_streams = 0

    async def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        result: Generation,
        stop: list[str] | None = None,
        deadline: float | None = None,
    ) -> AsyncIterator[str]:
        self.generating += 1
        self.open_streams += 1
        try:
            while True:
                yield "IBM "
                await asyncio.sleep(0)
        finally:
            self.open_streams -= 1


async def test_a_caller_that_leaves_while_streaming_frees_the_slot_and_the_model_stream() -> None:
    # The servicer is an async generator; when the caller cancels while it sits at a `yield`, gRPC drops it
    # without closing it, so without an explicit close its `finally` (the slot's release, the model stream's
    # close) waited for the garbage collector. Collection is off here, so only an explicit close frees them.
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorServer

    instrumentor = GrpcAioInstrumentorServer()  # its stream wrapper is what made the dropped generator cyclic
    instrumentor.instrument()
    chat = EndlessChat()
    settings = Settings.defaults(
        "http://127.0.0.1:9", port=0, max_concurrent=1, max_queue=1, queue_timeout_seconds=60.0
    )
    service: GrpcService = build_service(settings, llm=chat)
    await service.start()
    channel = channel_as(f"127.0.0.1:{service.port}", UserContext("tester", "eng", ("employee",)))
    stub = answerer_pb2_grpc.AnswererServiceStub(channel)
    streaming = answerer_pb2.AnswerRequest()
    streaming.CopyFrom(REQUEST)
    streaming.stream_draft = True
    gc.disable()
    try:
        for _round in range(3):
            holder = stub.Answer(streaming, timeout=60)
            assert _value(await holder.initial_metadata(), ADMISSION_KEY) == "started"
            for _ in range(3):
                assert (await holder.read()).token
            holder.cancel()
            for _ in range(500):  # the answerer sees the cancellation shortly after
                if chat.open_streams == 0:
                    break
                await asyncio.sleep(0.01)
            assert chat.open_streams == 0, "the cancelled call's model stream was never closed"
        assert chat.generating == 3
        nxt = stub.Answer(streaming, timeout=60)
        assert _value(await nxt.initial_metadata(), ADMISSION_KEY) == "started"  # not queued behind a ghost
        nxt.cancel()
    finally:
        gc.enable()
        await channel.close()
        await service.stop()
        instrumentor.uninstrument()


async def test_an_answer_whose_server_reports_no_token_usage_is_logged_as_unknown(
    gated, caplog: pytest.LogCaptureFixture
) -> None:
    chat, stub = gated
    chat.gate.set()

    async def no_usage(*args: object, result: Generation, **kwargs: object) -> AsyncIterator[str]:
        result.text, result.done_reason = ANSWER, "stop"  # llama.cpp's server sends no usage in the stream
        yield ANSWER

    chat.stream = no_usage  # type: ignore[method-assign]
    with caplog.at_level("INFO", logger="ragmesh_answerer.server"):
        events = await _drain(stub.Answer(REQUEST, timeout=60))
    assert events[-1].HasField("final")
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("answered:")]
    assert logged and logged[-1].endswith("unknown tokens")
