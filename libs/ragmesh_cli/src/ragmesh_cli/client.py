"""The gateway's HTTP API as the CLI uses it: settings, one error type with a one-line message, SSE parsing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Self

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class Settings:
    """Where the gateway is and who the caller is (flags, else RAGMESH_URL / RAGMESH_TOKEN)."""

    url: str = DEFAULT_URL
    token: str = ""
    timeout_s: float = 60.0
    transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None  # tests pass a MockTransport

    @classmethod
    def from_env(cls) -> Settings:
        return cls(url=os.environ.get("RAGMESH_URL", DEFAULT_URL), token=os.environ.get("RAGMESH_TOKEN", ""))

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def timeout(self) -> httpx.Timeout:
        # SSE streams send a ping every 15 s, so a read timeout of a minute only trips on a dead server
        return httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s))


class ApiError(Exception):
    """A refused or failed request, as one line: `HTTP 404: document … not found`."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.message}" if self.status else self.message


def error_message(body: Any) -> str:
    """The gateway's ErrorResponse as text: a message, a failed step, or the invalid fields of a 422."""
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict):
        message = str(detail.get("message") or detail.get("reason") or json.dumps(detail))
        return f"{detail['step']}: {message}" if detail.get("step") else message
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict):
                where = ".".join(str(p) for p in item.get("loc", []))
                parts.append(f"{where}: {item.get('msg', '')}" if where else str(item.get("msg", "")))
            else:
                parts.append(str(item))
        return "; ".join(parts) or "invalid request"
    return json.dumps(detail)


def raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text.strip() or response.reason_phrase
    message = error_message(body)
    retry_after = response.headers.get("Retry-After")
    if retry_after:
        message += f" (retry after {retry_after} s)"
    raise ApiError(response.status_code, message)


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """(event name, JSON data) for each event of a text/event-stream; comments (pings) are skipped."""
    name = "message"
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield name, json.loads("\n".join(data))


class Api:
    """A synchronous client of one gateway; every call has the settings' timeout."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        transport = settings.transport if isinstance(settings.transport, httpx.BaseTransport) else None
        self.http = httpx.Client(
            base_url=settings.url, headers=settings.headers(), timeout=settings.timeout(), transport=transport
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise unreachable(self.settings.url, exc) from exc
        raise_for_status(response)
        return response.json()

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.request("GET", path, params={k: v for k, v in (params or {}).items() if v is not None})

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def stream(self, method: str, path: str, body: dict[str, Any] | None = None) -> Iterator[tuple[str, Any]]:
        """The events of an SSE endpoint as they arrive; an error status before the stream is an ApiError."""
        try:
            with self.http.stream(method, path, json=body) as response:
                if not response.is_success:
                    response.read()
                    raise_for_status(response)
                yield from sse_events(response.iter_lines())
        except httpx.TransportError as exc:
            raise unreachable(self.settings.url, exc) from exc


def unreachable(url: str, exc: httpx.TransportError) -> ApiError:
    if isinstance(exc, httpx.TimeoutException):
        return ApiError(None, f"{url} did not answer in time ({type(exc).__name__})")
    return ApiError(None, f"cannot reach {url}: {exc or type(exc).__name__}")
