"""FastAPI dependencies: the caller and the parts of the app's Runtime a handler needs.

None of them refuses a request except `current_user` (401): a check whose order matters against the request's
validation (422) or the caller's rights (403) is made in the handler. All async: FastAPI runs a plain `def` dependency in its thread pool, a hand-off that costs more than these
attribute reads."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ragmesh_common.context import UserContext
from ragmesh_gateway.auth import Authenticator
from ragmesh_gateway.conversations import ConversationClient
from ragmesh_gateway.documents import DocumentLifecycle
from ragmesh_gateway.metrics import GatewayMetrics
from ragmesh_gateway.pipeline import Orchestrator
from ragmesh_gateway.runtime import RateLimiter, Runtime
from ragmesh_gateway.sessions import COOKIE, AdminSessions

_bearer = HTTPBearer(auto_error=False, description="JWT with claims sub, department, roles")


async def current_user(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None
) -> UserContext:
    """The authenticated caller: a bearer JWT verified by the app's Authenticator or, without an Authorization
    header, the dashboard's session cookie (sessions.py; CSRF-checked when the request changes something)."""
    if "authorization" not in request.headers:
        cookie = request.cookies.get(COOKIE)
        if cookie:
            sessions: AdminSessions = request.app.state.sessions
            return sessions.user(request, cookie)
    authenticator: Authenticator = request.app.state.authenticator
    return await authenticator.authenticate(request)


async def metrics(request: Request) -> GatewayMetrics:
    return request.app.state.metrics  # type: ignore[no-any-return]  # set by create_app


async def runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]  # set by the app's lifespan


async def orchestrator(rt: Annotated[Runtime, Depends(runtime)]) -> Orchestrator:
    return rt.orchestrator


async def rate_limiter(rt: Annotated[Runtime, Depends(runtime)]) -> RateLimiter:
    return rt.rate_limiter


async def documents(rt: Annotated[Runtime, Depends(runtime)]) -> DocumentLifecycle:
    return rt.documents


async def conversations(rt: Annotated[Runtime, Depends(runtime)]) -> ConversationClient:
    return rt.conversations


User = Annotated[UserContext, Depends(current_user)]
RuntimeDep = Annotated[Runtime, Depends(runtime)]
OrchestratorDep = Annotated[Orchestrator, Depends(orchestrator)]
RateLimiterDep = Annotated[RateLimiter, Depends(rate_limiter)]
Documents = Annotated[DocumentLifecycle, Depends(documents)]
ConversationsDep = Annotated[ConversationClient, Depends(conversations)]
MetricsDep = Annotated[GatewayMetrics, Depends(metrics)]
