"""Request context (user, roles, department) carried in gRPC metadata and read into contextvars.

The gateway authenticates the user and puts the context into the metadata of every
outgoing call; one server interceptor in each service reads it into `current_user`.
"""
from __future__ import annotations

import contextvars
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc import aio

USER_KEY = "x-rag-user"
ROLES_KEY = "x-rag-roles"
DEPARTMENT_KEY = "x-rag-department"

_IDENT = re.compile(r"^[A-Za-z0-9_.@:\-]{1,128}$")


@dataclass(frozen=True)
class UserContext:
    user_id: str
    department: str = ""
    roles: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (
            (USER_KEY, self.user_id),
            (DEPARTMENT_KEY, self.department),
            (ROLES_KEY, ",".join(self.roles)),
        )


def validate_identifier(value: str, what: str) -> str:
    if not _IDENT.match(value):
        raise ValueError(f"{what} must be 1-128 characters of letters, digits, _ . @ : -; got {value!r}")
    return value


def user_from_metadata(metadata: Any) -> UserContext | None:
    """Builds the user context from invocation metadata; None when no user is named."""
    values: dict[str, str] = {}
    for key, value in metadata or ():
        if key in (USER_KEY, ROLES_KEY, DEPARTMENT_KEY):
            values[key] = value.decode() if isinstance(value, bytes) else value
    user = values.get(USER_KEY, "")
    if not user:
        return None
    roles = tuple(r for r in values.get(ROLES_KEY, "").split(",") if r)
    return UserContext(user_id=user, department=values.get(DEPARTMENT_KEY, ""), roles=roles)


current_user: contextvars.ContextVar[UserContext | None] = contextvars.ContextVar("current_user", default=None)


async def require_user(context: aio.ServicerContext) -> UserContext:
    """The caller's user; aborts the RPC with UNAUTHENTICATED when there is none."""
    user = current_user.get()
    if user is None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no user context in request metadata (x-rag-user)")
    assert user is not None
    return user


class UserContextInterceptor(aio.ServerInterceptor):
    """Reads the user context from metadata into `current_user` for the handler."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        user = None
        try:
            user = user_from_metadata(handler_call_details.invocation_metadata)
            if user is not None:
                validate_identifier(user.user_id, "x-rag-user")
        except ValueError:
            user = None
        current_user.set(user)
        return await continuation(handler_call_details)
