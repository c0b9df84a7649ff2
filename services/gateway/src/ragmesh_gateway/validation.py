"""Input hygiene for the HTTP API: bad input is a 4xx that says what is wrong, never a 5xx.

- Text: control characters other than tab, line feed and carriage return, NUL bytes and lone
  surrogates are refused in every text a client sends (questions, history, queries, titles, ACL
  entries, file names, trace filters). PostgreSQL refuses NUL in text and a lone surrogate cannot be
  encoded as UTF-8, so either would otherwise fail deep inside a service and come back as a 5xx.
- JSON: Python's json module accepts NaN, Infinity and -Infinity, which are not JSON (RFC 8259),
  and decodes a '\\ud800' escape into a str that cannot be encoded later. Request bodies are parsed
  strictly here, and either is a 422.
- Validation errors are answered without echoing the input: an echoed NaN or lone surrogate made
  the 422 itself fail to serialize (a 500), and an echoed 4000-character question is noise.
- Headers: the sum of a request's header sizes is capped (431).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import AfterValidator, Field, StringConstraints
from starlette.types import ASGIApp, Receive, Scope, Send

from ragmesh_common.errors import InvalidArgument
from ragmesh_common.formats import ImageTooLarge, check_content
from ragmesh_common.identity import IDENTIFIER_PATTERN  # the one identifier rule (tokens, ACL entries)
from ragmesh_gateway.messages import language, message

# C0 controls except \t \n \r, DEL, C1 controls, and surrogates (a str holding one is not valid Unicode text)
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def describe_char(char: str) -> str:
    code = ord(char)
    if code == 0:
        return "a NUL byte (U+0000)"
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate (U+{code:04X})"
    return f"a control character (U+{code:04X})"


def text_problem(value: str) -> str | None:
    """Why `value` is not acceptable text, or None when it is."""
    match = _BAD_CHARS.search(value)
    if match is None:
        return None
    return (
        f"contains {describe_char(match.group())} at position {match.start()}; control characters other than "
        f"tab and newlines, NUL bytes and lone surrogates are not accepted"
    )


def check_text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# The same rule for the OpenAPI spec (surrogates aside, which a JSON Schema pattern cannot name), so that
# clients and fuzzers know it; the check itself is check_text, whose message says what and where.
TEXT_PATTERN = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$"
# Any text a client sends; pydantic turns the ValueError into a 422 naming the field.
Text = Annotated[str, AfterValidator(check_text), Field(json_schema_extra={"pattern": TEXT_PATTERN})]
# An ACL entry: a department, role or user name, the same identifiers a token's claims must be.
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]


def check_upload_content(filename: str, content: bytes, mime_type: str = "") -> None:
    """415 when an upload's bytes are not what its extension says (the parser's format registry decides); 413 for
    an image whose header declares more pixels or pages than a scan has (a decompression bomb)."""
    try:
        check_content(filename, content, mime_type)
    except ImageTooLarge as exc:
        raise HTTPException(413, str(exc)) from exc
    except InvalidArgument as exc:
        raise HTTPException(415, str(exc)) from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (RFC 8259); send a finite number")


def _find_surrogate(value: Any) -> str | None:
    if isinstance(value, str):
        match = _SURROGATES.search(value)
        return match.group() if match else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_surrogate(key) or _find_surrogate(item)
            if found:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _find_surrogate(item)
            if found:
                return found
    return None


def strict_json(body: bytes) -> Any:
    """JSON as RFC 8259 has it: UTF-8, no NaN/Infinity, no lone surrogate escapes. Raises JSONDecodeError
    (which FastAPI answers with a 422 json_invalid error)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError(f"the body is not valid UTF-8 ({exc.reason})", "", exc.start) from exc
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        raise json.JSONDecodeError(str(exc), text, 0) from exc
    if _ESCAPED_SURROGATE.search(text):  # a proper pair decodes to one character; what is left is lone
        found = _find_surrogate(value)
        if found is not None:
            raise json.JSONDecodeError(
                f"{describe_char(found)} is not valid Unicode; escape a character outside the BMP as a surrogate pair",
                text,
                0,
            )
    return value


class StrictJSONRequest(Request):
    """A request whose body is read up to `app.state.max_json_bytes` (413 beyond, in the error model; Starlette's
    own body limit answers in plain text) and parsed by `strict_json`. FastAPI reads a JSON body through
    `body()`; forms and files are streamed past it."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            limit: int | None = getattr(self.app.state, "max_json_bytes", None)
            declared = self.headers.get("content-length", "")
            if limit is not None and declared.isdigit() and int(declared) > limit:
                raise HTTPException(413, f"the request body is {declared} bytes; at most {limit} are accepted")
            chunks: list[bytes] = []
            size = 0
            async for chunk in self.stream():
                size += len(chunk)
                if limit is not None and size > limit:
                    raise HTTPException(413, f"the request body is over {limit} bytes")
                chunks.append(chunk)
            self._body = b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_json(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """A route whose JSON body is parsed by `strict_json`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict_handler


def _loc(loc: Any) -> list[str | int]:
    return [part if isinstance(part, int) else str(part) for part in loc]


def _message(error: dict[str, Any]) -> str:
    ctx = error.get("ctx") or {}
    if error.get("type") == "json_invalid" and ctx.get("error"):
        return f"invalid JSON: {ctx['error']}"
    return str(error.get("msg", "invalid value"))


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 with where and what, without the offending input (see the module docstring)."""
    assert isinstance(exc, RequestValidationError)
    detail = [
        {"loc": _loc(e.get("loc", ())), "msg": _message(e), "type": str(e.get("type", "value_error"))}
        for e in exc.errors()
    ]
    lang = language(header=request.headers.get("accept-language", ""))
    problems = [
        message(
            "field_missing" if item["type"] == "missing" else "field_invalid",
            lang,
            field=".".join(str(part) for part in item["loc"]),
        )
        for item in detail[:10]
    ]
    summary = message("invalid_request", lang, fields="; ".join(problems))  # in the user's language (messages.py)
    return JSONResponse({"detail": detail, "message": summary}, status_code=422)


class HeaderLimitMiddleware:
    """431 when a request's headers add up to more than `max_bytes` (names, values and 4 bytes each for
    ': ' and CRLF). uvicorn's h11 parser has its own limit (h11_max_incomplete_event_size); httptools has none."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.max_bytes > 0:
            size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
            if size > self.max_bytes:
                response = JSONResponse(
                    {"detail": f"request headers are {size} bytes; at most {self.max_bytes} are accepted"},
                    status_code=431,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
