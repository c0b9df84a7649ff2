"""One request check for every gRPC service, run by a server interceptor before any servicer code.

- A request whose bytes do not decode (e.g. a string field that is not UTF-8, such as an encoded lone
  surrogate) is INVALID_ARGUMENT, not grpc's UNKNOWN/INTERNAL.
- Every string field, nested messages, repeated fields and maps included, holds no NUL character and no lone
  surrogate: PostgreSQL's `text` cannot store NUL (the query would fail with DataError, surfacing as
  UNAVAILABLE) and a lone surrogate is not encodable as UTF-8.
- Lengths and counts come from the one table, `ragmesh_common.limits.FIELDS`.

The message names the field (`chunks[3].text`, `acl.users[2]`). `GrpcService` installs the interceptor on every
service; health and reflection requests are checked the same way (they hold no such text).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from grpc import aio

from ragmesh_common.limits import FIELDS, ITEM_FIELDS, Limit, too_long

logger = logging.getLogger(__name__)

_SURROGATE = re.compile("[\ud800-\udfff]")


class RequestProblem(ValueError):
    """What is wrong with a request, naming the field; answered INVALID_ARGUMENT."""


def check_text(name: str, value: str, limit: Limit | None = None) -> None:
    """RequestProblem naming the field when `value` holds a NUL character or a lone surrogate, or is too long."""
    # `in` and isascii() are C scans, several times faster than a regex over ordinary text (this runs on every
    # string of every request); a str decoded by protobuf never holds a surrogate, one built in process may
    if "\x00" in value:
        raise RequestProblem(f"{name} contains a NUL character at position {value.index(chr(0))}")
    found = None if value.isascii() else _SURROGATE.search(value)
    if found is not None:
        raise RequestProblem(f"{name} contains a lone surrogate at position {found.start()}")
    if limit is not None:
        problem = too_long(limit, name, len(value))
        if problem:
            raise RequestProblem(problem)


def check_message(message: Message, prefix: str = "") -> None:
    """Every set field of `message`, recursively: text hygiene and the limits table; field paths as `a.b[3].c`."""
    for field, value in message.ListFields():
        name = prefix + field.name
        limit = FIELDS.get(field.full_name)
        if field.is_repeated and limit is not None:
            problem = too_long(limit, name, len(value))
            if problem:
                raise RequestProblem(problem)
        if (
            field.type == FieldDescriptor.TYPE_MESSAGE
            and field.message_type is not None
            and field.message_type.GetOptions().map_entry
        ):
            _check_map(field.message_type, value, name)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            items = enumerate(value) if field.is_repeated else [(None, value)]
            for i, item in items:
                check_message(item, f"{name}." if i is None else f"{name}[{i}].")
        elif field.type == FieldDescriptor.TYPE_STRING:
            if field.is_repeated:
                item_limit = ITEM_FIELDS.get(field.full_name)
                for i, item in enumerate(value):
                    check_text(f"{name}[{i}]", item, item_limit)
            else:
                check_text(name, value, limit)


def _check_map(entry: Descriptor, value: Any, name: str) -> None:
    key_field, value_field = entry.fields_by_name["key"], entry.fields_by_name["value"]
    for key, item in value.items():
        if key_field.type == FieldDescriptor.TYPE_STRING:
            check_text(f"{name} key", key)
        if value_field.type == FieldDescriptor.TYPE_STRING:
            check_text(f"{name}[{key!r}]", item)
        elif value_field.type == FieldDescriptor.TYPE_MESSAGE:
            check_message(item, f"{name}[{key!r}].")


class _Refused:
    """A request that did not pass: its reason, in place of the message the servicer would have got."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _checked(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            message = parse(data)
        except DecodeError as exc:
            logger.info("undecodable request refused: %s", exc)
            return _Refused("the request could not be decoded (a text field is not valid UTF-8?); send valid UTF-8")
        if isinstance(message, Message):
            try:
                check_message(message)
            except RequestProblem as exc:
                return _Refused(str(exc))
        return message

    return deserialize


def _unary(behaviour: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, _Refused):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
        return await behaviour(request, context)

    return call


def _streaming(behaviour: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        if isinstance(request, _Refused):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
        async for item in behaviour(request, context):
            yield item

    return call


class ValidationInterceptor(aio.ServerInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    """Refuses, with INVALID_ARGUMENT naming the field, a unary request that does not decode, holds NUL or a lone
    surrogate in any string, or exceeds a limit of `ragmesh_common.limits`. Request-streaming RPCs (none in
    ragmesh) pass through unchecked."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        changes: dict[str, Any] = {"request_deserializer": _checked(handler.request_deserializer)}
        if handler.unary_unary is not None:
            changes["unary_unary"] = _unary(handler.unary_unary)
        if handler.unary_stream is not None:
            changes["unary_stream"] = _streaming(handler.unary_stream)
        # RpcMethodHandler is a namedtuple at runtime; grpc-stubs declare it as a plain class (no _replace)
        checked: grpc.RpcMethodHandler[Any, Any] = handler._replace(**changes)  # type: ignore[attr-defined]  # a namedtuple at runtime (above)
        return checked
