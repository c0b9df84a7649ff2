"""A service that restarts while a document ingests: the worker waits for it (wait_for_ready, then retries with
backoff within INGEST_RETRY_BUDGET_SECONDS) and the document ends `ready`; past the budget it fails with a message
that names the step and the cause, never an internal address. Time is a fake clock: no test sleeps."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest

from ragmesh.embedder.v1 import embedder_pb2
from ragmesh_common.ingestion import RETRYING
from ragmesh_ingestion.config import Deadlines, Settings
from ragmesh_ingestion.pipeline import RETRY_MAX_SECONDS, Ingestor, TransientIngestError

from .test_ingestion_pipeline import DOC, USER, FakeClients, FakeRedis, ReadyChannel, catalogue_statuses, rpc_error

PEER = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:50053: Failed to connect to remote host"


class FakeTime:
    """A monotonic clock that only `sleep` moves."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def down_for(attempts: int, then: Any) -> Any:
    """A reply that is UNAVAILABLE (a refused connection) for the first `attempts` calls, then `then`."""
    calls = 0

    def reply(request: Any) -> Any:
        nonlocal calls
        calls += 1
        return rpc_error(grpc.StatusCode.UNAVAILABLE, PEER) if calls <= attempts else then(request)

    return reply


def vectors(request: Any) -> embedder_pb2.EmbedResponse:
    return embedder_pb2.EmbedResponse(vectors=[embedder_pb2.Vector(values=[0.1, 0.2]) for _ in request.texts])


async def run(tmp_path: Path, clients: FakeClients, time: FakeTime, *, budget: float, final: bool = True) -> FakeRedis:
    path = tmp_path / "a.md"
    path.write_text("# T\n\nBody.")
    redis = FakeRedis()
    ingestor = Ingestor(clients, redis, Deadlines(retry_budget=budget), clock=time.clock, sleep=time.sleep)
    await ingestor.run(DOC, USER, path, "a.md", "text/markdown", final_attempt=final)
    return redis


async def test_an_embedder_restarting_mid_ingestion_is_waited_for_and_the_document_ends_ready(tmp_path: Path) -> None:
    clients = FakeClients()
    clients.embedder.replies["Embed"] = down_for(7, vectors)  # 0.5+1+2+4+8+10+10 s: a 30-second start
    time = FakeTime()
    redis = await run(tmp_path, clients, time, budget=Deadlines.retry_budget)
    assert catalogue_statuses(clients)[-1] == "ready"
    assert time.slept == [0.5, 1.0, 2.0, 4.0, 8.0, RETRY_MAX_SECONDS, RETRY_MAX_SECONDS]
    retries = [e for _, e in redis.published if e["status"] == RETRYING]
    assert len(retries) == 7 and {e["step"] for e in retries} == {"embed"}
    assert all("127.0.0.1" not in e["message"] and "ipv4" not in e["message"] for e in retries), retries


def test_the_default_budget_outlasts_any_service_start() -> None:
    # the chart's startup probes give a service up to failureThreshold 60 x periodSeconds 10 to start
    chart = (Path(__file__).resolve().parents[3] / "helm" / "ragmesh" / "templates" / "_objects.tpl").read_text()
    assert '"periodSeconds" 10 "timeoutSeconds" 5 "failureThreshold" 60' in chart
    assert Deadlines.retry_budget > 60 * 10
    settings = Settings(
        parser_addr="p:1",
        embedder_addr="e:1",
        retriever_addr="r:1",
        graph_addr="g:1",
        redis_url="redis://x",
        upload_dir=Path("/srv/uploads"),
    )
    assert settings.deadlines.retry_budget == Deadlines.retry_budget


async def test_past_the_budget_the_document_fails_with_the_cause_and_no_address(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clients = FakeClients()
    clients.embedder.replies["Embed"] = down_for(10**6, vectors)
    time = FakeTime()
    with caplog.at_level(logging.WARNING):
        redis = await run(tmp_path, clients, time, budget=60.0)
    assert 50.0 <= sum(time.slept) <= 60.0  # waited within the budget, then gave up
    assert catalogue_statuses(clients)[-1] == "failed"
    [failed] = [r for name, r in clients.calls if name == "UpdateDocumentStatus" and r.error]
    assert failed.error == "embed failed: the service is unreachable (UNAVAILABLE)"
    assert redis.published[-1][1]["error"] == failed.error
    assert "ipv4:127.0.0.1:50053" in caplog.text  # the full detail stays in the log


async def test_before_the_last_attempt_a_budget_spent_goes_back_to_the_queue(tmp_path: Path) -> None:
    clients = FakeClients()
    clients.embedder.replies["Embed"] = down_for(10**6, vectors)
    with pytest.raises(TransientIngestError, match="embed: UNAVAILABLE"):
        await run(tmp_path, clients, FakeTime(), budget=5.0, final=False)
    assert "failed" not in catalogue_statuses(clients)


async def test_a_refusal_keeps_its_message_without_addresses(tmp_path: Path) -> None:
    clients = FakeClients(parse=rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "not a PDF (from 10.0.3.7:50052)"))
    redis = await run(tmp_path, clients, FakeTime(), budget=60.0)
    assert redis.published[-1][1]["error"] == "parse failed: not a PDF (from <address>)"


async def test_an_unreadable_upload_fails_without_naming_its_path(tmp_path: Path) -> None:
    clients = FakeClients()
    redis = FakeRedis()
    missing = tmp_path / "store" / "secret-layout" / "a.md"
    await Ingestor(clients, redis, Deadlines()).run(DOC, USER, missing, "a.md", "text/markdown")
    error = redis.published[-1][1]["error"]
    assert error == "ingest failed: the stored upload could not be read" and "secret-layout" not in error


async def test_a_service_never_reachable_fails_after_the_budget(tmp_path: Path) -> None:
    class NeverReady:
        async def channel_ready(self) -> None:
            await asyncio.Event().wait()  # the channel never connects

    clients = FakeClients()
    clients.channel = lambda name: NeverReady() if name == "parser" else ReadyChannel()  # type: ignore[method-assign]
    redis = await run(tmp_path, clients, FakeTime(), budget=0.2)  # channel_ready is bounded by the budget
    assert redis.published[-1][1]["error"] == "parse failed: the service is unreachable (UNAVAILABLE)"
    assert "Parse" not in [name for name, _ in clients.calls]  # never called: its channel never connected
