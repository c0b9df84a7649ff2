"""The admin traces store reads `rag_traces` as the requesting user: row-level security lets only a
transaction whose verified identity holds `admin` see spans, so a non-admin gets nothing even past the API's
check. Spans are written by the insert-only traces role."""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragmesh_common.context import UserContext
from ragmesh_common.telemetry import PostgresSpanExporter
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
