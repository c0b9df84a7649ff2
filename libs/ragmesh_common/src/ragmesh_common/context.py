"""Request context (user, roles, department): a signed internal token in gRPC metadata, read into a contextvar.

The gateway authenticates the user and puts a short-lived token signed for that user (see
`ragmesh_common.tokens`) into the metadata of every outgoing call; the ingestion worker does the same for
the uploader. One server interceptor per service verifies it and sets `current_user`; a call without a
valid token is refused with UNAUTHENTICATED (health and reflection stay open). Plain `x-rag-user`-style
metadata means nothing: the user comes only from a verified token. A service that calls another one on
the user's behalf (retriever → embedder, graph → retriever) forwards the token it received.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import grpc
from grpc import aio

if TYPE_CHECKING:
    from ragmesh_common.tokens import TokenVerifier

logger = logging.getLogger(__name__)

IDENTITY_KEY = "x-rag-identity"
# Open without a token: probes (kubelet, the gateway's /readyz, launchers) and grpcurl's discovery.
OPEN_METHOD_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)

_IDENT = re.compile(r"^[A-Za-z0-9_.@:\-]{1,128}$")


class Signer(Protocol):
    def token(self, user: UserContext) -> str: ...


_signer: Signer | None = None


def install_signer(signer: Signer | None) -> None:
    """Sets the process's token signer (the gateway and the worker, once at start-up; tests and benches)."""
    global _signer
    _signer = signer


def installed_signer() -> Signer | None:
    return _signer


@dataclass(frozen=True)
class UserContext:
    user_id: str
    department: str = ""
    roles: tuple[str, ...] = field(default_factory=tuple)
    # The verified token this user arrived with (services); forwarded as is to the next hop.
    token: str = field(default="", repr=False, compare=False)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Call metadata naming this user to the next service: the token the request arrived with, or one from
        the process's signer (cached per user, so this is a dictionary lookup on the hot path)."""
        token = self.token
        if not token:
            if _signer is None:
                raise RuntimeError(
                    "no internal identity signer in this process: the gateway and the worker "
                    "install one from RAGMESH_INTERNAL_SIGNING_KEY (ragmesh_common.tokens)"
                )
            token = _signer.token(self)
        return ((IDENTITY_KEY, token),)


def validate_identifier(value: str, what: str) -> str:
    if not _IDENT.match(value):
        raise ValueError(f"{what} must be 1-128 characters of letters, digits, _ . @ : -; got {value!r}")
    return value


current_user: contextvars.ContextVar[UserContext | None] = contextvars.ContextVar("current_user", default=None)


async def require_user(context: aio.ServicerContext[Any, Any]) -> UserContext:
    """The caller's user; aborts the RPC with UNAUTHENTICATED when there is none."""
    user = current_user.get()
    if user is None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"no verified internal identity ({IDENTITY_KEY})")
    assert user is not None
    return user


def _token_of(metadata: Any) -> str:
    for key, value in metadata or ():
        if key == IDENTITY_KEY:
            return value.decode() if isinstance(value, bytes) else value
    return ""


def _refusal(handler: grpc.RpcMethodHandler[Any, Any], message: str) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same shape as `handler` that answers UNAUTHENTICATED without running it."""

    async def refuse(_request: Any, context: aio.ServicerContext[Any, Any]) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    kinds = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    make = kinds[(bool(handler.request_streaming), bool(handler.response_streaming))]
    return make(
        refuse, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )


class UserContextInterceptor(aio.ServerInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    """Verifies the internal identity token into `current_user`; refuses any other RPC without a valid one.

    The verifier defaults to `TokenVerifier.from_env()` (RAGMESH_INTERNAL_PUBLIC_KEY): a service without the
    key fails at start-up, naming the variable.
    """

    def __init__(self, verifier: TokenVerifier | None = None) -> None:
        if verifier is None:
            from ragmesh_common.tokens import TokenVerifier

            verifier = TokenVerifier.from_env()
        self.verifier = verifier

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        method = handler_call_details.method or ""
        if method.startswith(OPEN_METHOD_PREFIXES):
            current_user.set(None)
            return await continuation(handler_call_details)
        from ragmesh_common.tokens import InvalidToken

        token = _token_of(handler_call_details.invocation_metadata)
        try:
            if not token:
                raise InvalidToken(f"no internal identity token ({IDENTITY_KEY})")
            user = self.verifier.verify(token)
        except InvalidToken as exc:
            current_user.set(None)
            handler = await continuation(handler_call_details)
            logger.warning("refused %s: %s", method, exc)
            return _refusal(handler, f"unauthenticated: {exc}") if handler is not None else handler
        current_user.set(user)
        return await continuation(handler_call_details)
