"""The gRPC side of request context: a server interceptor verifies the internal token into `current_user`.

The gateway authenticates the user and puts a short-lived token signed for that user (see
`ragmesh_common.tokens`) into the metadata of every outgoing call; the ingestion worker does the same for
the uploader. One server interceptor per service verifies it and sets `current_user`; a call without a
valid token is refused with UNAUTHENTICATED (health and reflection stay open). Plain `x-rag-user`-style
metadata means nothing: the user comes only from a verified token. A service that calls another one on
the user's behalf (retriever → embedder, graph → retriever) forwards the token it received.

The user context itself lives in `ragmesh_common.identity` (no gRPC); its names are importable from here too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc import aio

from ragmesh_common.identity import IDENTITY_KEY, Signer, UserContext, current_user, validate_identifier
from ragmesh_common.tokens import InvalidToken, TokenVerifier

__all__ = [
    "IDENTITY_KEY",
    "OPEN_METHOD_PREFIXES",
    "Signer",
    "UserContext",
    "UserContextInterceptor",
    "current_user",
    "require_user",
    "validate_identifier",
]

logger = logging.getLogger(__name__)

# Open without a token: probes (kubelet, the gateway's /readyz, launchers) and grpcurl's discovery.
OPEN_METHOD_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


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

    def __init__(self, verifier: TokenVerifier | None = None, service: str | None = None) -> None:
        """`service` (the server's name) selects the caller keys that may call it (RAGMESH_INTERNAL_CALLER_KEYS)."""
        self.verifier = verifier if verifier is not None else TokenVerifier.from_env(service)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        method = handler_call_details.method or ""
        if method.startswith(OPEN_METHOD_PREFIXES):
            current_user.set(None)
            return await continuation(handler_call_details)
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
