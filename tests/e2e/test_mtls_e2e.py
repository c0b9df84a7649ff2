"""The mesh with mTLS (RAGMESH_DEV_MTLS=1): every hop between services is TLS with client certificates.

An upload is ingested (gateway -> parser, embedder, retriever, graph through the worker) and searched (gateway ->
embedder, retriever, reranker; retriever -> embedder; graph -> retriever) over mTLS. An attacker on the network
with a valid internal token but no mesh certificate is refused at the handshake: in plaintext, with TLS and no
client certificate, or with a certificate of another CA.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.context import IDENTITY_KEY, UserContext
from ragmesh_dev.certs import CertificateAuthority
from ragmesh_dev.devstack import DEFAULT_PORTS, SERVICES, Stack
from ragmesh_dev.ports import free_port

from .conftest import running

pytestmark = pytest.mark.e2e

ALICE = UserContext("alice", "eng", ("employee",))
NOTE = "# Reactor\n\nThe Zephyr reactor in Lyon runs at 340 kelvin. Its operator is Norvik Energy.\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data = tmp_path_factory.mktemp("mtls-mesh")
    ports = {name: free_port() for name in DEFAULT_PORTS}
    stack = Stack(data, ports=ports, mtls=True, extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "1000"})
    yield from running(stack)


def test_an_upload_is_ingested_and_found_over_mtls(stack: Stack) -> None:
    headers = {"Authorization": f"Bearer {stack.token('alice', 'eng', ['employee'])}"}
    with httpx.Client(base_url=stack.gateway_url, timeout=300) as client:
        reply = client.post(
            "/api/v1/documents", headers=headers, files={"file": ("reactor.md", NOTE.encode(), "text/markdown")}
        )
        assert reply.status_code == 202, reply.text
        document_id = reply.json()["document_id"]
        deadline = time.monotonic() + 600
        while (doc := client.get(f"/api/v1/documents/{document_id}", headers=headers).json())["status"] not in (
            "ready",
            "failed",
        ):
            assert time.monotonic() < deadline, doc
            time.sleep(0.5)
        assert doc["status"] == "ready", doc
        found = client.post(
            "/api/v1/search",
            headers=headers,
            json={"query": "Zephyr reactor temperature", "document_ids": [document_id], "relevance_gate": False},
        )
        assert found.status_code == 200, found.text
        assert any("340 kelvin" in hit["snippet"] for hit in found.json()["results"]), found.json()
    for name in SERVICES:
        assert "mTLS" in (stack.logs / f"{name}.log").read_text(errors="replace"), f"{name} is not serving mTLS"


def _list_documents(channel: grpc.Channel, token: str) -> None:
    retriever_pb2_grpc.RetrieverServiceStub(channel).ListDocuments(
        retriever_pb2.ListDocumentsRequest(), metadata=((IDENTITY_KEY, token),), timeout=10
    )


def test_a_caller_without_a_mesh_certificate_is_refused(stack: Stack, tmp_path: Path) -> None:
    token = stack.internal_signer("e2e-test").token(ALICE)  # a valid identity: only the certificate is missing
    address = stack.addr("retriever")
    ca = (stack.data_dir / "tls" / "ca.crt").read_bytes()
    rogue = CertificateAuthority.create("rogue").issue("gateway")
    attempts = {
        "plaintext": grpc.insecure_channel(address),
        "no client certificate": grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=ca)),
        "another CA": grpc.secure_channel(
            address,
            grpc.ssl_channel_credentials(root_certificates=ca, private_key=rogue.key, certificate_chain=rogue.cert),
        ),
    }
    for what, channel in attempts.items():
        with channel, pytest.raises(grpc.RpcError) as caught:
            _list_documents(channel, token)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, what  # type: ignore[attr-defined]
    # the same call with a mesh certificate goes through
    files = [Path(p).read_bytes() for p in stack.tls_files("e2e-test").values()]
    credentials = grpc.ssl_channel_credentials(
        root_certificates=files[2], private_key=files[1], certificate_chain=files[0]
    )
    with grpc.secure_channel(address, credentials) as channel:
        _list_documents(channel, token)
