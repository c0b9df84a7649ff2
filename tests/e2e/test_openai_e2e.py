"""The OpenAI-compatible API against the real mesh, through the official `openai` client as a chat UI would use
it (base URL `<gateway>/v1`, the user's JWT as the API key): an answer streamed and not, with its sources and
trace id in `ragmesh`; a bad key; and a user who cannot read the only relevant document gets nothing of it."""

from __future__ import annotations

import re
from typing import Any

import httpx
import openai
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import DOCS, upload_ready

pytestmark = pytest.mark.e2e

IBM_MD = DOCS / "md" / "sources" / "wiki.md"
QUESTION = [{"role": "user", "content": "When was IBM founded?"}]

if not DOCS.is_dir():
    pytest.skip(f"shared documents not found at {DOCS}", allow_module_level=True)


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "olga": mesh.token("olga", "openai-research", ["employee"]),
        "pete": mesh.token("pete", "openai-legal", ["employee"]),
    }


@pytest.fixture(scope="module")
def ibm(client: httpx.Client, tokens: dict[str, str]) -> str:
    """The IBM article, readable by olga's department only (the default ACL)."""
    return upload_ready(client, tokens["olga"], IBM_MD)


def sdk(mesh: Stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{mesh.gateway_url}/v1", api_key=key, max_retries=0, timeout=300.0)


def cited_sources(content: str, extra: dict[str, Any]) -> None:
    """Every `[n]` in the content names one of the reply's sources."""
    indexes = {s["index"] for s in extra["sources"]}
    for group in re.findall(r"\[([\d, ]+)\]", content):
        assert {int(n) for n in group.split(",")} <= indexes, (content, indexes)


def test_an_answer_with_its_sources_streamed_and_not(mesh: Stack, tokens: dict[str, str], ibm: str) -> None:
    ai = sdk(mesh, tokens["olga"])
    assert "ragmesh" in [m.id for m in ai.models.list()]
    completion = ai.chat.completions.create(model="ragmesh", messages=QUESTION)
    content = completion.choices[0].message.content or ""
    extra = completion.model_extra["ragmesh"]  # type: ignore[index]
    assert extra["outcome"] == "answer", extra
    assert content == extra["answer"] and content
    assert {s["document_id"] for s in extra["sources"]} == {ibm}
    assert re.fullmatch("[0-9a-f]{32}", extra["trace_id"])
    cited_sources(content, extra)

    chunks = list(ai.chat.completions.create(model="ragmesh", messages=QUESTION, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    last = chunks[-1]
    assert last.choices[0].finish_reason in ("stop", "length")
    extra = last.model_extra["ragmesh"]  # type: ignore[index]
    assert extra["outcome"] == "answer" and streamed == extra["answer"]
    assert {s["document_id"] for s in extra["sources"]} == {ibm}


def test_a_bad_api_key_is_refused(mesh: Stack) -> None:
    with pytest.raises(openai.AuthenticationError) as refused:
        sdk(mesh, "not-a-jwt").chat.completions.create(model="ragmesh", messages=QUESTION)
    assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"


def test_a_user_who_cannot_read_the_document_gets_nothing_of_it(mesh: Stack, tokens: dict[str, str], ibm: str) -> None:
    ai = sdk(mesh, tokens["pete"])
    for stream in (False, True):
        if stream:
            chunks = list(ai.chat.completions.create(model="ragmesh", messages=QUESTION, stream=True))
            content = "".join(c.choices[0].delta.content or "" for c in chunks)
            extra = chunks[-1].model_extra["ragmesh"]  # type: ignore[index]
        else:
            completion = ai.chat.completions.create(model="ragmesh", messages=QUESTION)
            content = completion.choices[0].message.content or ""
            extra = completion.model_extra["ragmesh"]  # type: ignore[index]
        assert extra["outcome"] != "answer", extra
        assert ibm not in str(extra) and extra["sources"] == []
        assert "1911" not in content and "Computing-Tabulating" not in content
        assert content == extra["answer"]


def test_metrics_after_the_chats(mesh: Stack, client: httpx.Client, tokens: dict[str, str], ibm: str) -> None:
    """Prometheus' scrape of the gateway after the chats above: the route, the steps, no user or document."""
    from prometheus_client.parser import text_string_to_metric_families

    sdk(mesh, tokens["olga"]).chat.completions.create(model="ragmesh", messages=QUESTION)
    reply = client.get("/metrics")
    assert reply.status_code == 200
    samples = [s for family in text_string_to_metric_families(reply.text) for s in family.samples]
    routes = {
        s.labels["route"]
        for s in samples
        if s.name == "ragmesh_http_requests_total" and s.labels["status"] == "200" and s.value > 0
    }
    assert "/v1/chat/completions" in routes, routes
    steps = {
        s.labels["step"]
        for s in samples
        if s.name == "ragmesh_pipeline_step_duration_seconds_count" and s.labels["pipeline"] == "chat" and s.value > 0
    }
    assert {"guardrail", "retrieve", "grade", "answer"} <= steps, steps
    for secret in ("olga", "openai-research", ibm, "IBM"):
        assert secret not in reply.text, secret
