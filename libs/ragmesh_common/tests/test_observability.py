"""Metrics, trace export and logs as standard tools read them: a gRPC service's `/metrics` counts each RPC by
status code, the standard OTEL_* variables send spans to a real OTLP receiver over http/protobuf and over gRPC
(decoded with opentelemetry-proto), and a JSON log line carries the trace and span ids of the span it was
written in."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client.parser import text_string_to_metric_families

from ragmesh_common import attributes as attr
from ragmesh_common.logs import setup_logging
from ragmesh_common.server import GrpcService, insecure_channel
from ragmesh_common.telemetry import retrieval_attributes, standard_exporters
from ragmesh_dev.ports import free_port


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


async def test_a_grpc_service_counts_each_rpc_by_code_on_its_metrics_port() -> None:
    service = GrpcService("probe", lambda server: [], health_port=0, metrics_port=free_port())
    await service.start()
    try:
        assert service.metrics_server is not None
        url = f"http://127.0.0.1:{service.metrics_server.port}/metrics"
        async with httpx.AsyncClient(timeout=10) as http:
            before = samples((await http.get(url)).text, "ragmesh_grpc_server_handled_total")
        async with insecure_channel(f"127.0.0.1:{service.port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
            with pytest.raises(grpc.RpcError) as refused:
                await stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
            assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        async with httpx.AsyncClient(timeout=10) as http:
            text = (await http.get(url)).text
    finally:
        await service.stop()
    handled = samples(text, "ragmesh_grpc_server_handled_total")
    key = (("grpc_method", "Check"), ("grpc_service", "grpc.health.v1.Health"))
    ok = tuple(sorted((*key, ("grpc_code", "OK"))))
    not_found = tuple(sorted((*key, ("grpc_code", "NOT_FOUND"))))
    assert handled[ok] - before.get(ok, 0) == 2
    assert handled[not_found] - before.get(not_found, 0) == 1
    timed = samples(text, "ragmesh_grpc_server_handling_seconds_count")
    assert timed[tuple(sorted(key))] >= 3
    assert all("user" not in k and "document" not in k for labels in handled for k, _ in labels)


def test_no_metrics_port_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGMESH_METRICS_PORT", raising=False)
    assert GrpcService("quiet", lambda server: [], health_port=0).metrics_server is None


class _Receiver(BaseHTTPRequestHandler):
    received: list[trace_service_pb2.ExportTraceServiceRequest]
    paths: list[str]

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append(request)
        type(self).paths.append(self.path)
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"received": [], "paths": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def _spans(requests: list[trace_service_pb2.ExportTraceServiceRequest]) -> dict[str, dict[str, Any]]:
    spans = {}
    for request in requests:
        for resource in request.resource_spans:
            service = next(a.value.string_value for a in resource.resource.attributes if a.key == "service.name")
            for scope in resource.scope_spans:
                for span in scope.spans:
                    values = {a.key: a.value for a in span.attributes}
                    spans[span.name] = {"service": service, "attributes": values}
    return spans


def _send_one_retrieval(exporters: list[Any]) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "retriever"}))
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("Search") as span:
        span.set_attributes(retrieval_attributes("what is the leave policy?", [("c1", "d1", 0.9, "secret text")]))
    provider.shutdown()


def test_otlp_over_http_protobuf_reaches_a_receiver(
    http_receiver: tuple[str, type[_Receiver]], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, handler = http_receiver
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    _send_one_retrieval(standard_exporters())
    assert handler.paths == ["/v1/traces"]  # the signal's path appended to the generic endpoint
    span = _spans(handler.received)["Search"]
    assert span["service"] == "retriever"
    assert span["attributes"][attr.OI_SPAN_KIND].string_value == "RETRIEVER"
    assert span["attributes"]["retrieval.documents.0.document.id"].string_value == "c1"
    assert span["attributes"]["retrieval.documents.0.document.score"].double_value == pytest.approx(0.9)
    # no content by default: neither the question nor the chunk's text leaves the process
    assert attr.OI_INPUT_VALUE not in span["attributes"]
    assert "retrieval.documents.0.document.content" not in span["attributes"]


def test_the_per_signal_endpoint_wins_and_content_capture_is_opt_in(
    http_receiver: tuple[str, type[_Receiver]], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, handler = http_receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")  # nothing listens there
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{endpoint}/custom/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    _send_one_retrieval(standard_exporters())
    assert handler.paths == ["/custom/traces"]
    span = _spans(handler.received)["Search"]
    assert span["attributes"][attr.OI_INPUT_VALUE].string_value == "what is the leave policy?"
    assert span["attributes"]["retrieval.documents.0.document.content"].string_value == "secret text"


class _GrpcReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.received: list[trace_service_pb2.ExportTraceServiceRequest] = []

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - the proto's name
        self.received.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def test_otlp_over_grpc_reaches_a_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = _GrpcReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        _send_one_retrieval(standard_exporters())  # grpc: the default protocol
    finally:
        server.stop(0)
    assert _spans(receiver.received)["Search"]["attributes"][attr.OI_SPAN_KIND].string_value == "RETRIEVER"


@pytest.mark.parametrize(
    ("name", "value"), [("OTEL_TRACES_EXPORTER", "zipkin"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]
)
def test_an_unsupported_exporter_setting_fails_naming_the_variable(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=name):
        standard_exporters()


def test_no_exporter_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert standard_exporters() == []
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert standard_exporters() == []


def test_json_log_lines_carry_the_span_they_were_written_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_LOG_FORMAT", "json")
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    try:
        setup_logging("retriever")
        stream = io.StringIO()
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        provider = TracerProvider()
        tracer = provider.get_tracer("test")
        log = logging.getLogger("ragmesh_retriever.server")
        log.info("outside any span")
        with tracer.start_as_current_span("Search") as span:
            log.warning("search degraded: %s", "embedder down")
            context = span.get_span_context()
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["outside any span", "search degraded: embedder down", "failed"]
    assert lines[0]["trace_id"] == "" and lines[0]["span_id"] == ""
    assert lines[1]["trace_id"] == format(context.trace_id, "032x")
    assert lines[1]["span_id"] == format(context.span_id, "016x")
    assert lines[1]["level"] == "WARNING" and lines[1]["service"] == "retriever"
    assert lines[1]["logger"] == "ragmesh_retriever.server"
    assert "ValueError: boom" in lines[2]["exception"]


def test_an_unknown_log_format_fails_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_LOG_FORMAT", "xml")
    with pytest.raises(SystemExit, match="RAGMESH_LOG_FORMAT"):
        setup_logging("x")


def test_prompt_and_answer_reach_a_span_only_with_content_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragmesh_common.telemetry import llm_content_attributes, llm_output_attributes, token_attributes

    messages = [{"role": "system", "content": "Answer from the quotes."}, {"role": "user", "content": "When?"}]
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    assert llm_content_attributes(messages) == {} and llm_output_attributes("In 1911.") == {}
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    captured = llm_content_attributes(messages)
    assert json.loads(captured[attr.GEN_AI_INPUT_MESSAGES]) == messages
    assert captured[attr.OI_INPUT_VALUE] == captured[attr.GEN_AI_INPUT_MESSAGES]
    assert llm_output_attributes("In 1911.")[attr.OI_OUTPUT_VALUE] == "In 1911."
    assert token_attributes(12, 3)[attr.OI_LLM_TOKENS_TOTAL] == 15
