"""The span exporter to PostgreSQL `rag_traces`: every field of a span stored, a batch in one statement, a batch
that repeats stored spans still stores its new ones, an unreachable database fails the export without raising,
and only an admin's transaction reads what the writers stored."""

from __future__ import annotations

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragmesh_common.rls import SET_IDENTITY, assertion
from ragmesh_common.telemetry import PostgresSpanExporter


def _as(conn: psycopg.Connection, key: str, roles: tuple[str, ...]) -> None:
    """This transaction's identity, verified by the database (the retriever and the gateway set it so)."""
    conn.execute(SET_IDENTITY, assertion(key, "u", "", roles, conn.info.backend_pid))


@pytest.fixture
def recorded() -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "gateway"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    # a server span and its child
    with (
        tracer.start_as_current_span(
            "POST /api/v1/search",
            kind=trace.SpanKind.SERVER,
            attributes={"rag.user": "alice", "rag.top_k": 10, "rag.levels": [1, 2]},
        ),
        tracer.start_as_current_span("lexical leg") as leg,
    ):
        leg.add_event("postings read", {"terms": 3})
        leg.set_status(trace.Status(trace.StatusCode.ERROR, "statement timeout"))
    return memory


def _stored(postgres, trace_id: str) -> dict[str, tuple[object, ...]]:
    with psycopg.connect(postgres.app_dsn) as conn:  # spans are read by admins only (row-level security)
        _as(conn, postgres.rls_key, ("admin",))
        rows = conn.execute(
            "SELECT name, span_id, parent_span_id, service, kind, duration_ms, status_code, "
            "status_message, attributes, events FROM rag_traces WHERE trace_id = %s",
            (trace_id,),
        ).fetchall()
    names = [r[0] for r in rows]
    assert len(names) == len(set(names)), f"a span is stored twice: {names}"
    return {r[0]: r[1:] for r in rows}


def test_a_batch_is_stored_with_every_field(postgres, recorded) -> None:
    spans = recorded.get_finished_spans()
    exporter = PostgresSpanExporter(postgres.traces_dsn)
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    server, _leg = sorted(spans, key=lambda s: s.name)  # "POST ..." sorts before "lexical leg"
    stored = _stored(postgres, format(server.context.trace_id, "032x"))
    assert set(stored) == {"POST /api/v1/search", "lexical leg"}
    span_id, parent, service, kind, duration, status, message, attributes, events = stored["POST /api/v1/search"]
    assert (span_id, parent, kind, status) == (format(server.context.span_id, "016x"), None, "server", "unset")
    assert attributes == {"rag.user": "alice", "rag.top_k": 10, "rag.levels": [1, 2]}
    assert duration == pytest.approx((server.end_time - server.start_time) / 1e6)
    assert service == "gateway"
    span_id, parent, _, kind, _, status, message, attributes, events = stored["lexical leg"]
    assert parent == format(server.context.span_id, "016x")
    assert (kind, status, message) == ("internal", "error", "statement timeout")
    assert [(e["name"], e["attributes"]) for e in events] == [("postings read", {"terms": 3})]


def test_a_batch_that_repeats_stored_spans_stores_its_new_ones(postgres, recorded) -> None:
    server, leg = sorted(recorded.get_finished_spans(), key=lambda s: s.name)
    exporter = PostgresSpanExporter(postgres.traces_dsn)
    try:
        assert exporter.export([leg]) == SpanExportResult.SUCCESS
        # the repeated span (primary key) is skipped, the new one stored
        assert exporter.export([leg, server]) == SpanExportResult.SUCCESS
        assert exporter.export([server]) == SpanExportResult.SUCCESS  # the connection is still usable
    finally:
        exporter.shutdown()
    assert set(_stored(postgres, format(server.context.trace_id, "032x"))) == {
        "POST /api/v1/search",
        "lexical leg",
    }


def test_an_unreachable_database_fails_the_export_without_raising(recorded, refused_port: int) -> None:
    exporter = PostgresSpanExporter(f"postgresql://nobody@127.0.0.1:{refused_port}/none", connect_timeout=2)
    assert exporter.export(recorded.get_finished_spans()) == SpanExportResult.FAILURE
    exporter.shutdown()


def test_writers_store_spans_that_only_an_admins_transaction_reads(postgres, recorded) -> None:
    spans = recorded.get_finished_spans()
    exporter = PostgresSpanExporter(postgres.traces_dsn)
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    trace_id = format(spans[0].context.trace_id, "032x")
    query = "SELECT count(*) FROM rag_traces WHERE trace_id = %s"
    with psycopg.connect(postgres.app_dsn) as conn:
        assert conn.execute(query, (trace_id,)).fetchone() == (0,)  # no user context: nothing
    for roles, expected in ((("employee",), 0), (("employee", "auditor"), 0), (("employee", "admin"), 2)):
        with psycopg.connect(postgres.app_dsn) as conn:
            _as(conn, postgres.rls_key, roles)
            assert conn.execute(query, (trace_id,)).fetchone() == (expected,)
    with psycopg.connect(postgres.app_dsn) as conn:  # a role claimed by hand reads nothing
        conn.execute("SELECT set_config('rag.user_id', 'u', true), set_config('rag.roles', 'admin', true)")
        assert conn.execute(query, (trace_id,)).fetchone() == (0,)
    # the writers' role reads nothing back
    with psycopg.connect(postgres.traces_dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(query, (trace_id,))
    with psycopg.connect(postgres.app_dsn) as conn:  # not even an admin changes or removes spans
        _as(conn, postgres.rls_key, ("admin",))
        for statement in (
            "DELETE FROM rag_traces WHERE trace_id = %s",
            "UPDATE rag_traces SET name = 'x' WHERE trace_id = %s",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement, (trace_id,))
