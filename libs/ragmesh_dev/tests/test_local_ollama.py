"""The embedded model server speaks Ollama's HTTP API: NDJSON stream shape, one-shot JSON, errors."""

from __future__ import annotations

import json

import httpx
import ollama
import pytest

from ragmesh_dev.local_ollama import MODEL_NAME, InProcessServer

FINAL_FIELDS = {
    "done_reason",
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
}
CHAT = {
    "model": MODEL_NAME,
    "messages": [{"role": "user", "content": "Name a colour."}],
    "options": {"temperature": 0, "seed": 1, "num_predict": 6},
}


def test_chat_streams_ndjson_lines_then_a_done_line(local_ollama: InProcessServer) -> None:
    with httpx.stream("POST", f"{local_ollama.url}/api/chat", json=CHAT, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    *pieces, last = lines
    assert pieces, "no content line before the done line"
    for line in pieces:
        assert set(line) == {"model", "created_at", "message", "done"}
        assert line["done"] is False and line["model"] == MODEL_NAME
        assert line["message"]["role"] == "assistant" and line["message"]["content"]
    assert last["done"] is True and set(last) >= FINAL_FIELDS
    assert last["message"] == {"role": "assistant", "content": ""}
    assert last["done_reason"] == "length"  # num_predict 6 is too few to finish a sentence
    assert last["eval_count"] == 6 and last["prompt_eval_count"] > 0
    assert last["created_at"].endswith("Z")


def test_chat_without_stream_returns_one_json(local_ollama: InProcessServer) -> None:
    response = httpx.post(f"{local_ollama.url}/api/chat", json={**CHAT, "stream": False}, timeout=60)
    body = response.json()
    assert response.status_code == 200
    assert body["done"] is True and set(body) >= FINAL_FIELDS
    assert body["message"]["role"] == "assistant" and body["message"]["content"].strip()


def test_greedy_decoding_is_repeatable(local_ollama: InProcessServer) -> None:
    first = httpx.post(f"{local_ollama.url}/api/chat", json={**CHAT, "stream": False}, timeout=60).json()
    second = httpx.post(f"{local_ollama.url}/api/chat", json={**CHAT, "stream": False}, timeout=60).json()
    assert first["message"]["content"] == second["message"]["content"]


def test_stop_option_cuts_the_output(local_ollama: InProcessServer) -> None:
    body = {**CHAT, "stream": False, "options": {"temperature": 0, "num_predict": 24}}
    full = httpx.post(f"{local_ollama.url}/api/chat", json=body, timeout=60).json()["message"]["content"]
    stop_at = full.strip().split()[1]
    body["options"]["stop"] = [stop_at]
    cut = httpx.post(f"{local_ollama.url}/api/chat", json=body, timeout=60).json()
    assert stop_at not in cut["message"]["content"]
    assert cut["done_reason"] == "stop"


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"{not json", "invalid JSON"),
        (json.dumps({"model": MODEL_NAME}).encode(), "messages"),
        (json.dumps({"model": MODEL_NAME, "messages": [{"content": "hi"}]}).encode(), "messages[0]"),
        (json.dumps({"model": MODEL_NAME, "messages": [], "options": "hot"}).encode(), "options"),
    ],
)
def test_bad_requests_get_400_with_a_message(local_ollama: InProcessServer, payload: bytes, fragment: str) -> None:
    response = httpx.post(f"{local_ollama.url}/api/chat", content=payload, timeout=10)
    assert response.status_code == 400
    assert fragment in response.json()["error"]


def test_unknown_model_is_404_like_ollama(local_ollama: InProcessServer) -> None:
    response = httpx.post(f"{local_ollama.url}/api/chat", json={**CHAT, "model": "llama3:70b"}, timeout=10)
    assert response.status_code == 404 and "not found" in response.json()["error"]


def test_metadata_endpoints(local_ollama: InProcessServer) -> None:
    assert httpx.get(local_ollama.url, timeout=10).text == "Ollama is running"
    assert "version" in httpx.get(f"{local_ollama.url}/api/version", timeout=10).json()
    shown = httpx.post(f"{local_ollama.url}/api/show", json={"model": MODEL_NAME}, timeout=10).json()
    assert shown["details"]["format"] == "gguf" and "im_start" in shown["template"]


async def test_official_client_reads_the_stream(local_ollama: InProcessServer) -> None:
    client = ollama.AsyncClient(host=local_ollama.url, timeout=60)
    try:
        assert [m.model for m in (await client.list()).models] == [MODEL_NAME]
        parts = [
            p
            async for p in await client.chat(
                model=MODEL_NAME, messages=CHAT["messages"], stream=True, options=CHAT["options"]
            )
        ]
    finally:
        await client.close()
    assert parts[-1].done and parts[-1].eval_count == 6
    assert "".join(p.message.content or "" for p in parts).strip()
