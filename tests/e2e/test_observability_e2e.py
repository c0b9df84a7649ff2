"""What standard tools read from a running mesh, after one chat: Prometheus' `/metrics` of the gateway, the
answerer, the retriever and the ingest worker (request counts by route and RPC, step latencies, the answerer's
queue and its model's tokens, ingestion outcomes and backlog); the spans the services export over OTLP
http/protobuf to a receiver in this process (the chat's trace across services, the GenAI and OpenInference
attributes); and JSON log lines (RAGMESH_LOG_FORMAT=json) with the chat's trace id, uvicorn's access log included.

The module starts a mesh of its own: it needs the OTLP endpoint, the metrics ports and the log format set in every
process."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from prometheus_client.parser import text_string_to_metric_families

from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
from ragmesh_dev.ports import free_port

from .conftest import DOCS, running, upload_ready

pytestmark = pytest.mark.e2e

IBM_MD = DOCS / "md" / "sources" / "wiki.md"
METRICS = ("answerer", "retriever", "embedder", "ingest-worker")
SPANS_SECONDS = 60.0  # the exporters send within OTEL_BSP_SCHEDULE_DELAY (0.5 s); this is the wait's bound

if not DOCS.is_dir():
    pytest.skip(f"shared documents not found at {DOCS}", allow_module_level=True)


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: decodes each export with opentelemetry-proto and keeps its spans."""

    spans: list[dict[str, Any]]
    arrived: threading.Condition

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.arrived:
            for resource in request.resource_spans:
                service = next(a.value.string_value for a in resource.resource.attributes if a.key == "service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            {
                                "service": service,
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "attributes": {a.key: a.value for a in span.attributes},
                            }
                        )
            self.arrived.notify_all()
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def collector() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Collector", (_Collector,), {"spans": [], "arrived": threading.Condition()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, collector: tuple[str, type[_Collector]]) -> Iterator[Stack]:
    data = tmp_path_factory.mktemp("observed")
    stack = Stack(
        data,
        ports={name: free_port() for name in DEFAULT_PORTS},
        extra_env={
            "GATEWAY_RATE_LIMIT_PER_MINUTE": "1000",
            "LOG_LEVEL": "INFO",
            "RAGMESH_LOG_FORMAT": "json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector[0],
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        },
        metrics_ports={name: free_port() for name in METRICS},
    )
    yield from running(stack)


@pytest.fixture(scope="module")
def chat(mesh: Stack, client: httpx.Client) -> dict[str, Any]:
    """One document ingested and one chat about it, through the OpenAI-compatible API; the reply's extra field."""
    token = mesh.token("olga", "research", ["employee"])
    upload_ready(client, token, IBM_MD)
    ai = openai.OpenAI(base_url=f"{mesh.gateway_url}/v1", api_key=token, max_retries=0, timeout=300.0)
    completion = ai.chat.completions.create(
        model="ragmesh", messages=[{"role": "user", "content": "When was IBM founded?"}]
    )
    extra: dict[str, Any] = completion.model_extra["ragmesh"]  # type: ignore[index]
    assert extra["outcome"] == "answer", extra
    return extra


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    reply = httpx.get(url, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def total(samples: dict[tuple[tuple[str, str], ...], float], **labels: str) -> float:
    return sum(v for key, v in samples.items() if set(labels.items()) <= set(key))


def no_private_labels(metrics: dict[str, dict[tuple[tuple[str, str], ...], float]], *values: str) -> None:
    for name, samples in metrics.items():
        for key in samples:
            for label, value in key:
                assert "user" not in label and "document" not in label, (name, label)
                assert all(v not in value for v in values), (name, label, value)


def test_every_process_reports_its_metrics_after_a_chat(mesh: Stack, chat: dict[str, Any]) -> None:
    document_ids = [s["document_id"] for s in chat["sources"]]
    gateway = scrape(f"{mesh.gateway_url}/metrics")
    assert total(gateway["ragmesh_http_requests_total"], route="/v1/chat/completions", status="200") >= 1
    assert total(gateway["ragmesh_pipeline_step_duration_seconds_count"], pipeline="chat", step="retrieve") >= 1
    assert total(gateway["ragmesh_pipeline_step_duration_seconds_count"], pipeline="chat", step="answer") >= 1
    assert total(gateway["ragmesh_cache_lookups_total"], result="miss") >= 1  # the first time this was asked
    no_private_labels(gateway, "olga", "research", *document_ids)

    ports = mesh.metrics_ports
    answerer = scrape(f"http://127.0.0.1:{ports['answerer']}/metrics")
    handled = answerer["ragmesh_grpc_server_handled_total"]
    assert total(handled, grpc_service="ragmesh.answerer.v1.AnswererService", grpc_method="Answer", grpc_code="OK") >= 1
    assert total(answerer["ragmesh_grpc_server_handling_seconds_count"], grpc_method="Answer") >= 1
    # the dev stack's model server (llama-cpp-python's llama_cpp.server) sends no usage on a stream
    # (abetlen/llama-cpp-python#1640): no token is counted rather than a made-up 0; the counts of a server that
    # reports them (Ollama, vLLM, ...) are tested in services/answerer/tests/test_answerer_llm.py
    assert not answerer.get("ragmesh_llm_tokens_total"), answerer.get("ragmesh_llm_tokens_total")
    assert total(answerer["ragmesh_llm_generations_total"], outcome="ok") >= 1
    assert answerer["ragmesh_answerer_queue_depth"][()] == 0  # nothing waits once the chat is over
    no_private_labels(answerer, "olga", "research", *document_ids)

    retriever = scrape(f"http://127.0.0.1:{ports['retriever']}/metrics")
    assert total(retriever["ragmesh_grpc_server_handled_total"], grpc_method="Search", grpc_code="OK") >= 1
    assert total(retriever["ragmesh_grpc_server_handled_total"], grpc_method="IndexChunks", grpc_code="OK") >= 1
    embedder = scrape(f"http://127.0.0.1:{ports['embedder']}/metrics")
    assert total(embedder["ragmesh_grpc_server_handled_total"], grpc_code="OK") >= 1

    worker = scrape(f"http://127.0.0.1:{ports['ingest-worker']}/metrics")
    assert total(worker["ragmesh_ingestion_documents_total"], outcome="ready") >= 1
    assert worker["ragmesh_ingestion_backlog"][()] == 0  # the one upload was taken from the queue


def test_the_chat_is_one_trace_across_services_with_genai_and_openinference_attributes(
    collector: tuple[str, type[_Collector]], chat: dict[str, Any]
) -> None:
    handler = collector[1]
    trace_id = chat["trace_id"]

    def spans() -> list[dict[str, Any]]:
        return [s for s in handler.spans if s["trace_id"] == trace_id]

    wanted = {("answerer", "generate"), ("retriever", "/ragmesh.retriever.v1.RetrieverService/Search")}

    def whole() -> bool:
        """The spans asked for, and every span's parent: the gateway's root ends (and is exported) last."""
        found = spans()
        ids = {s["span_id"] for s in found}
        return wanted <= {(s["service"], s["name"]) for s in found} and all(
            s["parent"] in ids for s in found if s["parent"]
        )

    with handler.arrived:
        handler.arrived.wait_for(whole, SPANS_SECONDS)
    found = spans()
    assert {"gateway", "retriever", "answerer"} <= {s["service"] for s in found}, {s["name"] for s in found}
    generate = next(s for s in found if s["name"] == "generate")
    attributes = generate["attributes"]
    assert attributes["openinference.span.kind"].string_value == "LLM"
    assert attributes["gen_ai.operation.name"].string_value == "chat"
    assert attributes["gen_ai.request.model"].string_value == attributes["llm.model_name"].string_value != ""
    # usage: absent, not 0, when the server did not count it (the dev stack's streams, as above)
    assert not {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "llm.token_count.total"} & set(attributes)
    assert attributes["gen_ai.response.finish_reasons"]
    assert "input.value" not in attributes  # the prompt stays out of the trace unless content capture is on
    search = next(s for s in found if s["service"] == "retriever" and s["name"].endswith("/Search"))
    assert search["attributes"]["openinference.span.kind"].string_value == "RETRIEVER"
    assert search["attributes"]["retrieval.documents.0.document.id"].string_value
    ids = {s["span_id"] for s in found}
    assert all(s["parent"] in ids for s in found if s["parent"]), "a span's parent is missing from the trace"


def test_log_lines_are_json_with_the_chat_trace_id(mesh: Stack, chat: dict[str, Any]) -> None:
    records: dict[str, list[dict[str, Any]]] = {}
    for log in sorted(mesh.logs.glob("*.log")):
        if log.stem == "llm":
            continue  # the model server stand-in is not a ragmesh process
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                records.setdefault(log.stem, []).append(json.loads(line))
    for process in ("gateway", "answerer", "retriever", "ingest-worker"):
        assert records.get(process), f"no JSON log line from {process}"
        assert all(
            {"time", "level", "service", "logger", "message", "trace_id", "span_id"} <= set(r) for r in records[process]
        )
    access = [r for r in records["gateway"] if r["logger"] == "uvicorn.access"]
    assert any("/v1/chat/completions" in r["message"] for r in access), "uvicorn's access log is not in JSON"
    traced = [r for rs in records.values() for r in rs if r["trace_id"] == chat["trace_id"]]
    assert traced, "no log line carries the chat's trace id"
