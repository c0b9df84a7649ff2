"""A loaded machine fails no upload: the embed calls in flight are bounded for the whole worker process (so no
call's deadline runs out behind other documents' batches), a batch that still misses its deadline or is refused as
overloaded is sent again within the retry budget (only that batch: the document is not parsed again), and past the
budget the document fails with the step and the cause. Time is a fake clock where the test waits; no wall-clock
threshold."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc

from ragmesh.common.v1 import common_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh_ingestion.config import Deadlines, Settings
from ragmesh_ingestion.pipeline import EMBED_BATCH, EMBED_IN_FLIGHT, Ingestor

from .test_ingestion_pipeline import USER, FakeClients, FakeRedis, Stub, catalogue_statuses, rpc_error
from .test_ingestion_retry import FakeTime, vectors


def slow_for(attempts: int, code: grpc.StatusCode) -> Any:
    """An embedder too slow (or overloaded) for the first `attempts` calls, then answering."""
    calls = 0

    def reply(request: Any) -> Any:
        nonlocal calls
        calls += 1
        return rpc_error(code, "Deadline Exceeded") if calls <= attempts else vectors(request)

    return reply


async def ingest_one(tmp_path: Path, clients: FakeClients, time: FakeTime, budget: float = 900.0) -> FakeRedis:
    path = tmp_path / "a.md"
    path.write_text("# T\n\nBody.")
    redis = FakeRedis()
    ingestor = Ingestor(clients, redis, Deadlines(retry_budget=budget), clock=time.clock, sleep=time.sleep)
    await ingestor.run("doc-1", USER, path, "a.md", "text/markdown", final_attempt=True)  # no Celery retry left
    return redis


async def test_an_embed_batch_that_misses_its_deadline_is_sent_again_and_the_document_ends_ready(
    tmp_path: Path,
) -> None:
    clients = FakeClients()
    clients.embedder.replies["Embed"] = slow_for(3, grpc.StatusCode.DEADLINE_EXCEEDED)
    time = FakeTime()
    await ingest_one(tmp_path, clients, time)
    assert catalogue_statuses(clients)[-1] == "ready"
    names = [name for name, _ in clients.calls]
    assert names.count("Embed") == 4 and names.count("Parse") == 1  # the batch again, not the whole document
    assert time.slept == [0.5, 1.0, 2.0]


async def test_an_overloaded_embedder_is_waited_for_too(tmp_path: Path) -> None:
    clients = FakeClients()
    clients.embedder.replies["Embed"] = slow_for(2, grpc.StatusCode.RESOURCE_EXHAUSTED)
    await ingest_one(tmp_path, clients, FakeTime())
    assert catalogue_statuses(clients)[-1] == "ready"


async def test_past_the_budget_a_slow_embedder_fails_the_document_with_the_step_and_the_cause(tmp_path: Path) -> None:
    clients = FakeClients()
    clients.embedder.replies["Embed"] = slow_for(10**6, grpc.StatusCode.DEADLINE_EXCEEDED)
    time = FakeTime()
    redis = await ingest_one(tmp_path, clients, time, budget=60.0)
    assert 50.0 <= sum(time.slept) <= 60.0
    assert catalogue_statuses(clients)[-1] == "failed"
    assert redis.published[-1][1]["error"] == "embed failed: no reply within the deadline (DEADLINE_EXCEEDED)"


async def test_a_refused_batch_is_not_sent_again(tmp_path: Path) -> None:
    clients = FakeClients()
    clients.embedder.replies["Embed"] = rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "text 0 is empty")
    await ingest_one(tmp_path, clients, FakeTime())
    assert [name for name, _ in clients.calls].count("Embed") == 1
    assert catalogue_statuses(clients)[-1] == "failed"


class CountingEmbedder(Stub):
    """An embedder whose calls take a while (on the event loop); records how many are in flight at once and the
    deadline each was given."""

    def __init__(self, calls: list[tuple[str, Any]]) -> None:
        super().__init__(calls)
        self.in_flight = self.most = 0
        self.timeouts: list[float] = []

    async def Embed(self, request: Any, **options: Any) -> Any:  # noqa: N802 - the RPC's name
        self.timeouts.append(options["timeout"])
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        return vectors(request)


async def test_the_embed_calls_in_flight_are_bounded_for_all_documents_of_the_worker(tmp_path: Path) -> None:
    """Eight documents at once (the worker's concurrency), three batches each: at most EMBED_IN_FLIGHT calls are
    at the embedder, whatever the number of documents, so each call's deadline times its own batch."""
    chunks = [
        common_pb2.Chunk(chunk_id=f"c{i}", level=common_pb2.CHUNK_LEVEL_PARAGRAPH, text=f"Paragraph {i}.")
        for i in range(2 * EMBED_BATCH + 1)
    ]
    clients = FakeClients(parse=parser_pb2.ParseResponse(chunks=chunks, page_count=1, title="T", format="markdown"))
    embedder = CountingEmbedder(clients.calls)
    clients.embedder = embedder
    gate = asyncio.Semaphore(EMBED_IN_FLIGHT)  # what the worker shares between the documents of its process
    path = tmp_path / "a.md"
    path.write_text("# T")
    deadlines = Deadlines(embed=42.0)
    await asyncio.gather(
        *[
            Ingestor(clients, FakeRedis(), deadlines, embed_gate=gate).run(f"doc-{i}", USER, path, "a.md", "")
            for i in range(8)
        ]
    )
    assert catalogue_statuses(clients).count("ready") == 8
    assert len(embedder.timeouts) == 8 * 3
    assert embedder.most == EMBED_IN_FLIGHT
    assert set(embedder.timeouts) == {42.0}  # the configured deadline, per call


def test_the_embed_deadline_is_a_setting() -> None:
    def settings(**env: str) -> Settings:
        return Settings(
            parser_addr="p:1",
            embedder_addr="e:1",
            retriever_addr="r:1",
            graph_addr="g:1",
            redis_url="redis://x",
            upload_dir=Path("/srv/uploads"),
            **env,
        )

    assert settings().deadlines.embed == Deadlines.embed == 60.0
    assert settings(INGEST_EMBED_DEADLINE_SECONDS="180").deadlines.embed == 180.0
