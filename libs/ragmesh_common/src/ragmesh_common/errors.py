"""Domain errors and their gRPC status codes, mapped in one place for every servicer."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
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
            try:
                async for item in func(self, request, context):
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
