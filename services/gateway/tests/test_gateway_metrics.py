"""`GET /metrics` scraped after chats and searches (the app over a fake mesh): requests, errors and latency per
route template, each pipeline step's time, busy-answerer refusals, and no user, document or question in it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import grpc
from fastapi.testclient import TestClient
from grpc import aio
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' fakes (tests run in importlib mode)
from test_gateway_bad_input import DOC_ID, FakeMesh, Stub, make_client

QUESTION = "When was IBM founded?"


def scrape(client: TestClient) -> tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    reply = client.get("/metrics", headers={"Authorization": ""})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }
    return reply.text, samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_a_scrape_after_chats_and_searches(tmp_path: Path) -> None:
    for client in make_client(tmp_path, FakeMesh()):
        assert client.post("/api/v1/chat", json={"question": QUESTION}).status_code == 200
        assert client.post("/api/v1/chat", json={"question": QUESTION, "stream": True}).status_code == 200
        completion = {"model": "ragmesh", "messages": [{"role": "user", "content": QUESTION}]}
        assert client.post("/v1/chat/completions", json=completion).status_code == 200
        assert client.post("/api/v1/search", json={"query": "IBM"}).status_code == 200
        assert client.get(f"/api/v1/documents/{DOC_ID}").status_code == 200
        assert client.post("/api/v1/chat", json={"question": ""}).status_code == 422
        assert client.get("/no/such/path").status_code == 404
        text, samples = scrape(client)

        requests = "ragmesh_http_requests_total"
        assert value(samples, requests, method="POST", route="/api/v1/chat", status="200") == 2
        assert value(samples, requests, method="POST", route="/api/v1/chat", status="422") == 1
        assert value(samples, requests, method="POST", route="/v1/chat/completions", status="200") == 1
        assert value(samples, requests, method="GET", route="/api/v1/documents/{document_id}", status="200") == 1
        assert value(samples, requests, method="GET", route="unmatched", status="404") == 1
        latency = "ragmesh_http_request_duration_seconds_count"
        assert value(samples, latency, method="POST", route="/api/v1/chat") == 3

        steps = "ragmesh_pipeline_step_duration_seconds_count"
        for step in ("guardrail", "retrieve", "grade", "answer"):
            assert value(samples, steps, pipeline="chat", step=step) == 3, step  # two chats, one completion
        assert value(samples, steps, pipeline="search", step="retrieve") == 1
        assert value(samples, "ragmesh_answerer_refusals_total") == 0

        # labels are routes, methods, statuses and steps: no user, document or question
        for secret in ("alice", "eng", DOC_ID, "IBM", "no/such"):
            assert secret not in text, secret


def test_busy_answerer_refusals_and_step_failures_are_counted(tmp_path: Path) -> None:
    mesh = FakeMesh()
    busy = aio.AioRpcError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, aio.Metadata(), aio.Metadata(("retry-after", "3")), details="queue full"
    )
    mesh.answerer = Stub(CheckInput=mesh.answerer.replies["CheckInput"], Answer=busy)
    for client in make_client(tmp_path, mesh):
        for stream in (False, True):
            reply = client.post("/api/v1/chat", json={"question": QUESTION, "stream": stream})
            assert reply.status_code == 503
        _, samples = scrape(client)
        assert value(samples, "ragmesh_answerer_refusals_total") == 2
        assert value(samples, "ragmesh_pipeline_step_failures_total", pipeline="chat", step="answer", status="503") == 2
        assert value(samples, "ragmesh_http_requests_total", method="POST", route="/api/v1/chat", status="503") == 2


def test_two_apps_count_apart(tmp_path: Path) -> None:
    for one in make_client(tmp_path / "one", FakeMesh()):
        for other in make_client(tmp_path / "other", FakeMesh()):
            assert one.post("/api/v1/search", json={"query": "IBM"}).status_code == 200
            requests = ("ragmesh_http_requests_total", "POST", "/api/v1/search", "200")
            name, method, route, status = requests
            assert value(scrape(one)[1], name, method=method, route=route, status=status) == 1
            assert value(scrape(other)[1], name, method=method, route=route, status=status) == 0
