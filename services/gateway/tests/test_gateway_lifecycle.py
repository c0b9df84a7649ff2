"""Readiness (can this gateway answer chat), the graceful end of open chat streams, and trace retention."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient

from ragmesh_gateway.app import create_app
from ragmesh_gateway.config import Settings
from ragmesh_gateway.shutdown import SHUTDOWN_MESSAGE, until_shutdown
from ragmesh_gateway.traces import Retention, TraceStore

SERVICES = ("parser", "embedder", "retriever", "reranker", "graph", "answerer")


class HealthOnlyMesh:
    def __init__(self, **statuses: str) -> None:
        self.statuses = {name: statuses.get(name, "SERVING") for name in SERVICES}

    async def health(self, timeout: float = 2.0) -> dict[str, str]:
        return dict(self.statuses)

    async def close(self) -> None:
        pass


def settings(tmp_path: Path, redis_url: str = "redis://127.0.0.1:1/0") -> Settings:
    addr = "127.0.0.1:1"
    return Settings(
        host="127.0.0.1",
        port=0,
        parser_addr=addr,
        embedder_addr=addr,
        retriever_addr=addr,
        reranker_addr=addr,
        graph_addr=addr,
        answerer_addr=addr,
        redis_url=redis_url,
        traces_dsn=None,
        upload_dir=tmp_path / "uploads",
        jwt_secret="x" * 32,
        jwt_issuer=None,
        jwt_audience=None,
        jwks_url=None,
    )


def readyz(tmp_path: Path, **statuses: str) -> tuple[int, dict[str, Any]]:
    app = create_app(settings(tmp_path), mesh=HealthOnlyMesh(**statuses))
    with TestClient(app) as client:
        reply = client.get("/readyz")
    return reply.status_code, reply.json()


def test_ready_while_optional_parts_are_down(tmp_path: Path) -> None:
    """Redis (nothing listens on port 1) and the embedder down: chat still works, so the pod stays ready."""
    status, body = readyz(tmp_path, embedder="UNREACHABLE (UNAVAILABLE)", graph="NOT_SERVING")
    assert status == 200 and body["ready"] is True
    assert sorted(body["degraded"]) == ["embedder", "graph", "redis"]
    assert body["services"]["redis"].startswith("UNREACHABLE")


@pytest.mark.parametrize("down", ["retriever", "answerer"])
def test_not_ready_without_a_part_chat_needs(tmp_path: Path, down: str) -> None:
    status, body = readyz(tmp_path, **{down: "NOT_SERVING"})
    assert status == 503 and body["ready"] is False
    assert f"{down} (NOT_SERVING)" in body["reason"]


def test_open_stream_ends_with_an_error_event_on_shutdown() -> None:
    finished: list[str] = []

    async def chat() -> Any:
        try:
            yield {"event": "progress", "data": {"stage": "retrieve"}}
            yield {"event": "token", "data": {"text": "Big"}}
            await asyncio.sleep(60)  # the answerer is still generating
            yield {"event": "final", "data": {}}
        finally:
            finished.append("chat span ended")

    async def main() -> list[dict[str, Any]]:
        shutdown = anyio.Event()
        seen = []
        async for item in until_shutdown(chat(), shutdown):
            seen.append(item)
            if item["event"] == "token":
                shutdown.set()
        return seen

    seen = asyncio.run(asyncio.wait_for(main(), 30))
    assert [item["event"] for item in seen] == ["progress", "token", "error"]
    assert seen[-1]["data"] == {"step": "gateway", "message": SHUTDOWN_MESSAGE, "status": 503}
    assert finished == ["chat span ended"]


def test_without_shutdown_the_stream_passes_through_and_errors_propagate() -> None:
    async def chat() -> Any:
        yield {"event": "token", "data": {"text": "a"}}
        raise RuntimeError("boom")

    async def main() -> list[dict[str, Any]]:
        return [item async for item in until_shutdown(chat(), anyio.Event())]

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(main())


def test_retention_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TRACES_RETENTION_HOURS", "2.5")
    monkeypatch.setenv("RAG_TRACES_MAX_ROWS", "0")
    assert Retention.from_env() == Retention(hours=2.5, max_rows=0, interval_seconds=300.0)
    monkeypatch.setenv("RAG_TRACES_MAX_ROWS", "-1")
    with pytest.raises(SystemExit, match="RAG_TRACES_MAX_ROWS"):
        Retention.from_env()


def test_retention_deletes_by_age_then_by_size(postgres: Any) -> None:
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM rag_traces")
        # 30 spans two days old, 40 spans spread over the last 40 minutes
        conn.execute("""INSERT INTO rag_traces (trace_id, span_id, name, service, kind, start_time)
                        SELECT 'old' || i, 's', 'chat', 'gateway', 'server', now() - interval '2 days'
                        FROM generate_series(1, 30) i""")
        conn.execute("""INSERT INTO rag_traces (trace_id, span_id, name, service, kind, start_time)
                        SELECT 'new' || i, 's', 'chat', 'gateway', 'server', now() - make_interval(mins => i)
                        FROM generate_series(1, 40) i""")

    async def enforce(retention: Retention) -> int:
        # reads as the application role, prunes as the retention role, as the gateway runs them
        store = TraceStore(postgres.app_dsn, postgres.rls_key, retention_dsn=postgres.retention_dsn)
        await store.open()
        try:
            return await store.enforce(retention)
        finally:
            await store.close()

    assert asyncio.run(enforce(Retention(hours=24, max_rows=0))) == 30
    assert asyncio.run(enforce(Retention(hours=24, max_rows=25))) == 15
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        left = [r[0] for r in conn.execute("SELECT trace_id FROM rag_traces ORDER BY start_time DESC")]
        conn.execute("DELETE FROM rag_traces")
    assert left == [f"new{i}" for i in range(1, 26)]  # the 25 newest
