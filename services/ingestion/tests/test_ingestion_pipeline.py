"""The ingestion pipeline over fake clients: the catalogue and the progress events name each status the same way,
a transient hop failure is retried, and a permanent one fails the document with the step's message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio

from ragmesh.common.v1 import common_pb2
from ragmesh.embedder.v1 import embedder_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.context import UserContext
from ragmesh_common.ingestion import (
    RETRYING,
    TERMINAL,
    IngestTask,
    channel_name,
    create_celery,
    send_ingest,
    status_name,
)
from ragmesh_ingestion.config import Deadlines
from ragmesh_ingestion.pipeline import Ingestor, TransientIngestError

DOC = "7b0e3f5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
USER = UserContext(user_id="alice", department="eng", roles=("employee",), token="t")


def rpc_error(code: grpc.StatusCode, details: str = "") -> aio.AioRpcError:
    return aio.AioRpcError(code, aio.Metadata(), aio.Metadata(), details=details)


class Stub:
    """Records each call and answers it with a fixed reply (or raises it, for an exception)."""

    def __init__(self, calls: list[tuple[str, Any]], **replies: Any) -> None:
        self.calls, self.replies = calls, replies

    def __getattr__(self, name: str) -> Any:
        async def call(request: Any, **options: Any) -> Any:
            assert options.get("wait_for_ready") is True, f"{name} without wait_for_ready"
            self.calls.append((name, request))
            reply = self.replies[name]
            reply = reply(request) if callable(reply) else reply
            if isinstance(reply, Exception):
                raise reply
            return reply

        return call


class ParserStub(Stub):
    """The parser: ParseStream answers with the `Parse` reply (progress events first, when given), recorded as
    "Parse"."""

    def __init__(
        self, calls: list[tuple[str, Any]], progress: tuple[tuple[int, int], ...] = (), **replies: Any
    ) -> None:
        super().__init__(calls, **replies)
        self.progress = progress

    def ParseStream(self, request: Any, **options: Any) -> Any:  # noqa: N802 - the RPC's name
        async def events() -> Any:
            reply = await self.Parse(request.request, **options)
            for done, total in self.progress:
                yield parser_pb2.ParseStreamResponse(
                    progress=parser_pb2.ParseProgress(pages_done=done, pages_total=total)
                )
            yield parser_pb2.ParseStreamResponse(response=reply)

        return events()


class ReadyChannel:
    async def channel_ready(self) -> None:
        pass


class FakeClients:
    def channel(self, name: str) -> ReadyChannel:
        return ReadyChannel()

    def __init__(self, parse: Any = None, progress: tuple[tuple[int, int], ...] = ()) -> None:
        self.calls: list[tuple[str, Any]] = []
        chunks = [
            common_pb2.Chunk(chunk_id="d", document_id=DOC, level=common_pb2.CHUNK_LEVEL_DOCUMENT, text="Sum."),
            common_pb2.Chunk(chunk_id="p", document_id=DOC, level=common_pb2.CHUNK_LEVEL_PARAGRAPH, text="Body."),
        ]
        self.parser = ParserStub(
            self.calls,
            progress,
            Parse=parse or parser_pb2.ParseResponse(chunks=chunks, page_count=1, title="T", format="markdown"),
        )
        self.embedder = Stub(
            self.calls,
            Embed=lambda r: embedder_pb2.EmbedResponse(
                vectors=[embedder_pb2.Vector(values=[0.1, 0.2]) for _ in r.texts]
            ),
        )
        self.retriever = Stub(
            self.calls, UpdateDocumentStatus=common_pb2.Document(), IndexChunks=retriever_pb2.IndexChunksResponse()
        )
        self.graph = Stub(self.calls, IngestChunks=graph_pb2.IngestChunksResponse(entities=2, relations=1))


class FakeRedis:
    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any]]] = []

    async def set(self, key: str, value: str, ex: int) -> None:
        pass

    async def publish(self, channel: str, payload: str) -> None:
        self.published.append((channel, json.loads(payload)))

    def pipeline(self, transaction: bool = True) -> FakePipeline:
        return FakePipeline(self)


class FakePipeline:
    """redis.asyncio's pipeline as Ingestor.publish uses it: commands queued, sent by execute()."""

    def __init__(self, redis: FakeRedis) -> None:
        self.redis = redis
        self.queued: list[tuple[str, str]] = []

    async def __aenter__(self) -> FakePipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def set(self, key: str, value: str, ex: int) -> None:
        pass

    def publish(self, channel: str, payload: str) -> None:
        self.queued.append((channel, payload))

    async def execute(self) -> None:
        for channel, payload in self.queued:
            await self.redis.publish(channel, payload)


async def ingest(tmp_path: Path, clients: FakeClients, *, final_attempt: bool = True) -> FakeRedis:
    path = tmp_path / "a.md"
    path.write_text("# T\n\nBody.")
    redis = FakeRedis()
    await Ingestor(clients, redis, Deadlines()).run(
        DOC, USER, path, "a.md", "text/markdown", final_attempt=final_attempt
    )
    return redis


def catalogue_statuses(clients: FakeClients) -> list[str]:
    return [status_name(r.status) for name, r in clients.calls if name == "UpdateDocumentStatus"]


async def test_events_and_catalogue_use_one_status_vocabulary(tmp_path: Path) -> None:
    clients = FakeClients()
    redis = await ingest(tmp_path, clients)
    events = [e["status"] for channel, e in redis.published]
    assert {channel for channel, _ in redis.published} == {channel_name(DOC)}
    assert catalogue_statuses(clients) == ["parsing", "embedding", "indexing", "ready"]
    assert [s for i, s in enumerate(events) if i == 0 or s != events[i - 1]] == catalogue_statuses(clients)
    assert redis.published[-1][1]["status"] in TERMINAL and redis.published[-1][1]["graph"] == "2 entities, 1 relations"
    embedded = [r for name, r in clients.calls if name == "Embed"]
    assert [list(r.texts) for r in embedded] == [["Sum.", "Body."]]


async def test_events_count_chunks_as_the_api_does(tmp_path: Path) -> None:
    """`chunks` in the events is the paragraph count, the number the API's chunk_count and the CLI show; the summary
    chunks embedded beside them are `to_embed`."""
    clients = FakeClients()
    redis = await ingest(tmp_path, clients)
    embedded = [r for name, r in clients.calls if name == "Embed"]
    assert [list(r.texts) for r in embedded] == [["Sum.", "Body."]]  # a document summary and one paragraph
    by_status = {e["status"]: e for _, e in redis.published if "chunks" in e}
    assert by_status["embedding"]["chunks"] == 1 and by_status["embedding"]["to_embed"] == 2
    assert by_status["ready"]["chunks"] == 1


async def test_ocr_progress_is_published_per_page_and_warnings_reach_the_catalogue(tmp_path: Path) -> None:
    """… and the parser's reading, which marks the document stale once a later parser reads files otherwise."""
    chunks = [common_pb2.Chunk(chunk_id="p", document_id=DOC, level=common_pb2.CHUNK_LEVEL_PARAGRAPH, text="Scan.")]
    note = "OCR confidence below 0.8 on page(s) 2 (0.61): check the text of the scan"
    parsed = parser_pb2.ParseResponse(
        chunks=chunks, page_count=3, title="T", format="pdf", warnings=[note], parser_version=4
    )
    clients = FakeClients(parse=parsed, progress=((1, 3), (2, 3), (3, 3)))
    redis = await ingest(tmp_path, clients)
    pages = [(e["pages_done"], e["pages_total"], e["progress"]) for _, e in redis.published if "pages_done" in e]
    assert pages == [(1, 3, 0.167), (2, 3, 0.233), (3, 3, 0.3)]
    assert all(e["status"] == "parsing" for _, e in redis.published if "pages_done" in e)
    ready = [r for name, r in clients.calls if name == "UpdateDocumentStatus" and status_name(r.status) == "ready"]
    assert list(ready[0].warnings) == [note] and ready[0].parser_version == 4
    assert redis.published[-1][1]["warnings"] == [note]


async def test_transient_failure_is_retried_and_announced(tmp_path: Path) -> None:
    clients = FakeClients(parse=rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "parser busy"))
    path = tmp_path / "a.md"
    path.write_text("# T")
    redis = FakeRedis()
    with pytest.raises(TransientIngestError, match="parse: DEADLINE_EXCEEDED"):
        await Ingestor(clients, redis, Deadlines()).run(DOC, USER, path, "a.md", "text/markdown", final_attempt=False)
    assert catalogue_statuses(clients) == ["parsing"]  # no failed status: the task runs again
    assert [e["status"] for _, e in redis.published] == ["parsing", RETRYING]
    assert redis.published[-1][1]["step"] == "parse"


async def test_last_attempt_fails_the_document_with_the_step(tmp_path: Path) -> None:
    clients = FakeClients(parse=rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "not a PDF"))
    redis = await ingest(tmp_path, clients)
    assert catalogue_statuses(clients) == ["parsing", "failed"]
    last = redis.published[-1][1]
    assert (last["status"], last["error"]) == ("failed", "parse failed: not a PDF")
    assert "failed" in TERMINAL and RETRYING not in TERMINAL


def test_status_names_are_the_proto_enum_without_its_prefix() -> None:
    names = {status_name(v) for v in common_pb2.DocumentStatus.values()}
    assert names == {"unspecified", "queued", "parsing", "embedding", "indexing", "ready", "failed"}
    assert {"ready", "failed"} == TERMINAL


def test_a_task_carries_its_arguments_in_the_contracts_order() -> None:
    sent: list[tuple[str, list[Any]]] = []
    app = create_celery("redis://127.0.0.1:1/0")
    app.send_task = lambda name, args, **_: sent.append((name, args))
    send_ingest(app, IngestTask(DOC, "signed", "/u/a.md", "a.md", "text/markdown"))
    [(name, args)] = sent
    assert name == "ragmesh.ingest_document" and args == [DOC, "signed", "/u/a.md", "a.md", "text/markdown", 0]
    assert IngestTask.from_args(*args) == IngestTask(DOC, "signed", "/u/a.md", "a.md", "text/markdown")
    json.dumps(args)  # the broker's serializer is JSON


async def test_a_new_version_is_ingested_under_its_number(tmp_path: Path) -> None:
    clients = FakeClients()
    path = tmp_path / "a.md"
    path.write_text("# T\n\nBody.")
    await Ingestor(clients, FakeRedis(), Deadlines()).run(DOC, USER, path, "a.md", "text/markdown", version=3)
    versioned = [(name, r.version) for name, r in clients.calls if name in ("UpdateDocumentStatus", "IndexChunks")]
    assert versioned and all(version == 3 for _, version in versioned)
    assert ("IndexChunks", 3) in versioned
    graph = [r for name, r in clients.calls if name == "IngestChunks"]
    assert len(graph) == 1 and graph[0].document_id == DOC  # the graph replaces the document's data (graph tests)


@pytest.mark.parametrize(
    "catalogued, topic",
    [
        (common_pb2.Document(title="a", title_given=False), "T"),  # the file-name stem: the parser's title wins
        (common_pb2.Document(title="Q3 figures", title_given=True), "Q3 figures"),  # a person's title is kept
    ],
)
async def test_the_graph_topic_is_the_title_a_person_chose_else_the_parsed_one(
    tmp_path: Path, catalogued: common_pb2.Document, topic: str
) -> None:
    clients = FakeClients()
    clients.retriever.replies["UpdateDocumentStatus"] = catalogued
    await ingest(tmp_path, clients)
    graph = [r for name, r in clients.calls if name == "IngestChunks"]
    assert [r.title for r in graph] == [topic]
    indexed = [c.title for name, r in clients.calls if name == "IndexChunks" for c in r.chunks]
    assert indexed == (["Q3 figures"] * 2 if catalogued.title_given else ["", ""])  # else the parser's own
    ready = [r for name, r in clients.calls if name == "UpdateDocumentStatus" and status_name(r.status) == "ready"]
    assert ready[0].title == "T"  # the catalogue decides whether the parsed title replaces the one it has


async def test_a_superseded_version_stops_without_failing_the_document(tmp_path: Path) -> None:
    clients = FakeClients()
    clients.retriever.replies["IndexChunks"] = rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "version 2 superseded")
    path = tmp_path / "a.md"
    path.write_text("# T\n\nBody.")
    redis = FakeRedis()
    await Ingestor(clients, redis, Deadlines()).run(DOC, USER, path, "a.md", "text/markdown", version=2)
    assert "failed" not in catalogue_statuses(clients)
    assert "failed" not in [e["status"] for _, e in redis.published]
    assert not [name for name, _ in clients.calls if name == "IngestChunks"]


def test_a_task_carries_the_version() -> None:
    sent: list[tuple[str, list[Any]]] = []
    app = create_celery("redis://127.0.0.1:1/0")
    app.send_task = lambda name, args, **_: sent.append((name, args))
    send_ingest(app, IngestTask(DOC, "signed", "/u/v2/a.md", "a.md", "text/markdown", 2))
    assert sent[0][1][-1] == 2
