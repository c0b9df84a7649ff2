"""Per-caller keys (RAGMESH_INTERNAL_CALLER_KEYS): a service-to-service caller's own key works for the services it
is registered for and for no other, and cannot mint the gateway's token that every service takes.

Two in-process GrpcServices named as the retriever and the answerer (the real bootstrap and interceptor) with an
echo service that answers with the user the handler sees.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc import aio

from ragmesh_common.config import ConfigError
from ragmesh_common.identity import IDENTITY_KEY, UserContext, current_user
from ragmesh_common.server import GrpcService, insecure_channel
from ragmesh_common.testing import local_signer
from ragmesh_common.tokens import (
    AUDIENCE,
    CALLER_KEYS_ENV,
    InvalidToken,
    TokenSigner,
    TokenVerifier,
    generate_keypair,
    key_id,
    load_caller_keys,
    load_signing_key,
    service_audience,
)

ALICE = UserContext("alice", "eng", ("employee",))
SERVICE = "ragmesh.test.v1.Echo"
RETRIEVER, EMBEDDER, ANSWERER = (service_audience(s) for s in ("retriever", "embedder", "answerer"))
CALLER_PRIVATE, CALLER_PUBLIC = generate_keypair()


def caller(audience: str | list[str], name: str = "node-batch", private_pem: str = CALLER_PRIVATE) -> TokenSigner:
    return TokenSigner(load_signing_key(private_pem), actor=name, issuer=name, audience=audience)


def registry(audiences: list[str], name: str = "node-batch", public_pem: str = CALLER_PUBLIC) -> str:
    return json.dumps([{"caller": name, "public_key": public_pem, "audiences": audiences}])


async def _who(request: bytes, context: aio.ServicerContext[Any, Any]) -> bytes:
    user = current_user.get()
    assert user is not None
    return user.user_id.encode()


def _add(server: aio.Server) -> list[str]:
    handler = grpc.method_handlers_generic_handler(SERVICE, {"Who": grpc.unary_unary_rpc_method_handler(_who)})
    server.add_generic_rpc_handlers((handler,))
    return [SERVICE]


@pytest.fixture(scope="module")
def caller_keys_env() -> Iterator[None]:
    """The caller may call the retriever and the embedder (what a search that embeds its query reaches)."""
    local_signer()  # the gateway's key pair in the environment, as the root conftest's
    before = os.environ.get(CALLER_KEYS_ENV)
    os.environ[CALLER_KEYS_ENV] = registry([RETRIEVER, EMBEDDER])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CALLER_KEYS_ENV, None)
        else:
            os.environ[CALLER_KEYS_ENV] = before


@pytest_asyncio.fixture(scope="module")
async def services(caller_keys_env: None) -> AsyncIterator[dict[str, str]]:
    started = {name: GrpcService(name, _add) for name in ("retriever", "answerer")}
    addresses = {name: f"127.0.0.1:{await service.start()}" for name, service in started.items()}
    try:
        yield addresses
    finally:
        for service in started.values():
            await service.stop()


async def _call(address: str, token: str) -> bytes:
    async with insecure_channel(address) as channel:
        return await channel.unary_unary(f"/{SERVICE}/Who")(b"", metadata=((IDENTITY_KEY, token),), timeout=10)


async def _refused(address: str, token: str) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _call(address, token)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    return err.value.details() or ""


async def test_a_caller_key_works_for_its_audiences(services: dict[str, str]) -> None:
    assert await _call(services["retriever"], caller(RETRIEVER).token(ALICE)) == b"alice"
    # a token for a call the retriever forwards to the embedder names both
    assert await _call(services["retriever"], caller([RETRIEVER, EMBEDDER]).token(ALICE)) == b"alice"
    # the gateway's key still works everywhere
    assert await _call(services["answerer"], local_signer().token(ALICE)) == b"alice"


async def test_a_caller_key_cannot_mint_for_an_audience_it_is_not_allowed(services: dict[str, str]) -> None:
    details = await _refused(services["answerer"], caller(ANSWERER).token(ALICE))
    assert "may not mint tokens for ragmesh-answerer" in details
    # naming an allowed service as well does not help
    details = await _refused(services["retriever"], caller([RETRIEVER, ANSWERER]).token(ALICE))
    assert "may not mint tokens for ragmesh-answerer" in details
    # nor does the gateway's audience, which every service takes from the gateway's key
    assert "may not mint tokens for ragmesh-internal" in await _refused(
        services["retriever"], caller([AUDIENCE, RETRIEVER]).token(ALICE)
    )
    # a token for the embedder is not one for the retriever
    assert "not for this service" in await _refused(services["retriever"], caller(EMBEDDER).token(ALICE))
    # it cannot pass for the gateway either: the issuer must be the caller's registered name
    posing = TokenSigner(load_signing_key(CALLER_PRIVATE), actor="gateway", audience=RETRIEVER)
    assert "issuer" in (await _refused(services["retriever"], posing.token(ALICE))).lower()
    # nor for another registered caller's name
    assert "issuer" in (await _refused(services["retriever"], caller(RETRIEVER, name="reporting").token(ALICE))).lower()


async def test_an_unregistered_key_is_refused_even_with_the_right_claims(services: dict[str, str]) -> None:
    stranger_private, _ = generate_keypair()
    details = await _refused(services["retriever"], caller(RETRIEVER, private_pem=stranger_private).token(ALICE))
    assert "unknown key" in details


def test_the_registry_fails_fast_naming_the_variable() -> None:
    for raw, fragment in [
        ("not json", "JSON list"),
        ('{"caller": "x"}', "JSON list"),
        (json.dumps([{"caller": "x", "public_key": CALLER_PUBLIC}]), "exactly the keys"),
        (registry(["retriever"]), "ragmesh-<service>"),
        (registry([]), "non-empty"),
        (registry([RETRIEVER], name="ragmesh-gateway"), "gateway's"),
        (registry([RETRIEVER], name="bad name!"), "caller must be"),
        (registry([RETRIEVER], public_pem="nope"), "public_key"),
    ]:
        with pytest.raises(ConfigError, match=CALLER_KEYS_ENV) as err:
            load_caller_keys(raw)
        assert fragment in str(err.value), (raw, str(err.value))


def test_a_verifier_without_its_service_name_takes_no_caller_token() -> None:
    gateway_key = Ed25519PrivateKey.generate()
    keys = {key_id(gateway_key.public_key()): gateway_key.public_key()}
    verifier = TokenVerifier(keys, callers=load_caller_keys(registry([RETRIEVER])))
    with pytest.raises(InvalidToken, match="not for this service"):
        verifier.verify(caller(RETRIEVER).token(ALICE))
