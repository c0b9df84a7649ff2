"""Internal identity at the retriever: only a verified token names the user; CheckDocumentAccess answers under RLS.

Named after test_retriever_search (whose fixtures it uses): its databases reset the app role's password, so it runs after
the tests that use the session database's DSN.
"""

from __future__ import annotations

import time

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.identity import IDENTITY_KEY
from ragmesh_common.testing import local_signer
from ragmesh_common.testing import user as local_user
from ragmesh_common.tokens import TokenSigner

from .test_retriever_search import ALICE, BOB, add_document, app_dsn, create_document, stub, unit  # noqa: F401 - app_dsn and stub are fixtures

CAROL = local_user("carol", "finance", ("employee",))
Stub = retriever_pb2_grpc.RetrieverServiceStub


def _signer() -> TokenSigner:
    signer = local_signer()
    return signer


def _forged() -> dict[str, tuple[tuple[str, str], ...]]:
    now = int(time.time())
    signer = _signer()
    return {
        "none": (),
        "plain metadata": (("x-rag-user", "carol"), ("x-rag-department", "finance"), ("x-rag-roles", "employee")),
        "wrong key": ((IDENTITY_KEY, TokenSigner(Ed25519PrivateKey.generate(), actor="x").mint(CAROL)),),
        "expired": ((IDENTITY_KEY, signer.mint(CAROL, iat=now - 300, exp=now - 60)),),
        "other audience": ((IDENTITY_KEY, signer.mint(CAROL, aud="ragmesh-public")),),
    }


@pytest.mark.parametrize("case", ["none", "plain metadata", "wrong key", "expired", "other audience"])
async def test_search_and_catalogue_refuse_callers_without_a_valid_token(stub: Stub, case: str) -> None:
    await add_document(stub, CAROL, "carol's", [("carol quarterly figures", unit(0))])
    metadata = _forged()[case]
    calls = [
        stub.Search(retriever_pb2.SearchRequest(query="carol quarterly figures"), metadata=metadata, timeout=10),
        stub.ListDocuments(retriever_pb2.ListDocumentsRequest(), metadata=metadata, timeout=10),
        stub.CheckDocumentAccess(
            retriever_pb2.CheckDocumentAccessRequest(document_ids=[]), metadata=metadata, timeout=10
        ),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, case
    # carol, with a valid token, does see her document
    reply = await stub.Search(
        retriever_pb2.SearchRequest(query="carol quarterly figures"), metadata=CAROL.metadata(), timeout=10
    )
    assert [r.chunk.text for r in reply.results] == ["carol quarterly figures"]


async def test_check_document_access_readable_and_owned(stub: Stub) -> None:
    mine = await add_document(stub, ALICE, "mine", [("alpha", unit(0))])
    draft = await add_document(stub, ALICE, "draft", [("beta", unit(1))], ready=False)
    bobs = await add_document(stub, BOB, "bob's", [("gamma", unit(2))])  # hr only
    shared = await create_document(
        stub,
        retriever_pb2.CreateOrGetDocumentRequest(
            title="shared", filename="shared.md", acl=common_pb2.Acl(departments=["eng"])
        ),
        metadata=BOB.metadata(),
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=shared.document_id, status=common_pb2.DOCUMENT_STATUS_READY
        ),
        metadata=BOB.metadata(),
    )
    ids = [mine, draft, bobs, shared.document_id, "not-a-uuid", "00000000-0000-0000-0000-000000000000"]
    reply = await stub.CheckDocumentAccess(
        retriever_pb2.CheckDocumentAccessRequest(document_ids=ids), metadata=ALICE.metadata(), timeout=10
    )
    assert set(reply.readable_ids) == {mine, shared.document_id}  # the draft is not ready; bob's is hr-only
    assert set(reply.owned_ids) == {mine, draft}
    bob = await stub.CheckDocumentAccess(
        retriever_pb2.CheckDocumentAccessRequest(document_ids=ids), metadata=BOB.metadata(), timeout=10
    )
    assert set(bob.readable_ids) == {bobs, shared.document_id} and set(bob.owned_ids) == {bobs, shared.document_id}
    empty = await stub.CheckDocumentAccess(retriever_pb2.CheckDocumentAccessRequest(), metadata=ALICE.metadata())
    assert not empty.readable_ids and not empty.owned_ids


async def test_document_stamps_are_readable_only_and_change_with_the_acl(stub: Stub) -> None:
    """GetDocumentStamps (the semantic cache's hit-time check): the readable, ready documents only, and a stamp
    that changes when the ACL does, though the version does not."""
    mine = await add_document(stub, ALICE, "stamped", [("delta", unit(3))])
    draft = await add_document(stub, ALICE, "stamped draft", [("epsilon", unit(4))], ready=False)
    bobs = await add_document(stub, BOB, "bob's stamped", [("zeta", unit(5))])  # hr only
    ids = [mine, draft, bobs, "not-a-uuid"]
    reply = await stub.GetDocumentStamps(
        retriever_pb2.GetDocumentStampsRequest(document_ids=ids), metadata=ALICE.metadata(), timeout=10
    )
    assert [d.document_id for d in reply.documents] == [mine]
    before = reply.documents[0]
    assert before.version == 1 and before.stamp and reply.accessible_documents >= 1
    await stub.UpdateDocument(
        retriever_pb2.UpdateDocumentRequest(document_id=mine, acl=common_pb2.Acl(departments=["eng", "hr"])),
        metadata=ALICE.metadata(),
    )
    after = await stub.GetDocumentStamps(
        retriever_pb2.GetDocumentStampsRequest(document_ids=[mine]), metadata=ALICE.metadata(), timeout=10
    )
    assert after.documents[0].version == before.version and after.documents[0].stamp != before.stamp
    bob = await stub.GetDocumentStamps(
        retriever_pb2.GetDocumentStampsRequest(document_ids=ids), metadata=BOB.metadata(), timeout=10
    )
    assert {d.document_id for d in bob.documents} == {mine, bobs}  # hr may read it now
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetDocumentStamps(
            retriever_pb2.GetDocumentStampsRequest(document_ids=["x"] * 1001), metadata=ALICE.metadata(), timeout=10
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
