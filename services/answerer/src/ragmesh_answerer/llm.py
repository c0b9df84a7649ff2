"""The language model behind the answerer: Ollama's native API (official `ollama` client) or any
OpenAI-compatible server (vLLM, NVIDIA NIM, llama.cpp's server, TGI, OpenAI) through the official `openai`
client, chosen by ANSWERER_LLM_BACKEND.

Both stream the answer piece by piece, bound a generation by the service timeout and the caller's deadline
(whichever is nearer), retry a call that failed before its first piece (a refused connection, 429, 5xx: the
`openai` client's own `max_retries`; `tenacity` for Ollama) and report the token usage the server counted.
Every failure of the dependency becomes `Unavailable`. Retries are logged (tenacity's `before_sleep_log`; the
`openai` client logs its own) and each HTTP attempt is a client span (the httpx instrumentation).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx
import ollama
import openai
from tenacity import (
    AsyncRetrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential,
)

from ragmesh_common.errors import Unavailable

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

    from ragmesh_answerer.config import Settings

logger = logging.getLogger(__name__)

Backend = Literal["ollama", "openai"]
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})  # what Ollama answers when busy or restarting


@dataclass
class Generation:
    """What the server reports once the stream ends. Token counts are None when it did not count them (an
    OpenAI-compatible server that ignores `stream_options.include_usage`, e.g. llama-cpp-python's)."""

    text: str = ""
    done_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ChatModel(Protocol):
    """What the answerer needs of a model server."""

    model: str
    endpoint: str
    system: Backend  # the `gen_ai.system` of its spans: the API spoken

    async def close(self) -> None: ...

    async def check_model(self) -> None: ...

    async def wait_ready(self, max_delay: float = 10.0) -> None: ...

    def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        result: Generation,
        stop: list[str] | None = None,
        deadline: float | None = None,
    ) -> AsyncIterator[str]: ...


class _Chat:
    """The parts both backends share: readiness with backoff, the generation's time budget."""

    model: str
    endpoint: str
    timeout: float

    async def check_model(self) -> None:
        raise NotImplementedError

    async def wait_ready(self, max_delay: float = 10.0) -> None:
        """Retries `check_model` with backoff until it succeeds (the warm-up; health stays NOT_SERVING)."""
        delay = 0.5
        while True:
            try:
                await self.check_model()
                logger.info("model %s is available on %s", self.model, self.endpoint)
                return
            except Unavailable as exc:
                logger.warning("%s; retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)

    def budget(self, deadline: float | None) -> float:
        """Seconds this generation may take: the service timeout, or less when the caller's deadline (a
        `time.monotonic()` value) is nearer."""
        if deadline is None:
            return self.timeout
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Unavailable("the caller's deadline passed before the language model was asked")
        return min(self.timeout, remaining)

    def _late(self, budget: float) -> Unavailable:
        return Unavailable(f"the language model at {self.endpoint} did not answer within {budget:g}s")


async def _next_within(parts: AsyncIterator[Any], until: float) -> Any:
    """The next item of `parts`, or TimeoutError once `until` (time.monotonic()) has passed."""
    remaining = until - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    return await asyncio.wait_for(anext(parts), remaining)


def _ollama_retryable(exc: BaseException) -> bool:
    if isinstance(exc, ollama.ResponseError):
        return exc.status_code in RETRY_STATUSES
    return isinstance(exc, ConnectionError | httpx.TransportError)


class OllamaChat(_Chat):
    """Streams chat completions from one model through Ollama's native API (`/api/chat`)."""

    system: Backend = "ollama"

    def __init__(self, host: str, model: str, timeout_seconds: float, max_retries: int = 2) -> None:
        self.endpoint = host
        self.model = model
        self.timeout = timeout_seconds
        self.max_retries = max_retries
        # The client's own timeout bounds connect and each read; `stream` also bounds the whole answer.
        self._client = ollama.AsyncClient(host=host, timeout=timeout_seconds)

    async def close(self) -> None:
        await self._client.close()

    async def check_model(self) -> None:
        """Raises `Unavailable` unless Ollama answers and lists the model."""
        try:
            listing = await asyncio.wait_for(self._client.list(), self.timeout)
        except (ConnectionError, httpx.TransportError, ollama.ResponseError, TimeoutError) as exc:
            raise Unavailable(f"Ollama at {self.endpoint} is unreachable: {exc}") from exc
        names = {m.model for m in listing.models if m.model}
        wanted = {self.model, f"{self.model}:latest"}
        if not names & wanted:
            raise Unavailable(
                f"model {self.model!r} is not available on Ollama at {self.endpoint} "
                f"(it has: {', '.join(sorted(names)) or 'none'}); pull it first"
            )

    async def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        result: Generation,
        stop: list[str] | None = None,
        deadline: float | None = None,
    ) -> AsyncIterator[str]:
        """Yields content pieces; fills `result` from the final line. Bounded by `budget(deadline)` as a whole."""
        options: dict[str, float | int | list[str]] = {"num_predict": max_tokens, "temperature": temperature}
        if stop:
            options["stop"] = stop
        if seed is not None:
            options["seed"] = seed
        budget = self.budget(deadline)
        until = time.monotonic() + budget
        parts: AsyncIterator[ollama.ChatResponse] | None = None
        try:
            # The request goes out on the first read: open and read once per attempt; nothing was shown yet,
            # so a retry repeats nothing.
            first: ollama.ChatResponse | None = None
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_ollama_retryable),
                stop=stop_after_attempt(self.max_retries + 1) | stop_before_delay(budget),
                wait=wait_exponential(multiplier=0.5, max=4.0),
                before_sleep=before_sleep_log(logger, logging.WARNING),  # each retry's cause, in the log
                reraise=True,
            ):
                with attempt:
                    if parts is not None:
                        await parts.aclose()  # type: ignore[attr-defined]
                    parts = await self._client.chat(model=self.model, messages=messages, stream=True, options=options)
                    first = await _next_within(parts, until)
            assert parts is not None and first is not None
            part: ollama.ChatResponse = first
            while True:
                piece = part.message.content or ""
                if piece:
                    result.text += piece
                    yield piece
                if part.done:
                    result.done_reason = part.done_reason or ""
                    result.prompt_tokens = part.prompt_eval_count or 0
                    result.completion_tokens = part.eval_count or 0
                try:
                    part = await _next_within(parts, until)
                except StopAsyncIteration:
                    break
        except StopAsyncIteration:
            pass  # an empty stream: nothing to report
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise self._late(budget) from exc
        except (ConnectionError, httpx.TransportError) as exc:
            raise Unavailable(
                f"the language model at {self.endpoint} is unreachable: {exc or type(exc).__name__}"
            ) from exc
        except ollama.ResponseError as exc:
            raise Unavailable(f"the language model at {self.endpoint} failed: {exc}") from exc
        finally:
            if parts is not None:
                await parts.aclose()  # type: ignore[attr-defined]  # releases the HTTP stream early


class OpenAIChat(_Chat):
    """Streams chat completions from one model of an OpenAI-compatible server (`/v1/chat/completions`)."""

    system: Backend = "openai"

    def __init__(
        self, base_url: str, model: str, timeout_seconds: float, api_key: str = "", max_retries: int = 2
    ) -> None:
        self.endpoint = base_url
        self.model = model
        self.timeout = timeout_seconds
        # A server without authentication takes any key; the client insists on one being set.
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout_seconds, max_retries=max_retries
        )

    async def close(self) -> None:
        await self._client.close()

    async def check_model(self) -> None:
        """Raises `Unavailable` unless the server answers and lists the model (a server without `/v1/models`
        is taken at its word: the first chat will tell)."""
        try:
            listing = await asyncio.wait_for(self._client.models.list(), self.timeout)
        except openai.NotFoundError:
            logger.warning("%s does not list its models (/v1/models is 404); assuming %s", self.endpoint, self.model)
            return
        except (openai.APIError, TimeoutError) as exc:
            raise Unavailable(f"the OpenAI-compatible server at {self.endpoint} is unreachable: {exc}") from exc
        names = {m.id for m in listing.data}
        if self.model not in names:
            raise Unavailable(
                f"model {self.model!r} is not served by {self.endpoint} "
                f"(it serves: {', '.join(sorted(names)) or 'none'})"
            )

    async def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        result: Generation,
        stop: list[str] | None = None,
        deadline: float | None = None,
    ) -> AsyncIterator[str]:
        """Yields content pieces; fills `result` from the finish reason and the usage chunk (asked for with
        `stream_options.include_usage`). Bounded by `budget(deadline)` as a whole."""
        budget = self.budget(deadline)
        until = time.monotonic() + budget
        chunks: openai.AsyncStream[ChatCompletionChunk] | None = None
        try:
            # max_retries covers the request up to the response's status line (connect errors, 429, 5xx);
            # wait_for keeps the retries and their backoff inside the budget too.
            chunks = await asyncio.wait_for(
                self._client.chat.completions.create(
                    model=self.model,
                    messages=_openai_messages(messages),
                    stream=True,
                    stream_options={"include_usage": True},
                    max_tokens=max_tokens,  # llama.cpp, vLLM, TGI and NIM read this name
                    temperature=temperature,
                    seed=openai.omit if seed is None else seed,
                    stop=stop or openai.omit,
                    timeout=budget,
                ),
                budget,
            )
            iterator = aiter(chunks)
            while True:
                try:
                    chunk = await _next_within(iterator, until)
                except StopAsyncIteration:
                    break
                if chunk.usage is not None:
                    result.prompt_tokens = chunk.usage.prompt_tokens
                    result.completion_tokens = chunk.usage.completion_tokens
                for choice in chunk.choices[:1]:
                    if choice.finish_reason:
                        result.done_reason = choice.finish_reason
                    piece = choice.delta.content or ""
                    if piece:
                        result.text += piece
                        yield piece
        except (TimeoutError, openai.APITimeoutError, httpx.TimeoutException) as exc:
            raise self._late(budget) from exc
        except (openai.APIConnectionError, httpx.TransportError) as exc:
            raise Unavailable(f"the language model at {self.endpoint} is unreachable: {exc}") from exc
        except openai.APIStatusError as exc:
            raise Unavailable(
                f"the language model at {self.endpoint} failed: HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except openai.APIError as exc:
            raise Unavailable(f"the language model at {self.endpoint} failed: {exc}") from exc
        finally:
            if chunks is not None:
                await chunks.close()  # releases the HTTP stream early (the answer may stop the model)


def _openai_messages(messages: list[dict[str, str]]) -> list[ChatCompletionMessageParam]:
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        role, content = message["role"], message["content"]
        if role == "system":
            out.append({"role": "system", "content": content})
        elif role == "assistant":
            out.append({"role": "assistant", "content": content})
        else:
            out.append({"role": "user", "content": content})
    return out


def chat_model(settings: Settings) -> ChatModel:
    """The model client the settings choose (ANSWERER_LLM_BACKEND)."""
    if settings.llm_backend == "openai":
        assert settings.openai_base_url is not None  # the settings' validator requires it for this backend
        return OpenAIChat(
            settings.openai_base_url,
            settings.model,
            settings.timeout_seconds,
            api_key=settings.openai_api_key.get_secret_value(),
            max_retries=settings.llm_max_retries,
        )
    assert settings.ollama_host is not None
    return OllamaChat(settings.ollama_host, settings.model, settings.timeout_seconds, settings.llm_max_retries)
