"""Internal identity: every RPC but health and reflection needs a valid signed token; the user comes only from it.

An in-process GrpcService (the real server bootstrap and interceptor) with a small echo service that answers
with the user the handler sees.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh_common.config import ConfigError
from ragmesh_common.identity import IDENTITY_KEY, NoIdentity, UserContext, current_user
from ragmesh_common.server import GrpcService, insecure_channel
from ragmesh_common.testing import channel_as, local_signer
from ragmesh_common.testing import user as local_user
from ragmesh_common.tokens import (
    PUBLIC_KEY_ENV,
    SIGNING_KEY_ENV,
    InvalidToken,
    TokenSigner,
    TokenVerifier,
    generate_keypair,
    key_id,
    load_public_keys,
    load_signing_key,
)

ALICE = local_user("alice", "eng", ("employee",))
SERVICE = "ragmesh.test.v1.Echo"


def _who() -> bytes:
    user = current_user.get()
    assert user is not None  # the interceptor refuses before the handler otherwise
    return f"{user.user_id}|{user.department}|{','.join(user.roles)}|{bool(user.token)}".encode()


async def _unary(request: bytes, context: aio.ServicerContext) -> bytes:
    return _who()


async def _stream(request: bytes, context: aio.ServicerContext) -> AsyncIterator[bytes]:
    yield _who()
    yield _who()


def _add(server: aio.Server) -> list[str]:
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "Who": grpc.unary_unary_rpc_method_handler(_unary),
                    "WhoStream": grpc.unary_stream_rpc_method_handler(_stream),
                },
            ),
        )
    )
    return [SERVICE]


@pytest.fixture(scope="module")
async def address() -> AsyncIterator[str]:
    service = GrpcService("echo", _add)  # the interceptor reads RAGMESH_INTERNAL_PUBLIC_KEY (the root conftest's)
    port = await service.start()
    yield f"127.0.0.1:{port}"
    await service.stop()


@pytest.fixture
def signer() -> TokenSigner:
    return local_signer()


async def _call(address: str, metadata: Any, method: str = "Who") -> bytes:
    async with insecure_channel(address) as channel:
        if method == "Who":
            return await channel.unary_unary(f"/{SERVICE}/Who")(b"", metadata=metadata, timeout=10)
        replies = [r async for r in channel.unary_stream(f"/{SERVICE}/WhoStream")(b"", metadata=metadata, timeout=10)]
        return b";".join(replies)


def _foreign_signer(kid_of: TokenSigner | None = None) -> TokenSigner:
    """A signer with a key the services do not trust; with `kid_of`, it even claims that signer's key id."""
    foreign = TokenSigner(Ed25519PrivateKey.generate(), actor="attacker")
    if kid_of is not None:
        foreign._kid = kid_of._kid
    return foreign


def _refused_cases(signer: TokenSigner) -> dict[str, Any]:
    now = int(time.time())
    return {
        "no identity": (),
        "forged plain metadata": (("x-rag-user", "carol"), ("x-rag-department", "finance"), ("x-rag-roles", "admin")),
        "wrong key": ((IDENTITY_KEY, _foreign_signer().mint(ALICE)),),
        "wrong key, trusted kid": ((IDENTITY_KEY, _foreign_signer(signer).mint(ALICE)),),
        "expired": ((IDENTITY_KEY, signer.mint(ALICE, iat=now - 300, exp=now - 60)),),
        "other audience": ((IDENTITY_KEY, signer.mint(ALICE, aud="ragmesh-public")),),
        "other issuer": ((IDENTITY_KEY, signer.mint(ALICE, iss="someone-else")),),
        "long-lived": ((IDENTITY_KEY, signer.mint(ALICE, exp=now + 86400)),),
        "bad subject": ((IDENTITY_KEY, signer.mint(ALICE, sub="carol; DROP")),),
        "not a token": ((IDENTITY_KEY, "carol"),),
        "unsigned": ((IDENTITY_KEY, _unsigned(ALICE)),),
    }


def _unsigned(user: UserContext) -> str:
    import jwt

    now = int(time.time())
    return jwt.encode(
        {"sub": user.user_id, "iat": now, "exp": now + 60, "aud": "ragmesh-internal", "iss": "ragmesh-gateway"},
        None,
        algorithm="none",
    )


@pytest.mark.parametrize(
    "case",
    [
        "no identity",
        "forged plain metadata",
        "wrong key",
        "wrong key, trusted kid",
        "expired",
        "other audience",
        "other issuer",
        "long-lived",
        "bad subject",
        "not a token",
        "unsigned",
    ],
)
@pytest.mark.parametrize("method", ["Who", "WhoStream"])
async def test_calls_without_a_valid_token_are_refused(
    address: str, signer: TokenSigner, case: str, method: str
) -> None:
    with pytest.raises(aio.AioRpcError) as caught:
        await _call(address, _refused_cases(signer)[case], method)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, case
    assert "unauthenticated" in (caught.value.details() or "")


async def test_a_valid_token_names_the_user_and_plain_metadata_cannot_override_it(address: str) -> None:
    assert await _call(address, ALICE.metadata()) == b"alice|eng|employee|True"
    forged = (*ALICE.metadata(), ("x-rag-user", "carol"), ("x-rag-roles", "admin"))
    assert await _call(address, forged) == b"alice|eng|employee|True"
    assert await _call(address, ALICE.metadata(), "WhoStream") == b"alice|eng|employee|True;alice|eng|employee|True"


async def test_channel_as_adds_the_token_to_every_call(address: str) -> None:
    async with channel_as(address, UserContext("bob", "hr", ())) as channel:
        assert await channel.unary_unary(f"/{SERVICE}/Who")(b"", timeout=10) == b"bob|hr||True"
        replies = [r async for r in channel.unary_stream(f"/{SERVICE}/WhoStream")(b"", timeout=10)]
        assert replies == [b"bob|hr||True"] * 2


async def test_health_and_reflection_need_no_token(address: str) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    async with insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stream = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
        services = [s.name async for reply in stream for s in reply.list_services_response.service]
        assert SERVICE in services


def test_signer_reuses_a_users_token_for_most_of_its_lifetime() -> None:
    now = [1_000_000.0]
    signer = TokenSigner(Ed25519PrivateKey.generate(), actor="gateway", ttl_seconds=120, clock=lambda: now[0])
    first = signer.token(ALICE)
    now[0] += 80
    assert signer.token(ALICE) == first
    assert signer.token(UserContext("alice", "eng", ("employee", "admin"))) != first  # roles are part of the key
    now[0] += 20  # 100 s: past three quarters of 120 s, a fresh token (still 20 s left on the old one)
    assert signer.token(ALICE) != first


def test_verifier_caches_until_expiry_and_then_refuses() -> None:
    now = [float(int(time.time()))]
    key = Ed25519PrivateKey.generate()
    signer = TokenSigner(key, actor="gateway", ttl_seconds=60, clock=lambda: now[0])
    verifier = TokenVerifier({key_id(key.public_key()): key.public_key()}, leeway=0, clock=lambda: now[0])
    token = signer.token(ALICE)
    assert verifier.verify(token) == ALICE and verifier.verify(token).token == token
    now[0] += 61
    with pytest.raises(InvalidToken):
        verifier.verify(token)


def test_several_public_keys_allow_rotation() -> None:
    old, new = generate_keypair(), generate_keypair()
    keys = load_public_keys(old[1] + new[1])
    verifier = TokenVerifier(keys)
    for private, _ in (old, new):
        assert verifier.verify(TokenSigner(load_signing_key(private), actor="gateway").token(ALICE)) == ALICE


def test_missing_or_bad_keys_fail_fast_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PUBLIC_KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=PUBLIC_KEY_ENV):
        TokenVerifier.from_env()
    monkeypatch.setenv(PUBLIC_KEY_ENV, "not a key")
    with pytest.raises(ConfigError, match=PUBLIC_KEY_ENV):
        TokenVerifier.from_env()
    monkeypatch.delenv(SIGNING_KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=SIGNING_KEY_ENV):
        TokenSigner.from_env("gateway")
    monkeypatch.setenv(SIGNING_KEY_ENV, generate_keypair()[1])  # a public key where the private one belongs
    with pytest.raises(ConfigError, match=SIGNING_KEY_ENV):
        TokenSigner.from_env("gateway")


def test_metadata_without_a_signer_or_token_is_an_error() -> None:
    with pytest.raises(NoIdentity, match="RAGMESH_INTERNAL_SIGNING_KEY"):
        UserContext("alice", "eng", ("employee",)).metadata()
    forwarded = UserContext("alice", token="abc", signer=local_signer())
    assert forwarded.metadata() == ((IDENTITY_KEY, "abc"),)  # a service forwards what it received


def test_the_user_a_signer_is_handed_to_signs_with_it_and_two_signers_do_not_mix() -> None:
    first, second = (TokenSigner(Ed25519PrivateKey.generate(), actor=a) for a in ("gateway", "ingest-worker"))
    keys = {key_id(s._key.public_key()): s._key.public_key() for s in (first, second)}
    verifier = TokenVerifier(keys)
    plain = UserContext("alice", "eng", ("employee",))
    for signer in (first, second):
        ((_, token),) = plain.signed_by(signer).metadata()
        assert verifier.verify(token) == plain
        assert jwt.decode(token, options={"verify_signature": False})["act"] == {"sub": signer.actor}
    assert plain.signer is None  # signed_by returns a copy: the plain user still names nobody
