"""Graceful stop of open chat streams: on SIGTERM uvicorn stops accepting connections and sse-starlette sets
each stream's shutdown event; `until_shutdown` then ends the stream with a final `error` event that tells the
client to retry, instead of cutting it without a final or error event."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio

logger = logging.getLogger(__name__)

SHUTDOWN_MESSAGE = "server shutting down; retry"
# sse-starlette waits this long after setting the shutdown event before it cancels the stream; it must stay
# below uvicorn's timeout_graceful_shutdown (10 s in __main__)
SHUTDOWN_GRACE_SECONDS = 3.0


def shutdown_event_item() -> dict[str, Any]:
    return {"event": "error", "data": {"step": "gateway", "message": SHUTDOWN_MESSAGE, "status": 503}}


async def until_shutdown(items: AsyncIterator[dict[str, Any]], shutdown: anyio.Event) -> AsyncIterator[dict[str, Any]]:
    """Passes `items` through until `shutdown` is set, then yields one `error` event (step "gateway") and ends.

    The source runs in a task of its own and hands its items over a queue, so the whole chat (and its
    OpenTelemetry context) stays in one task; it is cancelled on shutdown, which cancels its gRPC calls and
    runs its `finally` (the chat span ends)."""
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in items:
                queue.put_nowait(("item", item))
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            queue.put_nowait(("raise", exc))
        else:
            queue.put_nowait(("end", None))

    async def watch() -> None:
        await shutdown.wait()
        queue.put_nowait(("shutdown", None))

    producer = asyncio.create_task(pump())
    watcher = asyncio.create_task(watch())
    try:
        while True:
            kind, value = await queue.get()
            if kind == "item":
                yield value
            elif kind == "raise":
                raise value
            elif kind == "end":
                return
            else:
                logger.info("server shutting down: ending an open chat stream with an error event")
                producer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await producer
                yield shutdown_event_item()
                return
    finally:
        watcher.cancel()
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await producer
