"""The OpenAI-compatible API: `POST /v1/chat/completions` (JSON or Server-Sent Events) and `GET /v1/models`, so
that a chat UI (Open WebUI, LibreChat) or any OpenAI SDK can talk to ragmesh.

It is the chat of `/api/v1/chat`, not a second one: the same bearer JWT (the API key), rate limit and pipeline
(routers/chat.py `start_chat`), so the same permission filtering. The messages map onto a ChatRequest: the last
message must be the user's and is the question; the earlier user and assistant messages are the history (the
newest MAX_HISTORY_TURNS, each cut to the turn limit). System and developer messages are ignored: the platform's
own instructions are the answerer's, and a client cannot replace them. Sampling parameters (temperature, top_p, ...)
are ignored too; `max_tokens` is capped at the chat's limit.

The content is the answer as verified, with its citations as `[n]` (n = a source's `index`): a stream sends it
once the answerer's verification is done, never the unverified draft, so a withheld answer is never shown. An
outcome that is not an answer (no_permission, no_sources, ingesting, ...) is the platform's message as the content.
The native final event (FinalEvent in /openapi.json: outcome, sources, citations, verification, trace id) is the
`ragmesh` field of the reply, and of the stream's last chunk; `usage` is the model's token counts for the answer
(null when the model server did not count them). Errors are in OpenAI's shape,
`{"error": {"message", "type", "param", "code"}}`, with the native API's statuses (422 is 400 here, as OpenAI's).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from typing import Any, Literal

import anyio
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sse_starlette.sse import EventSourceResponse

from ragmesh_common import limits
from ragmesh_gateway.deps import MetricsDep, OrchestratorDep, RateLimiterDep, User
from ragmesh_gateway.mesh import StepFailed
from ragmesh_gateway.models import ERROR_DESCRIPTIONS, MAX_HISTORY_TURNS, ChatRequest, FinalEvent, Reply, Turn
from ragmesh_gateway.routers.chat import SSE_HEADERS, start_chat, until_admitted
from ragmesh_gateway.shutdown import SHUTDOWN_GRACE_SECONDS, until_shutdown
from ragmesh_gateway.validation import StrictJSONRoute, text_problem

MAX_MESSAGES = 1000  # a long conversation from a chat UI; only its newest turns are used
MAX_ANSWER_TOKENS = 1024  # ChatRequest.max_tokens' bound
CREATED = 1735689600  # the models' `created` (2025-01-01): a fixed date, so /v1/models does not change

# model id -> the ChatRequest fields that profile sets (a new mode is a new entry)
PROFILES: dict[str, dict[str, Any]] = {"ragmesh": {}}

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}
ERROR_CODES = {401: "invalid_api_key", 413: "request_too_large", 429: "rate_limit_exceeded"}


class OpenAIError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code or ERROR_CODES.get(status)
        self.headers = headers

    def body(self) -> dict[str, Any]:
        kind = ERROR_TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)

    @classmethod
    def from_step(cls, data: dict[str, Any]) -> OpenAIError:
        """A failed or refused step (StepFailed's payload, an `error` event's data): the status it had natively,
        Retry-After for a busy answerer."""
        status = int(data.get("status") or 503)
        retry = data.get("retry_after")
        code = "overloaded" if retry else ("service_unavailable" if status == 503 else None)
        headers = {"Retry-After": str(retry)} if retry else None
        return cls(status, f"{data.get('step', 'gateway')}: {data.get('message', '')}", code=code, headers=headers)


def _param(loc: Any) -> str | None:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or None


class OpenAIRoute(StrictJSONRoute):
    """A route whose refusals (the bearer check, validation, limits, HTTP errors) are in OpenAI's error shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def openai_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except OpenAIError as exc:
                return exc.response()
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                message = str(first.get("msg", "invalid request"))
                if first.get("type") == "json_invalid":
                    message = f"invalid JSON: {(first.get('ctx') or {}).get('error', message)}"
                param = _param(first.get("loc", ()))
                return OpenAIError(400, f"{param}: {message}" if param else message, param=param).response()
            except HTTPException as exc:
                detail = exc.detail
                if isinstance(detail, dict):
                    return OpenAIError.from_step({**detail, "status": exc.status_code}).response()
                headers = dict(exc.headers) if exc.headers else None
                return OpenAIError(exc.status_code, str(detail), headers=headers).response()

        return openai_handler


router = APIRouter(prefix="/v1", route_class=OpenAIRoute, tags=["openai"])


# ---------- response models (the OpenAPI spec) ----------
class OpenAIErrorDetail(Reply):
    message: str
    type: str = Field(description="invalid_request_error, rate_limit_error, server_error, ...")
    param: str | None = Field(None, description="the request field at fault, e.g. `model` or `messages.0.content`")
    code: str | None = Field(None, description="e.g. invalid_api_key, model_not_found, rate_limit_exceeded, overloaded")


class OpenAIErrorResponse(Reply):
    """Every 4xx and 5xx of /v1, in OpenAI's error shape."""

    error: OpenAIErrorDetail


class AssistantMessage(Reply):
    role: Literal["assistant"]
    content: str = Field(description="the verified answer with `[n]` citations, or the outcome's message")


class Choice(Reply):
    index: int
    message: AssistantMessage
    finish_reason: Literal["stop", "length"]


class Usage(Reply):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(Reply):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: Usage | None = Field(None, description="the model's tokens; null when the model server did not count them")
    ragmesh: FinalEvent = Field(description="outcome, sources, citations, verification and trace id")


class ModelOut(Reply):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(Reply):
    object: Literal["list"]
    data: list[ModelOut]


def openai_errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` in OpenAI's error shape: the 4xx as one range (a validation error is a 400 here)."""
    described = "; ".join(f"{code}: {ERROR_DESCRIPTIONS[code]}" for code in codes if code < 500)
    responses: dict[int | str, dict[str, Any]] = {"4XX": {"model": OpenAIErrorResponse, "description": described}}
    for code in codes:
        if code >= 500:
            responses[code] = {"model": OpenAIErrorResponse, "description": ERROR_DESCRIPTIONS[code]}
    return responses


STREAM_DESCRIPTION = (
    "JSON (ChatCompletion), or text/event-stream when stream=true: `data:` lines each holding a "
    "chat.completion.chunk (the first with the role, then the answer's content, the last with `finish_reason`, "
    "`usage` and `ragmesh`), then `data: [DONE]`; a failure after the response began is a `data:` line with `error`."
)


# ---------- requests ----------
class ContentPart(BaseModel):
    type: str
    text: str | None = None


class Message(BaseModel):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class CompletionRequest(BaseModel):
    """OpenAI's chat completion request; the fields ragmesh does not use are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1, max_length=256)
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1, le=1, description="one choice only")


def message_text(message: Message, index: int) -> str:
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    texts = []
    for part in message.content:
        if part.type != "text" or part.text is None:
            raise OpenAIError(
                400,
                f"messages.{index}.content: only text content is supported, not {part.type!r}",
                param=f"messages.{index}.content",
            )
        texts.append(part.text)
    return "\n".join(texts)


def chat_request(body: CompletionRequest, profile: dict[str, Any]) -> ChatRequest:
    """The native chat request of an OpenAI one: the last message (the user's) as the question, the earlier user
    and assistant messages as the history."""
    last = len(body.messages) - 1
    if body.messages[last].role != "user":
        raise OpenAIError(400, "the last message must be the user's question", param="messages")
    question = message_text(body.messages[last], last).strip()
    if not question:
        raise OpenAIError(400, "the last user message is empty", param=f"messages.{last}.content")
    problem = text_problem(question)
    if problem is not None:
        raise OpenAIError(400, f"messages.{last}.content {problem}", param=f"messages.{last}.content")
    history: list[Turn] = []
    for index, message in enumerate(body.messages[:last]):
        if message.role not in ("user", "assistant"):
            continue  # system/developer: the platform's instructions stay; tool results are not knowledge
        text = message_text(message, index).strip()
        problem = text_problem(text)
        if problem is not None:
            raise OpenAIError(400, f"messages.{index}.content {problem}", param=f"messages.{index}.content")
        if text:
            history.append(Turn(role=message.role, content=text[: limits.TURN.value]))
    requested = body.max_completion_tokens or body.max_tokens or 0
    try:
        return ChatRequest(
            question=question,
            history=history[-MAX_HISTORY_TURNS:],
            max_tokens=min(requested, MAX_ANSWER_TOKENS),
            **profile,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _param(first.get("loc", ()))
        param = f"messages.{last}.content" if field == "question" else "messages"
        raise OpenAIError(400, f"{param}: {first.get('msg')}", param=param) from exc


def profile_of(model: str) -> dict[str, Any]:
    profile = PROFILES.get(model)
    if profile is None:
        raise OpenAIError(
            404,
            f"The model '{model}' does not exist; GET /v1/models lists the ragmesh profiles ({', '.join(PROFILES)})",
            param="model",
            code="model_not_found",
        )
    return profile


# ---------- responses ----------
def model_entry(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "ragmesh"}


def chunk(completion_id: str, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_usage(final: dict[str, Any]) -> dict[str, int] | None:
    """OpenAI's `usage` of the native final event's (null when the model server did not count the tokens)."""
    usage = final.get("usage")
    if not usage:
        return None
    prompt, completion = int(usage["input_tokens"]), int(usage["output_tokens"])
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def finish_reason(final: dict[str, Any]) -> str:
    cut = any("cut off at the token limit" in w for w in final.get("warnings") or [])
    return "length" if cut else "stop"


async def final_of(events: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """The final event's data; an `error` event as OpenAIError."""
    async for item in events:
        if item["event"] == "error":
            raise OpenAIError.from_step(item["data"])
        if item["event"] == "final":
            return dict(item["data"])
    raise OpenAIError(503, "the chat ended without an answer", code="service_unavailable")


@router.post(
    "/chat/completions",
    summary="OpenAI-compatible chat: the same chat as /api/v1/chat, for chat UIs and OpenAI SDKs",
    response_model=None,
    responses={
        200: {
            "model": ChatCompletion,
            "description": STREAM_DESCRIPTION,
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **openai_errors(400, 401, 404, 413, 429, 503),
    },
)
async def chat_completions(
    body: CompletionRequest, user: User, orchestrator: OrchestratorDep, limiter: RateLimiterDep, metrics: MetricsDep
) -> Any:
    profile = profile_of(body.model)
    request = chat_request(body, profile)
    await limiter.check(user)
    try:
        events = await start_chat(orchestrator, user, request, metrics)
    except StepFailed as exc:
        raise OpenAIError.from_step(exc.payload()) from exc
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if not body.stream:
        async with contextlib.aclosing(events):
            final = await final_of(events)
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": final["answer"]},
                        "finish_reason": finish_reason(final),
                    }
                ],
                "usage": openai_usage(final),
                "ragmesh": final,
            }
        )
    return await stream(events, completion_id, body.model)


async def stream(events: AsyncGenerator[dict[str, Any], None], completion_id: str, model: str) -> Response:
    """The chat as `chat.completion.chunk` events: the role once the answerer admitted the request (a busy one
    is a 503 with Retry-After before the status line), the verified answer, a last chunk with the finish reason
    and the `usage` and `ragmesh` fields, then `[DONE]`. An error after the response began is an `error` data event."""
    shutdown = anyio.Event()  # set by sse-starlette when the server stops (SIGTERM)
    items = until_shutdown(events, shutdown)
    head = await until_admitted(items)
    if head and head[-1]["event"] == "error":
        await items.aclose()
        return OpenAIError.from_step(head[-1]["data"]).response()

    async def replay() -> AsyncIterator[dict[str, Any]]:
        for item in head:
            yield item
        async for item in items:
            yield item

    async def sse() -> AsyncIterator[dict[str, str]]:
        try:
            yield {"data": json.dumps(chunk(completion_id, model, {"role": "assistant", "content": ""}))}
            try:
                final = await final_of(replay())
            except OpenAIError as exc:
                yield {"data": json.dumps(exc.body())}
                return
            yield {"data": json.dumps(chunk(completion_id, model, {"content": final["answer"]}))}
            last = chunk(completion_id, model, {}, finish_reason(final))
            yield {"data": json.dumps({**last, "usage": openai_usage(final), "ragmesh": final})}
            yield {"data": "[DONE]"}
        finally:
            await items.aclose()  # a client that left cancels the answer at once (its slot frees)

    return EventSourceResponse(
        sse(), headers=SSE_HEADERS, ping=15, shutdown_event=shutdown, shutdown_grace_period=SHUTDOWN_GRACE_SECONDS
    )


@router.get(
    "/models",
    summary="The ragmesh profiles, as OpenAI models",
    response_model=ModelList,
    responses=openai_errors(401),
)
async def list_models(user: User) -> dict[str, Any]:
    return {"object": "list", "data": [model_entry(name) for name in PROFILES]}


@router.get(
    "/models/{model}",
    summary="One ragmesh profile, as an OpenAI model",
    response_model=ModelOut,
    responses=openai_errors(401, 404),
)
async def get_model(model: str, user: User) -> dict[str, Any]:
    profile_of(model)
    return model_entry(model)
