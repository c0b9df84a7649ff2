"""What storing a batch of spans in `rag_traces` costs: COPY (the exporter's way) against one INSERT per span.

    make bench-spans                                  # 400 batches of 50 spans, each way
    python bench/spans.py --batches 200 --batch-size 200

Every service's BatchSpanProcessor hands its finished spans to `PostgresSpanExporter` in a background thread
of the service, and PostgreSQL parses and stores them on the same cores that answer queries. This times both
parts: `span_row` (conversion, on the service's CPU) and the write (client and server). The spans are those of
a search through the mesh as the services record them (server, client, internal and database spans, with their
attributes and `db.statement`), generated with fresh ids for every batch. Writes alternate between the two
methods batch by batch, so drift of a shared machine hits both alike. Prints a Markdown table (per batch:
median and mean milliseconds; CPU seconds of this process and of the PostgreSQL server per 1,000 spans) and
writes `bench/results/spans.json`. Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval import write_report  # the benchmarks' Markdown table + JSON file


def search_spans(batch_size: int) -> list[Any]:
    """Spans of searches as the mesh records them, `batch_size` in all, fresh ids each call."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragmesh_retriever.backends.pgvector_backend import _BM25_BY_DOCUMENT, _DETAILS, _VECTOR

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    server, client, internal = trace.SpanKind.SERVER, trace.SpanKind.CLIENT, trace.SpanKind.INTERNAL
    while len(memory.get_finished_spans()) < batch_size:
        # a span tree: the gateway's request > its call to the retriever > the retriever's server span > ...
        with (
            tracer.start_as_current_span(
                "POST /api/v1/search",
                kind=server,
                attributes={
                    "http.request.method": "POST",
                    "url.path": "/api/v1/search",
                    "http.response.status_code": 200,
                    "rag.user": "alice",
                },
            ),
            tracer.start_as_current_span(
                "/ragmesh.retriever.v1.RetrieverService/Search",
                kind=client,
                attributes={
                    "rpc.system": "grpc",
                    "rpc.service": "ragmesh.retriever.v1.RetrieverService",
                    "rpc.method": "Search",
                    "rpc.grpc.status_code": 0,
                },
            ),
            tracer.start_as_current_span(
                "/ragmesh.retriever.v1.RetrieverService/Search",
                kind=server,
                attributes={
                    "rpc.system": "grpc",
                    "rag.search.backend": "pgvector",
                    "rag.search.top_k": 30,
                    "rag.search.alpha": 0.4,
                    "rag.search.accessible_documents": 1000,
                },
            ),
        ):
            with tracer.start_as_current_span(
                "/ragmesh.embedder.v1.EmbedderService/Embed",
                kind=client,
                attributes={"rpc.system": "grpc", "rpc.method": "Embed"},
            ):
                pass
            for name, statement in (("lexical leg", _BM25_BY_DOCUMENT), ("vector leg", _VECTOR), ("details", _DETAILS)):
                with (
                    tracer.start_as_current_span(name, kind=internal),
                    tracer.start_as_current_span(
                        "SELECT",
                        kind=client,
                        attributes={
                            "db.system": "postgresql",
                            "db.name": "ragmesh",
                            "db.statement": statement,
                            "net.peer.name": "127.0.0.1",
                            "net.peer.port": 5432,
                        },
                    ),
                ):
                    pass
    return list(memory.get_finished_spans())[:batch_size]


def server_cpu_seconds(conn: Any) -> float:
    """CPU seconds of the PostgreSQL backend serving `conn` (utime + stime from /proc)."""
    pid = conn.info.backend_pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description="rag_traces: COPY against INSERT per span")
    parser.add_argument("--batches", type=int, default=400, help="batches per method")
    parser.add_argument("--batch-size", type=int, default=50, help="spans per batch")
    parser.add_argument("--output", default=str(Path(__file__).resolve().parent / "results" / "spans.json"))
    args = parser.parse_args()

    import psycopg
    from tqdm import tqdm

    from ragmesh_common.telemetry import _INSERT, span_row, write_rows
    from ragmesh_dev.devstack import interrupt_on_sigterm
    from ragmesh_dev.engines.postgres import EmbeddedPostgres
    from ragmesh_dev.ports import free_port
    from ragmesh_retriever.migrate import apply_schema

    interrupt_on_sigterm()  # kill stops the embedded PostgreSQL too

    with tempfile.TemporaryDirectory(prefix="ragmesh-spans-") as work:
        server = EmbeddedPostgres(Path(work), free_port())
        server.start()
        try:
            apply_schema(
                server.owner_dsn(),
                "ragmesh_app",
                "bench-spans",
                384,
                rls_key=secrets.token_hex(32),
                traces_password="bench-spans",
            )
            # the exporters' insert-only role, as RAG_TRACES_DSN names it
            dsn = f"postgresql://ragmesh_traces:bench-spans@{server.host}:{server.port}/{server.database}"
            methods = {
                "copy": write_rows,
                "insert per span": lambda conn, rows: conn.cursor().executemany(_INSERT, rows),
            }
            times: dict[str, list[float]] = {m: [] for m in methods}
            convert: list[float] = []
            cpu = {m: 0.0 for m in methods}
            server_cpu = {m: 0.0 for m in methods}
            with psycopg.connect(dsn, autocommit=True) as conn:
                for i in tqdm(range(args.batches * len(methods)), desc="batches", unit="batch"):
                    spans = search_spans(args.batch_size)
                    started = time.perf_counter()
                    rows = [span_row(s) for s in spans]
                    convert.append(time.perf_counter() - started)
                    name = list(methods)[i % len(methods)]
                    before_cpu, before_server = time.process_time(), server_cpu_seconds(conn)
                    started = time.perf_counter()
                    methods[name](conn, rows)
                    times[name].append(time.perf_counter() - started)
                    cpu[name] += time.process_time() - before_cpu
                    server_cpu[name] += server_cpu_seconds(conn) - before_server
            with psycopg.connect(server.owner_dsn()) as owner:  # the traces role may not read back
                stored = owner.execute("SELECT count(*) FROM rag_traces").fetchone()[0]
        finally:
            server.stop()
    spans_per_method = args.batches * args.batch_size
    result: dict[str, Any] = {
        "batch_size": args.batch_size,
        "batches_per_method": args.batches,
        "stored_spans": stored,
        "methods": {},
    }
    result["methods"]["span_row"] = {
        "median_ms": round(statistics.median(convert) * 1e3, 3),
        "mean_ms": round(statistics.mean(convert) * 1e3, 3),
    }
    for name in methods:
        result["methods"][name] = {
            "median_ms": round(statistics.median(times[name]) * 1e3, 3),
            "mean_ms": round(statistics.mean(times[name]) * 1e3, 3),
            "client_cpu_s_per_1000_spans": round(cpu[name] / spans_per_method * 1000, 4),
            "server_cpu_s_per_1000_spans": round(server_cpu[name] / spans_per_method * 1000, 4),
        }
    insert, copy = result["methods"]["insert per span"], result["methods"]["copy"]
    result["copy_over_insert"] = {"mean_ms": round(copy["mean_ms"] / insert["mean_ms"], 3)}
    result["meta"] = {
        "cpu_cores": os.cpu_count(),
        "machine": platform.machine(),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    write_report(
        args.output,
        result,
        f"{args.batches} batches of {args.batch_size} spans per method, alternating; {stored} spans stored; "
        f"COPY / INSERT per span (mean): {result['copy_over_insert']['mean_ms']}",
        ["step", "median ms / batch", "mean ms / batch", "client CPU s / 1,000 spans", "server CPU s / 1,000 spans"],
        [
            (
                name,
                r["median_ms"],
                r["mean_ms"],
                r.get("client_cpu_s_per_1000_spans"),
                r.get("server_cpu_s_per_1000_spans"),
            )
            for name, r in result["methods"].items()
        ],
    )


if __name__ == "__main__":
    main()
