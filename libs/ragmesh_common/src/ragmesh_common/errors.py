"""Domain errors and their gRPC status codes, mapped in one place for every servicer."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import AsyncGenerator, Callable
from types import MappingProxyType
from typing import Any, TypeVar

import grpc
import re2
from grpc import aio

logger = logging.getLogger(__name__)


class InvalidArgument(ValueError):
    """The request is malformed; maps to INVALID_ARGUMENT."""


class NotFound(LookupError):
    """The object does not exist or the caller may not see it; maps to NOT_FOUND."""


class PermissionDenied(PermissionError):
    """The caller may see the object but not change it; maps to PERMISSION_DENIED."""


class Unavailable(RuntimeError):
    """A dependency is down or not ready; maps to UNAVAILABLE."""


class FailedPrecondition(RuntimeError):
    """The service is not configured for this call; maps to FAILED_PRECONDITION."""


_CODES: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
]


def status_for(exc: BaseException) -> grpc.StatusCode | None:
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return None


F = TypeVar("F", bound=Callable[..., Any])

_closing: set[asyncio.Task[None]] = set()  # the close tasks in flight (the loop keeps only weak references)


async def _close_quietly(stream: AsyncGenerator[Any, None]) -> None:
    with contextlib.suppress(RuntimeError):  # still running: the call's cancellation already reached it
        await stream.aclose()


def close_when_done(context: aio.ServicerContext[Any, Any], stream: AsyncGenerator[Any, None]) -> None:
    """Closes a server-streaming servicer's generator when its call ends, the caller's cancellation included.

    gRPC drops a generator that sits at a `yield` when the caller goes away, without closing it; its `finally`
    blocks (an admission slot's release, a model stream's close) would then wait for the garbage collector,
    for minutes when a tracing wrapper makes it part of a reference cycle. Closing an ended one does nothing.
    """

    def close(_: aio.ServicerContext[Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(_close_quietly(stream))
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    context.add_done_callback(close)  # type: ignore[arg-type]  # grpc-stubs declare the callback as a class, not a Protocol


def grpc_errors(func: F) -> F:
    """Maps domain exceptions raised by a servicer method to gRPC status codes.

    Unknown exceptions become INTERNAL with a generic message (details stay in the log).
    Works for unary (coroutine) and server-streaming (async generator) methods.
    """

    async def _abort(context: aio.ServicerContext[Any, Any], exc: BaseException) -> None:
        code = status_for(exc)
        if code is None:
            logger.exception("unhandled error in %s", func.__qualname__)
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {func.__name__}: {type(exc).__name__}")
        await context.abort(code, str(exc))

    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def gen_wrapper(self: Any, request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
            stream = func(self, request, context)
            close_when_done(context, stream)
            try:
                async with contextlib.aclosing(stream):
                    async for item in stream:
                        yield item
            except aio.AbortError:
                raise
            except Exception as exc:  # noqa: BLE001 - mapped to a status
                await _abort(context, exc)

        return gen_wrapper  # type: ignore[return-value]  # same signature as func; the union type cannot say which branch

    @functools.wraps(func)
    async def wrapper(self: Any, request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await func(self, request, context)
        except aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to a status
            await _abort(context, exc)

    return wrapper  # type: ignore[return-value]  # same signature as func; the union type cannot say which branch


# What a user is told when a call failed on the service's side: the cause, never gRPC's details, which name peers
# ("ipv4:127.0.0.1:50053: Failed to connect to remote host") and a service's internals.
SERVICE_FAILURES = MappingProxyType(
    {
        grpc.StatusCode.UNAVAILABLE: "the service is unreachable",
        grpc.StatusCode.DEADLINE_EXCEEDED: "no reply within the deadline",
        grpc.StatusCode.RESOURCE_EXHAUSTED: "the service is overloaded",
        grpc.StatusCode.CANCELLED: "the call was cancelled",
        grpc.StatusCode.UNIMPLEMENTED: "the service does not implement this call",
        grpc.StatusCode.INTERNAL: "the service failed internally",
        grpc.StatusCode.UNKNOWN: "the service failed internally",
        grpc.StatusCode.DATA_LOSS: "the service failed internally",
    }
)
# A peer as gRPC and sockets write it: "ipv4:10.0.0.7:50053", "ipv6:[::1]:50053", "unix:/run/x.sock",
# "dns:///embedder:50053", a bare IPv4 or [IPv6] address with or without a port, and a host with a port when the
# host has a dot or a hyphen or is localhost ("embedder.ns.svc:50053", "ragmesh-embedder:50053"; not "12:30").
# RE2 (linear time): it reads error details, which can echo user input.
_ADDRESS = re2.compile(
    r"\b(?:ipv4|ipv6|unix|unix-abstract|dns|vsock):\S+"
    r"|\[[0-9A-Fa-f:.]+\](?::\d+)?"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
    r"|\b(?:localhost|[A-Za-z][\w-]*(?:\.[\w-]+)+|[A-Za-z]\w*(?:-\w+)+):\d{2,5}\b"
)


def redact_addresses(text: str) -> str:
    """`text` with network addresses and ports replaced by "<address>" (user-visible messages)."""
    return str(_ADDRESS.sub("<address>", text))


def public_message(code: grpc.StatusCode, details: str | None) -> str:
    """What a user may be shown of a failed call: the cause for a failure on the service's side, else the
    service's own message (a refusal the user can act on) without addresses. Log the full details beside it."""
    if code in SERVICE_FAILURES:
        return f"{SERVICE_FAILURES[code]} ({code.name})"
    return redact_addresses(details or code.name)
