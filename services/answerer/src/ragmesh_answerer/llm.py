"""The language model behind the answerer, spoken to through Ollama's HTTP API (official `ollama` client)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import ollama

from ragmesh_common.errors import Unavailable

logger = logging.getLogger(__name__)


@dataclass
class Generation:
    """What the final Ollama line reports once the stream ends."""

    text: str = ""
    done_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


class OllamaChat:
    """Streams chat completions from one model; every failure of the dependency becomes `Unavailable`."""

    def __init__(self, host: str, model: str, timeout_seconds: float) -> None:
        self.host = host
        self.model = model
        self.timeout = timeout_seconds
        # The client's own timeout bounds connect and each read; `stream` also bounds the whole answer.
        self._client = ollama.AsyncClient(host=host, timeout=timeout_seconds)

    async def close(self) -> None:
        await self._client.close()

    async def check_model(self) -> None:
        """Raises `Unavailable` unless Ollama answers and lists the model."""
        try:
            listing = await asyncio.wait_for(self._client.list(), self.timeout)
        except (ConnectionError, httpx.TransportError, ollama.ResponseError, TimeoutError) as exc:
            raise Unavailable(f"Ollama at {self.host} is unreachable: {exc}") from exc
        names = {m.model for m in listing.models if m.model}
        wanted = {self.model, f"{self.model}:latest"}
        if not names & wanted:
            raise Unavailable(
                f"model {self.model!r} is not available on Ollama at {self.host} "
                f"(it has: {', '.join(sorted(names)) or 'none'}); pull it first"
            )

    async def wait_ready(self, max_delay: float = 10.0) -> None:
        """Retries `check_model` with backoff until it succeeds (the warm-up; health stays NOT_SERVING)."""
        delay = 0.5
        while True:
            try:
                await self.check_model()
                logger.info("model %s is available on %s", self.model, self.host)
                return
            except Unavailable as exc:
                logger.warning("%s; retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)

    async def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        result: Generation,
        stop: list[str] | None = None,
    ) -> AsyncIterator[str]:
        """Yields content pieces; fills `result` from the final line. Bounded by the timeout as a whole."""
        options: dict[str, float | int | list[str]] = {"num_predict": max_tokens, "temperature": temperature}
        if stop:
            options["stop"] = stop
        if seed is not None:
            options["seed"] = seed
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        parts: AsyncIterator[ollama.ChatResponse] | None = None
        try:
            parts = await self._client.chat(model=self.model, messages=messages, stream=True, options=options)
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                try:
                    part = await asyncio.wait_for(anext(parts), remaining)
                except StopAsyncIteration:
                    break
                piece = part.message.content or ""
                if piece:
                    result.text += piece
                    yield piece
                if part.done:
                    result.done_reason = part.done_reason or ""
                    result.prompt_tokens = part.prompt_eval_count or 0
                    result.completion_tokens = part.eval_count or 0
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise Unavailable(f"the language model at {self.host} did not answer within {self.timeout:g}s") from exc
        except (ConnectionError, httpx.TransportError) as exc:
            raise Unavailable(f"the language model at {self.host} is unreachable: {exc or type(exc).__name__}") from exc
        except ollama.ResponseError as exc:
            raise Unavailable(f"the language model at {self.host} failed: {exc}") from exc
        finally:
            if parts is not None:
                await parts.aclose()  # type: ignore[attr-defined]  # releases the HTTP stream early
