"""Test and bench helpers for internal identity: a local key pair, users signed with it, channels that call as one
user. Production code never imports this module (the import-layering contract in pyproject.toml says so).

`local_signer()` makes one key pair per process and puts both halves in the environment
(RAGMESH_INTERNAL_PUBLIC_KEY, RAGMESH_INTERNAL_SIGNING_KEY), so that servers and a gateway app started afterwards
in this process trust it and sign with it, as they would with keys from a deployment's secrets.
"""

from __future__ import annotations

import os
from typing import Any, cast

from grpc import aio

from ragmesh_common.identity import IDENTITY_KEY, UserContext
from ragmesh_common.server import CHANNEL_OPTIONS
from ragmesh_common.tokens import (
    PUBLIC_KEY_ENV,
    SIGNING_KEY_ENV,
    TokenSigner,
    generate_keypair,
    load_signing_key,
)

_local: dict[str, TokenSigner] = {}


def local_signer(actor: str = "test") -> TokenSigner:
    """This process's test signer (made on the first call, with both keys put in the environment)."""
    if "signer" not in _local:
        private_pem, public_pem = generate_keypair()
        os.environ[PUBLIC_KEY_ENV] = public_pem
        os.environ[SIGNING_KEY_ENV] = private_pem
        _local["signer"] = TokenSigner(load_signing_key(private_pem), actor=actor)
    return _local["signer"]


def user(user_id: str, department: str = "", roles: tuple[str, ...] | list[str] = ()) -> UserContext:
    """A user whose calls carry tokens from `local_signer()`."""
    return UserContext(user_id, department, tuple(roles)).signed_by(local_signer())


class _AddIdentity:
    """Adds `user`'s token to every call that does not carry one already."""

    def __init__(self, user: UserContext) -> None:
        self.user = user

    def _details(self, details: aio.ClientCallDetails) -> aio.ClientCallDetails:
        metadata = aio.Metadata(*(details.metadata or ()))
        if IDENTITY_KEY not in metadata:
            for key, value in self.user.metadata():
                metadata.add(key, value)
        return aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


# grpc.aio files an interceptor under the first call kind it subclasses, so one class per kind.
class _UnaryUnary(_AddIdentity, aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    async def intercept_unary_unary(self, continuation: Any, details: aio.ClientCallDetails, request: Any) -> Any:
        return await continuation(self._details(details), request)


class _UnaryStream(_AddIdentity, aio.UnaryStreamClientInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    async def intercept_unary_stream(self, continuation: Any, details: aio.ClientCallDetails, request: Any) -> Any:
        return await continuation(self._details(details), request)


class _StreamUnary(_AddIdentity, aio.StreamUnaryClientInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    async def intercept_stream_unary(self, continuation: Any, details: aio.ClientCallDetails, requests: Any) -> Any:
        return await continuation(self._details(details), requests)


class _StreamStream(_AddIdentity, aio.StreamStreamClientInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    async def intercept_stream_stream(self, continuation: Any, details: aio.ClientCallDetails, requests: Any) -> Any:
        return await continuation(self._details(details), requests)


def channel_as(address: str, user: UserContext) -> aio.Channel:
    """A client channel (the mesh's message limits) whose calls all carry `user`'s token unless they name one.
    A user without a token or signer is signed by `local_signer()`."""
    if not user.token and user.signer is None:
        user = user.signed_by(local_signer())
    interceptors = [kind(user) for kind in (_UnaryUnary, _UnaryStream, _StreamUnary, _StreamStream)]
    # grpc-stubs types the parameter as a must-cast placeholder (ClientInterceptor)
    return aio.insecure_channel(
        address, options=CHANNEL_OPTIONS, interceptors=cast("list[aio.ClientInterceptor]", interceptors)
    )
