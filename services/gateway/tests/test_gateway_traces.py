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
