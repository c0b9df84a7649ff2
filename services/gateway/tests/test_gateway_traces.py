"""The admin traces store reads `rag_traces` as the requesting user: row-level security lets only a
transaction whose verified identity holds `admin` see spans, so a non-admin gets nothing even past the API's
check. Spans are written by the insert-only traces role."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragmesh_common.config import ConfigError
from ragmesh_common.context import UserContext
from ragmesh_common.telemetry import PostgresSpanExporter
from ragmesh_gateway.config import Settings
from ragmesh_gateway.traces import TraceStore


async def test_only_an_admins_roles_read_the_stored_traces(postgres) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "gateway"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("traces-store-probe"), tracer.start_as_current_span("child"):
        pass
    spans = memory.get_finished_spans()
    exporter = PostgresSpanExporter(postgres.traces_dsn)
    try:
        exporter.export(spans)
    finally:
        exporter.shutdown()
    trace_id = format(spans[0].context.trace_id, "032x")
    store = TraceStore(postgres.app_dsn, postgres.rls_key)
    await store.open()
    try:
        listed = await store.list(UserContext("root", "ops", ("employee", "admin")), name="traces-store-probe")
        assert [(t["trace_id"], t["span_count"], t["root_name"]) for t in listed] == [
            (trace_id, 2, "traces-store-probe")
        ]
        admin = UserContext("root", "ops", ("admin",))
        assert {s["name"] for s in await store.spans(admin, trace_id)} == {"traces-store-probe", "child"}
        for roles in ((), ("employee",), ("administrator",)):
            user = UserContext("someone", "ops", roles)
            assert await store.list(user, name="traces-store-probe") == []
            assert await store.spans(user, trace_id) == []
    finally:
        await store.close()


def test_trace_reads_need_the_rls_key(tmp_path: Path) -> None:
    """Without the key the gateway could only read spans by claiming a role the database no longer believes."""
    base = dict(
        parser_addr="x:1",
        embedder_addr="x:1",
        retriever_addr="x:1",
        reranker_addr="x:1",
        graph_addr="x:1",
        answerer_addr="x:1",
        redis_url="redis://127.0.0.1:1/0",
        upload_dir=tmp_path,
        jwt_secret="s" * 32,
        traces_dsn="postgresql://ragmesh_app@127.0.0.1:1/ragmesh",
    )
    with pytest.raises(ConfigError, match="GATEWAY_TRACES_RLS_KEY"):
        Settings(**base)
    with pytest.raises(ConfigError, match=r"traces_rls_key|GATEWAY_TRACES_RLS_KEY"):
        Settings(**base, traces_rls_key="too short")
    assert Settings(**base, traces_rls_key="k" * 32).traces_rls_key == "k" * 32
    with pytest.raises(ValueError, match="GATEWAY_TRACES_RLS_KEY"):
        TraceStore("postgresql://ragmesh_app@127.0.0.1:1/ragmesh", "")


async def test_filters_paging_and_step_percentiles(postgres) -> None:
    """The dashboard's filters (user, errors only, minimum duration, step, free text, window), its pages, and
    the per-step percentiles and error rates, over spans as the exporters store them."""
    import time as clock
    from datetime import UTC, datetime, timedelta

    from opentelemetry import trace as otel

    from ragmesh_gateway.traces import TraceFilter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "gateway"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    marker = f"probe{clock.time_ns()}"
    now = clock.time_ns()

    def request(user: str, step_ms: list[float], failed: bool = False, text: str = "") -> str:
        root = tracer.start_span(f"POST /api/v1/chat {marker}", start_time=now, attributes={"rag.user.id": user})
        context = otel.set_span_in_context(root)
        at = now
        for ms in step_ms:
            step = tracer.start_span("retrieve", context=context, start_time=at, attributes={"rag.query.kind": text})
            if failed:
                step.set_status(otel.Status(otel.StatusCode.ERROR, "retriever down"))
            at += int(ms * 1e6)
            step.end(end_time=at)
        root.end(end_time=at)
        return format(root.get_span_context().trace_id, "032x")

    slow = request(f"alice-{marker}", [400.0], text="policy lookup")
    failed = request(f"bob-{marker}", [5.0], failed=True)
    quick = [request(f"carol-{marker}", [float(ms)]) for ms in range(1, 101)]  # 1..100 ms
    exporter = PostgresSpanExporter(postgres.traces_dsn)
    try:
        exporter.export(memory.get_finished_spans())
    finally:
        exporter.shutdown()
    store = TraceStore(postgres.app_dsn, postgres.rls_key)
    await store.open()
    admin = UserContext("root", "ops", ("admin",))
    try:

        async def ids(**filters: object) -> list[str]:
            rows = await store.list(admin, limit=500, filters=TraceFilter(name=marker, **filters))  # type: ignore[arg-type]
            return [row["trace_id"] for row in rows]

        assert await ids(user=f"alice-{marker}") == [slow]
        assert await ids(errors=True) == [failed]
        assert await ids(min_ms=300) == [slow]
        assert await ids(text="policy lookup") == [slow]
        assert await ids(text="100%") == []  # a wildcard in the text is taken literally
        assert await ids(step="no such step") == []
        assert len(await ids(step="retrieve")) == 102
        assert await ids(since=datetime.now(UTC) + timedelta(hours=1)) == []
        first = await store.list(admin, limit=40, filters=TraceFilter(name=marker))
        second = await store.list(admin, limit=40, filters=TraceFilter(name=marker), offset=40)
        assert len(first) == len(second) == 40 and not {r["trace_id"] for r in first} & {r["trace_id"] for r in second}
        assert set(quick) <= set(await ids())

        window = TraceFilter(since=datetime.now(UTC) - timedelta(minutes=10))
        steps = {(s["service"], s["name"]): s for s in await store.stats(admin, window, limit=200)}
        retrieve = steps[("gateway", "retrieve")]
        assert retrieve["count"] >= 102 and retrieve["errors"] >= 1
        assert 0 < retrieve["error_rate"] < 0.05
        assert retrieve["p50_ms"] <= retrieve["p95_ms"] <= retrieve["p99_ms"]
        assert 40 <= retrieve["p50_ms"] <= 60 and retrieve["p99_ms"] >= 95  # 1..100 ms, 5 ms and 400 ms
        assert await store.stats(UserContext("someone", "ops", ("employee",)), window) == []
    finally:
        await store.close()


def test_what_an_untraced_request_calls_is_not_traced_either(tmp_path: Path) -> None:
    """A readiness probe's Redis PING, the dashboard's cache counters: instrumentation is off for the whole of an
    untraced request (else each call starts a one-span trace of its own), and on for every other request."""
    from opentelemetry.instrumentation.utils import is_instrumentation_enabled
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from ragmesh_gateway.app import UntracedCalls

    async def calls(request: Request) -> JSONResponse:
        return JSONResponse({"traced": is_instrumentation_enabled()})

    paths = ["/readyz", "/healthz", "/metrics", "/api/v1/admin/cache", "/api/v1/traces", "/api/v1/chat", "/v1/models"]
    app = Starlette(routes=[Route(path, calls) for path in paths])
    client = TestClient(UntracedCalls(app))
    traced = {path: client.get(path).json()["traced"] for path in paths}
    assert traced == {
        "/readyz": False,
        "/healthz": False,
        "/metrics": False,
        "/api/v1/admin/cache": False,
        "/api/v1/traces": False,
        "/api/v1/chat": True,
        "/v1/models": True,
    }
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_gateway_bad_input import FakeMesh, settings

    from ragmesh_gateway.app import create_app

    gateway = create_app(settings(tmp_path), mesh=FakeMesh())
    assert any(m.cls is UntracedCalls for m in gateway.user_middleware)  # the gateway runs behind it
