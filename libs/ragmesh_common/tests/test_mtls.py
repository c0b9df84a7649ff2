"""mTLS between services: two in-process services (the real GrpcService bootstrap) with certificates from one CA.

`front` relays a call to `back` over `mesh_channel`, as the graph calls the retriever. A client with a certificate
of the mesh CA gets through both hops; one without a certificate, with a certificate of another CA, or speaking
plaintext is refused in the handshake, before any handler or token check. The plaintext health port answers
Health and nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh_common.config import ConfigError
from ragmesh_common.context import current_user
from ragmesh_common.server import GrpcService, MeshTls, TlsSettings, insecure_channel, mesh_channel
from ragmesh_common.testing import user
from ragmesh_dev.certs import CertificateAuthority
from ragmesh_dev.ports import free_port

ALICE = user("alice", "eng", ("employee",))
SERVICE = "ragmesh.test.v1.Relay"
WHO = f"/{SERVICE}/Who"
RELAY = f"/{SERVICE}/Relay"


def _identity(value: bytes) -> bytes:
    return value


async def _who(request: bytes, context: aio.ServicerContext) -> bytes:
    user = current_user.get()
    assert user is not None
    return f"back saw {user.user_id}".encode()


def _add_back(server: aio.Server) -> list[str]:
    handler = grpc.unary_unary_rpc_method_handler(_who, request_deserializer=_identity, response_serializer=_identity)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Who": handler}),))
    return [SERVICE]


def _add_front(back: str, tls: MeshTls) -> Callable[[aio.Server], list[str]]:
    channel: list[aio.Channel] = []

    async def relay(request: bytes, context: aio.ServicerContext) -> bytes:
        user = current_user.get()
        assert user is not None
        if not channel:
            channel.append(mesh_channel(back, tls))
        call = channel[0].unary_unary(WHO, request_serializer=_identity, response_deserializer=_identity)
        return bytes(await call(b"", metadata=user.metadata(), timeout=10))

    def add(server: aio.Server) -> list[str]:
        handler = grpc.unary_unary_rpc_method_handler(
            relay, request_deserializer=_identity, response_serializer=_identity
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Relay": handler}),))
        return [SERVICE]

    return add


@dataclass
class Mesh:
    ca: Path
    client: MeshTls
    rogue: MeshTls  # a certificate of another CA, for the same names
    front: str
    back: str
    health_port: int
    folder: Path


def _tls(folder: Path, ca: CertificateAuthority, name: str) -> MeshTls:
    cert, key = ca.issue(name).write(folder, name)
    return MeshTls.load(cert, key, ca.write(folder / name))


@pytest.fixture(scope="module")
async def mesh(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mesh]:
    folder = tmp_path_factory.mktemp("mtls")
    ca, other = CertificateAuthority.create(), CertificateAuthority.create("another CA")
    back = GrpcService("back", _add_back, tls=_tls(folder, ca, "back"), health_port=0)
    back_port = await back.start()
    front_tls = _tls(folder, ca, "front")
    health_port = free_port()
    front = GrpcService(
        "front",
        _add_front(f"127.0.0.1:{back_port}", front_tls),
        tls=front_tls,
        health_port=health_port,
    )
    front_port = await front.start()
    try:
        yield Mesh(
            ca=folder / "front" / "ca.crt",
            client=_tls(folder, ca, "client"),
            rogue=_tls(folder / "rogue", other, "client"),
            front=f"127.0.0.1:{front_port}",
            back=f"127.0.0.1:{back_port}",
            health_port=health_port,
            folder=folder,
        )
    finally:
        await front.stop()
        await back.stop()


async def _relay(channel: aio.Channel) -> bytes:
    call = channel.unary_unary(RELAY, request_serializer=_identity, response_deserializer=_identity)
    return bytes(await call(b"", metadata=ALICE.metadata(), timeout=10))


async def test_a_client_with_a_mesh_certificate_gets_through_both_hops(mesh: Mesh) -> None:
    async with mesh_channel(mesh.front, mesh.client) as channel:
        assert await _relay(channel) == b"back saw alice"


async def _refused(channel: aio.Channel) -> grpc.StatusCode:
    async with channel:
        with pytest.raises(aio.AioRpcError) as caught:
            await _relay(channel)
    return caught.value.code()


async def test_a_client_without_a_certificate_is_refused(mesh: Mesh) -> None:
    no_cert = grpc.ssl_channel_credentials(root_certificates=mesh.ca.read_bytes())
    assert await _refused(aio.secure_channel(mesh.front, no_cert)) == grpc.StatusCode.UNAVAILABLE
    assert await _refused(aio.secure_channel(mesh.back, no_cert)) == grpc.StatusCode.UNAVAILABLE


async def test_a_client_with_a_certificate_of_another_ca_is_refused(mesh: Mesh) -> None:
    # the rogue client trusts the mesh CA (it knows the servers) but its own certificate is not the mesh's
    rogue = MeshTls(cert=mesh.rogue.cert, key=mesh.rogue.key, ca=mesh.ca.read_bytes())
    assert await _refused(mesh_channel(mesh.front, rogue)) == grpc.StatusCode.UNAVAILABLE
    assert await _refused(mesh_channel(mesh.back, rogue)) == grpc.StatusCode.UNAVAILABLE


async def test_a_server_with_a_certificate_of_another_ca_is_not_trusted(mesh: Mesh) -> None:
    impostor = GrpcService("impostor", _add_back, tls=mesh.rogue, health_port=0)
    port = await impostor.start()
    try:
        assert await _refused(mesh_channel(f"127.0.0.1:{port}", mesh.client)) == grpc.StatusCode.UNAVAILABLE
    finally:
        await impostor.stop()


async def test_plaintext_is_refused_on_the_service_port(mesh: Mesh) -> None:
    assert await _refused(insecure_channel(mesh.front)) == grpc.StatusCode.UNAVAILABLE


async def test_the_health_port_answers_health_only_in_plaintext(mesh: Mesh) -> None:
    async with insecure_channel(f"127.0.0.1:{mesh.health_port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(aio.AioRpcError) as caught:
            await _relay(channel)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_settings_need_all_three_files_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAGMESH_TLS_CERT", "RAGMESH_TLS_KEY", "RAGMESH_TLS_CA"):
        monkeypatch.delenv(name, raising=False)
    assert TlsSettings.from_env().files() is None
    monkeypatch.setenv("RAGMESH_TLS_CERT", str(tmp_path / "a.crt"))
    with pytest.raises(ConfigError, match="RAGMESH_TLS_KEY"):
        TlsSettings.from_env().files()
    (tmp_path / "a.crt").write_text("not a certificate")
    monkeypatch.setenv("RAGMESH_TLS_KEY", str(tmp_path / "a.crt"))
    monkeypatch.setenv("RAGMESH_TLS_CA", str(tmp_path / "missing.crt"))
    with pytest.raises(ConfigError, match=r"RAGMESH_TLS_CERT: .* is not a PEM file"):
        TlsSettings.from_env().files()
