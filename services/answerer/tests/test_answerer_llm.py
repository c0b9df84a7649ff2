"""The two model backends: an OpenAI-compatible server (the real llama_cpp.server) and Ollama's native API (a small
in-test imitation of /api/chat and /api/tags: no Ollama binary can be installed here). Streaming, the sampling
settings that make tests repeatable, token usage, retries, the caller's deadline, and failures as `Unavailable`."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ragmesh_answerer.config import Settings
from ragmesh_answerer.llm import Generation, OllamaChat, OpenAIChat, chat_model
from ragmesh_common.config import ConfigError
from ragmesh_common.errors import Unavailable
from ragmesh_dev.llm_server import MODEL_NAME, LlamaServer
from ragmesh_dev.ports import free_port

MESSAGES = [{"role": "user", "content": "Name three colours."}]


async def _run(chat: Any, **kwargs: Any) -> tuple[list[str], Generation]:
    result = Generation()
    options: dict[str, Any] = {"max_tokens": 12, "temperature": 0.0, "seed": 3} | kwargs
    pieces = [piece async for piece in chat.stream(MESSAGES, result=result, **options)]
    return pieces, result


# ---------- OpenAI-compatible: the real llama_cpp.server ----------
async def test_openai_backend_streams_repeatably(llama_server: LlamaServer) -> None:
    chat = OpenAIChat(llama_server.base_url, MODEL_NAME, timeout_seconds=120)
    try:
        await chat.check_model()
        pieces, result = await _run(chat)
        again, _ = await _run(chat)
    finally:
        await chat.close()
    assert len(pieces) > 1, "the answer did not stream"
    assert "".join(pieces) == result.text and result.text.strip()
    assert again == pieces  # temperature 0 and a seed: the same answer
    assert result.done_reason in ("stop", "length")
    # llama-cpp-python's server ignores stream_options.include_usage: the counts are unknown, not zero
    assert result.prompt_tokens is None and result.completion_tokens is None


async def test_openai_backend_honours_max_tokens_and_stop(llama_server: LlamaServer) -> None:
    chat = OpenAIChat(llama_server.base_url, MODEL_NAME, timeout_seconds=120)
    try:
        _, full = await _run(chat, max_tokens=24)
        _, short = await _run(chat, max_tokens=2)
        word = full.text.split()[2]
        _, cut = await _run(chat, max_tokens=24, stop=[word])
    finally:
        await chat.close()
    assert short.done_reason == "length" and len(short.text) < len(full.text)
    assert word not in cut.text and full.text.startswith(cut.text)


async def test_openai_backend_missing_model_and_unreachable_server(
    llama_server: LlamaServer, refused_port: int
) -> None:
    wrong = OpenAIChat(llama_server.base_url, "llama3.1:70b", timeout_seconds=30)
    dead = OpenAIChat(f"http://127.0.0.1:{refused_port}/v1", MODEL_NAME, timeout_seconds=5, max_retries=1)
    try:
        with pytest.raises(Unavailable, match=r"llama3.1:70b.*serves: smollm2:135m"):
            await wrong.check_model()
        with pytest.raises(Unavailable, match="unreachable"):
            await dead.check_model()
        with pytest.raises(Unavailable, match=f"127.0.0.1:{refused_port}.*unreachable"):
            await _run(dead)
    finally:
        await wrong.close()
        await dead.close()


async def test_openai_backend_stops_at_the_callers_deadline(llama_server: LlamaServer) -> None:
    chat = OpenAIChat(llama_server.base_url, MODEL_NAME, timeout_seconds=120)
    try:
        # A deadline that has passed: the model is not asked at all.
        with pytest.raises(Unavailable, match="deadline passed"):
            await _run(chat, deadline=time.monotonic() - 1)
        # A deadline far shorter than the generation: the stream is abandoned at it, well before the
        # service timeout (120 s).
        started = time.monotonic()
        with pytest.raises(Unavailable, match="did not answer within"):
            await _run(chat, max_tokens=2000, temperature=0.0, deadline=time.monotonic() + 0.05)
        assert time.monotonic() - started < 60
    finally:
        await chat.close()


# ---------- Ollama's native API: an in-test imitation ----------
@dataclass
class FakeOllama:
    """/api/tags and /api/chat (NDJSON); `fail_first` requests answer 503 first, as a busy Ollama does."""

    fail_first: int = 0
    delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> Starlette:
        async def tags(_: Request) -> Response:
            return JSONResponse({"models": [{"name": "tiny:1b", "model": "tiny:1b", "size": 1, "digest": "0"}]})

        async def chat(request: Request) -> Response:
            body = await request.json()
            self.requests.append(body)
            if len(self.requests) <= self.fail_first:
                return JSONResponse({"error": "server busy, please try again"}, status_code=503)

            async def lines() -> AsyncIterator[bytes]:
                for word in ("Red,", " green", " and blue."):
                    await asyncio.sleep(self.delay)
                    yield (
                        json.dumps(
                            {"model": body["model"], "message": {"role": "assistant", "content": word}, "done": False}
                        )
                        + "\n"
                    ).encode()
                final = {
                    "model": body["model"],
                    "message": {"role": "assistant", "content": ""},
                    "done": True,
                    "done_reason": "stop",
                    "prompt_eval_count": 17,
                    "eval_count": 3,
                }
                yield (json.dumps(final) + "\n").encode()

            return StreamingResponse(lines(), media_type="application/x-ndjson")

        return Starlette(routes=[Route("/api/tags", tags), Route("/api/chat", chat, methods=["POST"])])


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    fake = FakeOllama()
    server = uvicorn.Server(uvicorn.Config(fake.app(), host="127.0.0.1", port=fake.port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(10)


async def test_ollama_backend_streams_usage_and_sampling_options(fake_ollama: FakeOllama) -> None:
    chat = OllamaChat(fake_ollama.url, "tiny:1b", timeout_seconds=30)
    try:
        await chat.check_model()
        pieces, result = await _run(chat, stop=["\n\n"])
    finally:
        await chat.close()
    assert pieces == ["Red,", " green", " and blue."] and result.text == "Red, green and blue."
    assert (result.prompt_tokens, result.completion_tokens, result.done_reason) == (17, 3, "stop")
    sent = fake_ollama.requests[-1]
    assert sent["stream"] is True and sent["model"] == "tiny:1b"
    assert sent["options"] == {"num_predict": 12, "temperature": 0.0, "seed": 3, "stop": ["\n\n"]}


async def test_ollama_backend_retries_a_busy_server(fake_ollama: FakeOllama, caplog: pytest.LogCaptureFixture) -> None:
    fake_ollama.fail_first = 2
    chat = OllamaChat(fake_ollama.url, "tiny:1b", timeout_seconds=30, max_retries=2)
    try:
        pieces, _ = await _run(chat)
        fake_ollama.requests.clear()
        fake_ollama.fail_first = 5
        with pytest.raises(Unavailable, match="failed: server busy"):
            await _run(chat)
    finally:
        await chat.close()
    assert "".join(pieces) == "Red, green and blue."
    assert len(fake_ollama.requests) == 3  # one try and max_retries retries, then the error
    retries = [
        r.getMessage() for r in caplog.records if r.name == "ragmesh_answerer.llm" and "Retrying" in r.getMessage()
    ]
    assert len(retries) == 4 and all("server busy" in m for m in retries)  # each retry logged with its cause


async def test_ollama_backend_deadline_and_missing_model(fake_ollama: FakeOllama, refused_port: int) -> None:
    fake_ollama.delay = 1.0
    chat = OllamaChat(fake_ollama.url, "tiny:1b", timeout_seconds=30)
    missing = OllamaChat(fake_ollama.url, "llama3.1:8b", timeout_seconds=30)
    dead = OllamaChat(f"http://127.0.0.1:{refused_port}", "tiny:1b", timeout_seconds=5, max_retries=1)
    try:
        with pytest.raises(Unavailable, match=r"did not answer within 0\.[23]\d*s"):
            await _run(chat, deadline=time.monotonic() + 0.3)
        with pytest.raises(Unavailable, match="pull it first"):
            await missing.check_model()
        with pytest.raises(Unavailable, match="unreachable"):
            await _run(dead)
    finally:
        for c in (chat, missing, dead):
            await c.close()


# ---------- settings ----------
def test_settings_choose_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    openai_settings = Settings.for_openai("http://vllm:8000/v1", model="meta-llama/Llama-3.1-8B-Instruct")
    assert isinstance(chat_model(openai_settings), OpenAIChat)
    assert isinstance(chat_model(Settings.defaults("http://ollama:11434")), OllamaChat)
    monkeypatch.setenv("ANSWERER_LLM_BACKEND", "openai")
    monkeypatch.setenv("ANSWERER_OPENAI_API_KEY", "sk-do-not-print")
    monkeypatch.delenv("ANSWERER_OPENAI_BASE_URL", raising=False)
    with pytest.raises(
        ConfigError, match="ANSWERER_OPENAI_BASE_URL: required when ANSWERER_LLM_BACKEND is openai"
    ) as err:
        Settings.from_env()
    assert "sk-do-not-print" not in str(err.value)
    monkeypatch.setenv("ANSWERER_LLM_BACKEND", "ollama")
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    with pytest.raises(ConfigError, match="OLLAMA_HOST: required"):
        Settings.from_env()
    monkeypatch.setenv("ANSWERER_LLM_BACKEND", "tgi")
    with pytest.raises(ConfigError, match="ANSWERER_LLM_BACKEND"):
        Settings.from_env()
