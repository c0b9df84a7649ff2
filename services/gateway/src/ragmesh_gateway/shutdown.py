"""Graceful stop of open chat streams: on SIGTERM uvicorn stops accepting connections and sse-starlette sets
each stream's shutdown event; `until_shutdown` then ends the stream with a final `error` event that tells the
client to retry, instead of cutting it without a final or error event."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any

import anyio

logger = logging.getLogger(__name__)

SHUTDOWN_MESSAGE = "server shutting down; retry"
# sse-starlette waits this long after setting the shutdown event before it cancels the stream; it must stay
# below uvicorn's timeout_graceful_shutdown (10 s in __main__)
SHUTDOWN_GRACE_SECONDS = 3.0


def shutdown_event_item() -> dict[str, Any]:
    return {"event": "error", "data": {"step": "gateway", "message": SHUTDOWN_MESSAGE, "status": 503}}


async def until_shutdown(
    items: AsyncGenerator[dict[str, Any], None], shutdown: anyio.Event | None = None
) -> AsyncGenerator[dict[str, Any], None]:
    """Iterates `items` in a task of its own and hands them over one at a time; once `shutdown` is set, ends
    with one `error` event (step "gateway") instead.

    The task of its own keeps the whole chat (and its OpenTelemetry context) in one task: the chat's events are
    read first by the request handler (up to the answerer's admission) and then by the response's task, and the
    spans they open and close across yields cannot be detached from another task. On shutdown, or when the
    consumer stops early (client gone, error returned), that task is cancelled, which cancels its gRPC calls
    and runs `items`' own `finally` (the chat span ends)."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1)

    async def produce() -> None:
        try:
            async for item in items:
                await queue.put(item)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            await queue.put(exc)
        else:
            await queue.put(_DONE)
        finally:
            await items.aclose()  # cancelled while it waited at a yield: its own finally blocks run here

    producer = asyncio.create_task(produce())
    tasks = [producer]

    async def watch(event: anyio.Event) -> None:
        await event.wait()
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await producer
        await queue.put(_SHUTDOWN)

    if shutdown is not None:
        tasks.append(asyncio.create_task(watch(shutdown)))
    try:
        while (item := await queue.get()) is not _DONE:
            if item is _SHUTDOWN:
                logger.info("server shutting down: ending an open chat stream with an error event")
                yield shutdown_event_item()
                return
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


_DONE, _SHUTDOWN = object(), object()
