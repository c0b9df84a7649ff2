"""A busy answerer (RESOURCE_EXHAUSTED + retry-after) is an HTTP 503 with Retry-After, streamed or not;
queued requests see `queued` progress events.

The answerer here is a real gRPC server speaking the answerer contract (admission headers, queue events,
a trailers-only refusal), the other hops are in-process fakes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio
from grpc import aio

from ragmesh.answerer.v1 import answerer_pb2, answerer_pb2_grpc
from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_cli.tokens import mint
from ragmesh_common.server import insecure_channel
from ragmesh_gateway.app import create_app
from ragmesh_gateway.config import Settings

SECRET = "test-busy-secret-of-sufficient-length"


class Answerer(answerer_pb2_grpc.AnswererServiceServicer):
    """`mode` decides each Answer: "busy" refuses, "queued" waits at position 2 then 1, then answers."""

    mode = "busy"

    async def CheckInput(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's naming
        return answerer_pb2.CheckInputResponse(allowed=True)

    async def Answer(self, request: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:  # noqa: N802
        if self.mode == "busy":
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "the answer queue is full",
                trailing_metadata=(("retry-after", "7"),),
            )
        await context.send_initial_metadata((("x-rag-admission", "queued"),))
        for position in (2, 1):
            yield answerer_pb2.AnswerEvent(
                queued=answerer_pb2.QueueStatus(position=position, estimated_wait_seconds=3.0 * position)
            )
        yield answerer_pb2.AnswerEvent(token="IBM was founded in 1911.")
        yield answerer_pb2.AnswerEvent(
            final=answerer_pb2.AnswerFinal(answer="IBM was founded in 1911.", grounding_score=1.0, grounded=True)
        )


class Fake:
    def __init__(self, **replies: Any) -> None:
        self.replies = replies

    def __getattr__(self, name: str) -> Any:
        async def call(request: Any, **kwargs: Any) -> Any:
            return self.replies[name]

        return call


class FakeMesh:
    def __init__(self, answerer: answerer_pb2_grpc.AnswererServiceStub) -> None:
        self.answerer = answerer
        chunk = common_pb2.ScoredChunk(
            chunk=common_pb2.Chunk(chunk_id="c1", document_id="d1", text="IBM 1911"),
            score=0.8,
            vector_score=0.8,
            lexical_score=1.0,
        )
        self.retriever = Fake(Search=retriever_pb2.SearchResponse(results=[chunk], accessible_documents=1))
        self.graph = Fake(GetContext=graph_pb2.GetContextResponse(), RankChunks=graph_pb2.RankChunksResponse())

    async def close(self) -> None:
        return None


@pytest_asyncio.fixture
async def answerer() -> AsyncIterator[tuple[Answerer, answerer_pb2_grpc.AnswererServiceStub]]:
    servicer = Answerer()
    server = aio.server()
    answerer_pb2_grpc.add_AnswererServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = insecure_channel(f"127.0.0.1:{port}")
    try:
        yield servicer, answerer_pb2_grpc.AnswererServiceStub(channel)
    finally:
        await channel.close()
        await server.stop(None)


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    addr = "127.0.0.1:9"
    yield Settings(
        host="127.0.0.1",
        port=0,
        parser_addr=addr,
        embedder_addr=addr,
        retriever_addr=addr,
        reranker_addr=addr,
        graph_addr=addr,
        answerer_addr=addr,
        redis_url="redis://127.0.0.1:9/0",
        cache_enabled=False,  # a fake mesh without an embedder; the cache: test_gateway_cache.py
        linked_documents=0,  # a fake retriever without FetchSection; the link step: test_gateway_link.py
        traces_dsn=None,
        upload_dir=tmp_path / "uploads",
        jwt_secret=SECRET,
        jwt_issuer=None,
        jwt_audience=None,
        jwks_url=None,
        rate_limit_per_minute=0,
    )


async def _chat(settings: Settings, stub: Any, stream: bool) -> httpx.Response:
    app = create_app(settings, mesh=FakeMesh(stub))
    headers = {"Authorization": f"Bearer {mint(SECRET, 'alice', 'eng', ['employee'])}"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            reply = await client.post(
                "/api/v1/chat",
                headers=headers,
                json={"question": "When was IBM founded?", "stream": stream, "rerank": False},
            )
            await reply.aread()
            return reply


@pytest.mark.parametrize("stream", [False, True])
async def test_busy_answerer_is_a_503_with_retry_after(settings: Settings, answerer: Any, stream: bool) -> None:
    _, stub = answerer
    reply = await _chat(settings, stub, stream)
    assert reply.status_code == 503
    assert reply.headers["retry-after"] == "7"
    assert reply.headers["content-type"].startswith("application/json")
    detail = reply.json()["detail"]
    assert detail["step"] == "answer" and detail["retry_after"] == 7
    assert "RESOURCE_EXHAUSTED" in detail["message"]


async def test_queued_request_streams_its_position_then_answers(settings: Settings, answerer: Any) -> None:
    servicer, stub = answerer
    servicer.mode = "queued"
    reply = await _chat(settings, stub, stream=True)
    assert reply.status_code == 200
    events = [
        (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("data: ", 1)[1]))
        for block in reply.text.replace("\r\n", "\n").strip().split("\n\n")
        if block.startswith("event:")
    ]
    answer_progress = [d for name, d in events if name == "progress" and d.get("stage") == "answer"]
    assert [d["status"] for d in answer_progress][:3] == ["started", "queued", "queued"]
    assert [d.get("position") for d in answer_progress[1:3]] == [2, 1]
    assert answer_progress[1]["estimated_wait_s"] == 6.0
    assert events[-1][0] == "final" and events[-1][1]["answer"] == "IBM was founded in 1911."
