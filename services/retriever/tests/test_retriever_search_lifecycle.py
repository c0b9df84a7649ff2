"""Document lifecycle in the catalogue, through the gRPC contract and under RLS as the application role: content-hash
dedup, versions swapped without a gap, title/ACL updates with their audit trail, chunk listing, list filters and
cursors, the admin view of problem documents.

Named after test_retriever_search (whose fixtures it uses): its databases reset the app role's password, so it runs
after the tests that use the session database's DSN.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os

import grpc
import psycopg
import pytest

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.context import UserContext
from ragmesh_common.rls import SET_IDENTITY, assertion
from ragmesh_common.testing import user as local_user

from .test_retriever_search import ALICE, BOB, add_document, app_dsn, create_document, owner_dsn_of, stub, unit  # noqa: F401 - app_dsn and stub are fixtures

CAROL = local_user("carol", "finance", ("employee",))
ADMIN = local_user("root", "ops", ("admin",))
Stub = retriever_pb2_grpc.RetrieverServiceStub
READY = common_pb2.DOCUMENT_STATUS_READY
PARAGRAPH = common_pb2.CHUNK_LEVEL_PARAGRAPH


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def rpc_error(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


def chunks_of(doc_id: str, tag: str, texts: list[str], level: int = PARAGRAPH) -> list[common_pb2.Chunk]:
    return [
        common_pb2.Chunk(
            chunk_id=f"{doc_id}:{tag}:{i}",
            document_id=doc_id,
            level=level,
            ordinal=i,
            text=text,
            embedding=unit(i % 50),
        )
        for i, text in enumerate(texts)
    ]


async def ready_document(
    stub: Stub,
    user: UserContext,
    title: str,
    texts: list[str],
    *,
    acl: common_pb2.Acl | None = None,
    content: bytes | None = None,
    tag: str = "v1",
    title_given: bool = True,
) -> str:
    """A ready document `{title}.md`; without `title_given` it is titled by its file name, as an upload without a
    title is."""
    doc = await create_document(
        stub,
        retriever_pb2.CreateOrGetDocumentRequest(
            title=title if title_given else "",
            filename=f"{title}.md",
            acl=acl,
            content_sha256=sha(content) if content else "",
        ),
        metadata=user.metadata(),
    )
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(document_id=doc.document_id, chunks=chunks_of(doc.document_id, tag, texts)),
        metadata=user.metadata(),
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(document_id=doc.document_id, status=READY), metadata=user.metadata()
    )
    return doc.document_id


async def search_texts(stub: Stub, user: UserContext, query: str) -> list[str]:
    reply = await stub.Search(retriever_pb2.SearchRequest(query=query, top_k=50), metadata=user.metadata())
    return [r.chunk.text for r in reply.results]


async def test_create_or_get_deduplicates_per_owner(stub: Stub) -> None:
    content = b"%PDF-1.7 the same bytes"
    request = retriever_pb2.CreateOrGetDocumentRequest(
        title="report",
        filename="report.pdf",
        mime_type="application/pdf",
        size_bytes=len(content),
        content_sha256=sha(content).upper(),
    )
    first = await stub.CreateOrGetDocument(request, metadata=ALICE.metadata())
    assert not first.existing and first.document.version == 1 and first.document.content_sha256 == sha(content)
    again = await stub.CreateOrGetDocument(request, metadata=ALICE.metadata())
    assert again.existing and again.document.document_id == first.document.document_id
    # another owner's identical bytes are their own document
    bobs = await stub.CreateOrGetDocument(request, metadata=BOB.metadata())
    assert not bobs.existing and bobs.document.document_id != first.document.document_id
    # concurrent uploads of new bytes by one owner make one document
    other = retriever_pb2.CreateOrGetDocumentRequest(filename="b.txt", content_sha256=sha(b"other bytes"))
    replies = await asyncio.gather(*(stub.CreateOrGetDocument(other, metadata=ALICE.metadata()) for _ in range(5)))
    assert len({r.document.document_id for r in replies}) == 1 and sum(not r.existing for r in replies) == 1
    # a failed document is not a duplicate worth returning: the upload starts afresh
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=first.document.document_id, status=common_pb2.DOCUMENT_STATUS_FAILED, error="parse failed"
        ),
        metadata=ALICE.metadata(),
    )
    fresh = await stub.CreateOrGetDocument(request, metadata=ALICE.metadata())
    assert not fresh.existing and fresh.document.document_id != first.document.document_id
    # the hash is required and checked
    for bad in ("", "abc", "g" * 64):
        error = await rpc_error(
            stub.CreateOrGetDocument(
                retriever_pb2.CreateOrGetDocumentRequest(filename="x.txt", content_sha256=bad),
                metadata=ALICE.metadata(),
            )
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "content_sha256" in (error.details() or "")


async def test_a_title_a_person_chose_is_kept_and_a_file_name_title_gives_way_to_the_parsed_one(stub: Stub) -> None:
    async def ready(doc_id: str, title: str, version: int = 0) -> common_pb2.Document:
        return await stub.UpdateDocumentStatus(
            retriever_pb2.UpdateDocumentStatusRequest(document_id=doc_id, status=READY, title=title, version=version),
            metadata=ALICE.metadata(),
        )

    named = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(filename="Plan_v2.md"), metadata=ALICE.metadata()
    )
    assert (named.title, named.title_given) == ("Plan_v2", False)  # the file name's stem until parsed
    assert (await ready(named.document_id, "Roadmap 2026")).title == "Roadmap 2026"
    given = await create_document(
        stub,
        retriever_pb2.CreateOrGetDocumentRequest(title="  Q3 figures ", filename="q3.xlsx"),
        metadata=ALICE.metadata(),
    )
    assert (given.title, given.title_given) == ("Q3 figures", True)
    assert (await ready(given.document_id, "Sheet1")).title == "Q3 figures"  # ingestion keeps it
    # a person confirms the parsed title: from then on it is theirs, and a new version's parsed title does not move it
    kept = await stub.UpdateDocument(
        retriever_pb2.UpdateDocumentRequest(document_id=named.document_id, title="Roadmap 2026"),
        metadata=ALICE.metadata(),
    )
    assert (kept.document.title, kept.document.title_given) == ("Roadmap 2026", True)
    begun = await stub.BeginNewVersion(
        retriever_pb2.BeginNewVersionRequest(
            document_id=named.document_id, filename="Plan_v3.md", size_bytes=2, content_sha256=sha(b"v3")
        ),
        metadata=ALICE.metadata(),
    )
    await ready(named.document_id, "Draft", begun.version)
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(
            document_id=named.document_id,
            chunks=chunks_of(named.document_id, "v3", ["roadmap item one"]),
            version=begun.version,
        ),
        metadata=ALICE.metadata(),
    )
    after = await stub.GetDocument(
        retriever_pb2.GetDocumentRequest(document_id=named.document_id), metadata=ALICE.metadata()
    )
    assert (after.version, after.filename, after.title) == (begun.version, "Plan_v3.md", "Roadmap 2026")


async def test_new_version_swaps_chunks_without_a_gap(stub: Stub) -> None:
    """A reader searching and listing chunks while a new version is indexed sees the old version's chunks or the
    new version's, in every reply: never both, never neither."""
    old_texts = [f"quarterly ledger entry {i} old" for i in range(150)]
    new_texts = [f"quarterly ledger entry {i} new" for i in range(200)]
    doc_id = await ready_document(stub, ALICE, "ledger", old_texts, content=b"v1", title_given=False)
    begun = await stub.BeginNewVersion(
        retriever_pb2.BeginNewVersionRequest(
            document_id=doc_id,
            filename="ledger-2.md",
            mime_type="text/markdown",
            size_bytes=2,
            content_sha256=sha(b"v2"),
        ),
        metadata=ALICE.metadata(),
    )
    assert not begun.unchanged and begun.version == 2
    doc = begun.document
    assert (doc.status, doc.version, doc.pending_version, doc.pending_status) == (
        READY,
        1,
        2,
        common_pb2.DOCUMENT_STATUS_QUEUED,
    )
    # the ingestion's progress goes to the pending version; the document stays ready and searchable
    parsing = await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=doc_id,
            status=common_pb2.DOCUMENT_STATUS_PARSING,
            version=2,
            page_count=7,
            title="Ledger, second edition",
            parser_version=2,
        ),
        metadata=ALICE.metadata(),
    )
    assert parsing.status == READY and parsing.pending_status == common_pb2.DOCUMENT_STATUS_PARSING
    assert parsing.title == "ledger" and parsing.page_count == 0  # metadata waits for the swap
    assert parsing.parser_version == 0  # the visible version's reading, until the new one replaces it
    assert any(t.endswith(" old") for t in await search_texts(stub, ALICE, "quarterly ledger"))

    seen: list[set[str]] = []
    swapped = asyncio.Event()

    async def reader() -> None:
        while True:
            done = swapped.is_set()
            reply = await stub.Search(
                retriever_pb2.SearchRequest(query="quarterly ledger entry", top_k=20, query_vector=unit(3), alpha=0.5),
                metadata=ALICE.metadata(),
            )
            seen.append({r.chunk.chunk_id.split(":")[1] for r in reply.results})
            listed = await stub.ListChunks(
                retriever_pb2.ListChunksRequest(document_id=doc_id, limit=1000), metadata=ALICE.metadata()
            )
            seen.append({c.chunk_id.split(":")[1] for c in listed.chunks})
            assert len(listed.chunks) in (len(old_texts), len(new_texts))
            if done:
                return

    readers = [asyncio.create_task(reader()) for _ in range(3)]
    await asyncio.sleep(0)
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(document_id=doc_id, chunks=chunks_of(doc_id, "v2", new_texts), version=2),
        metadata=ALICE.metadata(),
    )
    swapped.set()
    await asyncio.gather(*readers)
    assert all(len(versions) == 1 for versions in seen), [v for v in seen if len(v) != 1][:3]
    assert {"v2"} in seen
    doc = await stub.GetDocument(retriever_pb2.GetDocumentRequest(document_id=doc_id), metadata=ALICE.metadata())
    assert (doc.version, doc.pending_version, doc.status, doc.filename, doc.content_sha256, doc.chunk_count) == (
        2,
        0,
        READY,
        "ledger-2.md",
        sha(b"v2"),
        200,
    )
    assert (doc.title, doc.page_count, doc.parser_version) == ("Ledger, second edition", 7, 2)
    texts = await search_texts(stub, ALICE, "quarterly ledger")
    assert texts and all(t.endswith(" new") for t in texts)
    # the old ingestion's late calls are refused, not applied
    late = await rpc_error(
        stub.UpdateDocumentStatus(
            retriever_pb2.UpdateDocumentStatusRequest(
                document_id=doc_id, status=common_pb2.DOCUMENT_STATUS_PARSING, version=1
            ),
            metadata=ALICE.metadata(),
        )
    )
    assert late.code() == grpc.StatusCode.FAILED_PRECONDITION
    # the same bytes again are no new version
    same = await stub.BeginNewVersion(
        retriever_pb2.BeginNewVersionRequest(document_id=doc_id, content_sha256=sha(b"v2")), metadata=ALICE.metadata()
    )
    assert same.unchanged and same.version == 2 and same.document.pending_version == 0


async def test_failed_new_version_keeps_the_old_one_and_reingest_replaces_in_place(stub: Stub) -> None:
    doc_id = await ready_document(stub, ALICE, "manual", ["torque settings for the spindle"], content=b"m1")
    await stub.BeginNewVersion(
        retriever_pb2.BeginNewVersionRequest(document_id=doc_id, content_sha256=sha(b"m2")), metadata=ALICE.metadata()
    )
    stale = await rpc_error(
        stub.IndexChunks(
            retriever_pb2.IndexChunksRequest(document_id=doc_id, chunks=chunks_of(doc_id, "x", ["stale"]), version=1),
            metadata=ALICE.metadata(),
        )
    )
    assert stale.code() == grpc.StatusCode.FAILED_PRECONDITION
    failed = await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=doc_id, status=common_pb2.DOCUMENT_STATUS_FAILED, error="parse failed: encrypted PDF"
        ),
        metadata=ALICE.metadata(),
    )  # version 0: the pending version
    assert (failed.status, failed.version, failed.pending_version, failed.pending_status, failed.pending_error) == (
        READY,
        1,
        2,
        common_pb2.DOCUMENT_STATUS_FAILED,
        "parse failed: encrypted PDF",
    )
    assert await search_texts(stub, ALICE, "spindle torque") == ["torque settings for the spindle"]
    problems = await stub.ListProblemDocuments(retriever_pb2.ListProblemDocumentsRequest(), metadata=ADMIN.metadata())
    mine = [p for p in problems.documents if p.document.document_id == doc_id]
    assert [p.problem for p in mine] == ["version_failed"]
    assert "encrypted PDF" in mine[0].reason and "version 1 is still served" in mine[0].reason

    # re-ingest: the visible version's bytes again, swapped in the same way, the version number kept
    again = await stub.BeginNewVersion(
        retriever_pb2.BeginNewVersionRequest(document_id=doc_id, reingest=True), metadata=ALICE.metadata()
    )
    assert again.version == 1 and again.document.pending_version == 1 and again.document.pending_error == ""
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(
            document_id=doc_id, chunks=chunks_of(doc_id, "r", ["torque settings for the spindle, re-read"])
        ),
        metadata=ALICE.metadata(),
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=doc_id, status=READY, warnings=["page 3: table could not be read"]
        ),
        metadata=ALICE.metadata(),
    )
    doc = await stub.GetDocument(retriever_pb2.GetDocumentRequest(document_id=doc_id), metadata=ALICE.metadata())
    assert (doc.version, doc.pending_version, doc.content_sha256, list(doc.warnings)) == (
        1,
        0,
        sha(b"m1"),
        ["page 3: table could not be read"],
    )
    assert await search_texts(stub, ALICE, "spindle torque") == ["torque settings for the spindle, re-read"]

    # a document that never became ready has nothing to keep: a new version starts it over
    draft = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(filename="d.txt"), metadata=ALICE.metadata()
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=draft.document_id, status=common_pb2.DOCUMENT_STATUS_FAILED, error="boom"
        ),
        metadata=ALICE.metadata(),
    )
    restarted = await stub.BeginNewVersion(
        retriever_pb2.BeginNewVersionRequest(
            document_id=draft.document_id, filename="d2.txt", content_sha256=sha(b"d2")
        ),
        metadata=ALICE.metadata(),
    )
    assert (
        restarted.version,
        restarted.document.version,
        restarted.document.status,
        restarted.document.error,
        restarted.document.filename,
        restarted.document.pending_version,
    ) == (2, 2, common_pb2.DOCUMENT_STATUS_QUEUED, "", "d2.txt", 0)
    # only the owner starts versions
    denied = await rpc_error(
        stub.BeginNewVersion(
            retriever_pb2.BeginNewVersionRequest(document_id=doc_id, reingest=True), metadata=CAROL.metadata()
        )
    )
    assert denied.code() == grpc.StatusCode.NOT_FOUND


async def test_acl_change_applies_to_the_next_search_and_access_check(stub: Stub) -> None:
    doc_id = await ready_document(stub, BOB, "salaries", ["salary bands for engineers"])  # hr only
    access = retriever_pb2.CheckDocumentAccessRequest(document_ids=[doc_id])
    assert await search_texts(stub, ALICE, "salary bands") == []
    assert not (await stub.CheckDocumentAccess(access, metadata=ALICE.metadata())).readable_ids
    updated = (
        await stub.UpdateDocument(
            retriever_pb2.UpdateDocumentRequest(
                document_id=doc_id, acl=common_pb2.Acl(departments=["hr", "eng"], users=["carol", "carol"])
            ),
            metadata=BOB.metadata(),
        )
    ).document
    assert list(updated.acl.departments) == ["hr", "eng"] and list(updated.acl.users) == ["carol"]
    assert await search_texts(stub, ALICE, "salary bands") == ["salary bands for engineers"]
    assert list((await stub.CheckDocumentAccess(access, metadata=ALICE.metadata())).readable_ids) == [doc_id]
    got = await stub.ListChunks(retriever_pb2.ListChunksRequest(document_id=doc_id), metadata=CAROL.metadata())
    assert [c.text for c in got.chunks] == ["salary bands for engineers"]
    # an explicitly empty ACL: the owner only
    await stub.UpdateDocument(
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id, acl=common_pb2.Acl()), metadata=BOB.metadata()
    )
    assert await search_texts(stub, ALICE, "salary bands") == []
    assert not (await stub.CheckDocumentAccess(access, metadata=ALICE.metadata())).readable_ids
    assert (
        await rpc_error(stub.ListChunks(retriever_pb2.ListChunksRequest(document_id=doc_id), metadata=CAROL.metadata()))
    ).code() == grpc.StatusCode.NOT_FOUND
    assert await search_texts(stub, BOB, "salary bands") == ["salary bands for engineers"]


async def test_update_is_for_the_owner_and_validated(stub: Stub) -> None:
    doc_id = await ready_document(stub, BOB, "handbook", ["vacation policy"], acl=common_pb2.Acl(departments=["eng"]))
    title = retriever_pb2.UpdateDocumentRequest(document_id=doc_id, title="Handbook 2025")
    assert (
        await rpc_error(stub.UpdateDocument(title, metadata=ALICE.metadata()))
    ).code() == grpc.StatusCode.PERMISSION_DENIED  # a reader
    assert (
        await rpc_error(stub.UpdateDocument(title, metadata=CAROL.metadata()))
    ).code() == grpc.StatusCode.NOT_FOUND  # cannot read it
    bad = [
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id),  # nothing to update
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id, title="   "),
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id, acl=common_pb2.Acl(departments=[""])),
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id, acl=common_pb2.Acl(roles=[" admin"])),
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id, acl=common_pb2.Acl(users=["x" * 201])),
        retriever_pb2.UpdateDocumentRequest(document_id="not-a-uuid", title="x"),
    ]
    for request in bad:
        error = await rpc_error(stub.UpdateDocument(request, metadata=BOB.metadata()))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details(), request
    doc = (await stub.UpdateDocument(title, metadata=BOB.metadata())).document
    assert doc.title == "Handbook 2025" and list(doc.acl.departments) == ["eng"]


async def test_audit_records_who_changed_what(stub: Stub) -> None:
    doc_id = await ready_document(stub, BOB, "policy", ["travel policy"], acl=common_pb2.Acl(departments=["eng"]))
    await stub.UpdateDocument(
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id, title="Travel policy", acl=common_pb2.Acl(public=True)),
        metadata=BOB.metadata(),
    )
    await stub.UpdateDocument(
        retriever_pb2.UpdateDocumentRequest(document_id=doc_id, title="Travel policy"), metadata=BOB.metadata()
    )  # no change: no entry
    request = retriever_pb2.ListDocumentAuditRequest(document_id=doc_id)
    entries = list((await stub.ListDocumentAudit(request, metadata=BOB.metadata())).entries)
    assert [(e.action, e.actor) for e in entries] == [("create", "bob"), ("update", "bob")]
    assert json.loads(entries[1].before_json) == {
        "title": "policy",
        "acl": {"public": False, "departments": ["eng"], "roles": [], "users": []},
    }
    assert json.loads(entries[1].after_json) == {
        "title": "Travel policy",
        "acl": {"public": True, "departments": [], "roles": [], "users": []},
    }
    assert entries[0].time.ToDatetime() <= entries[1].time.ToDatetime()
    # readers may not read the trail (the document is public now); admins may
    assert (
        await rpc_error(stub.ListDocumentAudit(request, metadata=ALICE.metadata()))
    ).code() == grpc.StatusCode.PERMISSION_DENIED
    assert len((await stub.ListDocumentAudit(request, metadata=ADMIN.metadata())).entries) == 2
    # paging, and the trail outlives the document
    first = await stub.ListDocumentAudit(
        retriever_pb2.ListDocumentAuditRequest(document_id=doc_id, limit=1), metadata=BOB.metadata()
    )
    second = await stub.ListDocumentAudit(
        retriever_pb2.ListDocumentAuditRequest(document_id=doc_id, limit=1, cursor=first.next_cursor),
        metadata=BOB.metadata(),
    )
    assert [e.action for e in [*first.entries, *second.entries]] == ["create", "update"]
    await stub.DeleteDocument(retriever_pb2.DeleteDocumentRequest(document_id=doc_id), metadata=BOB.metadata())
    after = (await stub.ListDocumentAudit(request, metadata=BOB.metadata())).entries
    assert [e.action for e in after] == ["create", "update", "delete"]
    other = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(filename="c.md"), metadata=CAROL.metadata()
    )
    assert (
        await rpc_error(
            stub.ListDocumentAudit(
                retriever_pb2.ListDocumentAuditRequest(document_id=other.document_id), metadata=ALICE.metadata()
            )
        )
    ).code() == grpc.StatusCode.NOT_FOUND


async def test_audit_rows_are_append_only_and_private_in_postgres(stub: Stub, app_dsn: str) -> None:
    doc_id = await ready_document(stub, BOB, "memo", ["memo text"])
    with psycopg.connect(app_dsn) as conn:

        def as_user(user: UserContext) -> None:
            key = os.environ["RETRIEVER_RLS_KEY"]
            conn.execute(SET_IDENTITY, assertion(key, user.user_id, user.department, user.roles, conn.info.backend_pid))

        as_user(ALICE)
        assert conn.execute("SELECT count(*) FROM document_audit").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no forged entries in another owner's name
            conn.execute(
                "INSERT INTO document_audit (document_id, owner_user, actor, action) "
                "VALUES (%s, 'bob', 'bob', 'update')",
                (doc_id,),
            )
        conn.rollback()
        as_user(BOB)
        assert conn.execute("SELECT count(*) FROM document_audit WHERE document_id = %s", (doc_id,)).fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no grant to rewrite history
            conn.execute("DELETE FROM document_audit")
        conn.rollback()
        as_user(BOB)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the problem view checks the role itself
            conn.execute("SELECT * FROM rag_problem_documents(1, 10)")


async def test_list_chunks_pages_for_readers_only(stub: Stub) -> None:
    doc = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(title="guide", filename="guide.md"), metadata=ALICE.metadata()
    )
    doc_id = doc.document_id
    chunks = [
        common_pb2.Chunk(
            chunk_id=f"{doc_id}:s",
            document_id=doc_id,
            level=common_pb2.CHUNK_LEVEL_SECTION,
            ordinal=0,
            text="Setup",
            section_path=["Setup"],
        )
    ]
    chunks += [
        common_pb2.Chunk(
            chunk_id=f"{doc_id}:p{i}",
            document_id=doc_id,
            level=PARAGRAPH,
            parent_id=f"{doc_id}:s",
            ordinal=i + 1,
            page=i + 1,
            section_path=["Setup"],
            text=f"step {i} install the agent",
            kind=common_pb2.CHUNK_KIND_PARAGRAPH,
        )
        for i in range(5)
    ]
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(document_id=doc_id, chunks=chunks), metadata=ALICE.metadata()
    )  # listed before the document is ready, to its readers
    pages, cursor = [], ""
    while True:
        reply = await stub.ListChunks(
            retriever_pb2.ListChunksRequest(document_id=doc_id, limit=2, cursor=cursor), metadata=ALICE.metadata()
        )
        pages.append(list(reply.chunks))
        cursor = reply.next_cursor
        if not cursor:
            break
    listed = [c for page in pages for c in page]
    assert [len(p) for p in pages] == [2, 2, 2]
    assert [c.chunk_id for c in listed] == [f"{doc_id}:s"] + [f"{doc_id}:p{i}" for i in range(5)]
    first = listed[1]
    assert (
        first.level,
        list(first.section_path),
        first.page,
        first.text,
        first.token_count,
        first.parent_id,
        first.kind,
    ) == (PARAGRAPH, ["Setup"], 1, "step 0 install the agent", 7, f"{doc_id}:s", common_pb2.CHUNK_KIND_PARAGRAPH)
    only = await stub.ListChunks(
        retriever_pb2.ListChunksRequest(document_id=doc_id, level=PARAGRAPH, limit=100), metadata=ALICE.metadata()
    )
    assert len(only.chunks) == 5 and not only.next_cursor
    # a colleague of the department reads it; another department does not
    assert (
        len(
            (
                await stub.ListChunks(
                    retriever_pb2.ListChunksRequest(document_id=doc_id),
                    metadata=local_user("erin", "eng").metadata(),
                )
            ).chunks
        )
        == 6
    )
    assert (
        await rpc_error(stub.ListChunks(retriever_pb2.ListChunksRequest(document_id=doc_id), metadata=BOB.metadata()))
    ).code() == grpc.StatusCode.NOT_FOUND
    for bad in (
        retriever_pb2.ListChunksRequest(document_id=doc_id, cursor="!!"),
        retriever_pb2.ListChunksRequest(document_id=doc_id, level=9),
        retriever_pb2.ListChunksRequest(document_id=doc_id, limit=-1),
    ):
        assert (
            await rpc_error(stub.ListChunks(bad, metadata=ALICE.metadata()))
        ).code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_list_documents_filters_and_cursor(stub: Stub) -> None:
    made = []
    for filename, mime in [
        ("a.pdf", "application/pdf"),
        ("b.md", "text/markdown"),
        ("c.PDF", "application/pdf"),
        ("d.txt", "text/plain"),
        ("e.html", "text/html"),
    ]:
        doc = await create_document(
            stub, retriever_pb2.CreateOrGetDocumentRequest(filename=filename, mime_type=mime), metadata=ALICE.metadata()
        )
        made.append(doc.document_id)
    bobs = await create_document(
        stub,
        retriever_pb2.CreateOrGetDocumentRequest(filename="f.pdf", acl=common_pb2.Acl(departments=["eng"])),
        metadata=BOB.metadata(),
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(document_id=made[1], status=READY, parser_version=3),
        metadata=ALICE.metadata(),
    )

    async def listed(**fields: object) -> retriever_pb2.ListDocumentsResponse:
        return await stub.ListDocuments(retriever_pb2.ListDocumentsRequest(**fields), metadata=ALICE.metadata())

    everything = await listed()
    assert everything.total == 6 and not everything.next_cursor
    order = [d.document_id for d in everything.documents]
    assert order[0] == made[1]  # the last changed first
    assert [(d.updated_at.ToDatetime(), d.document_id) for d in everything.documents] == sorted(
        [(d.updated_at.ToDatetime(), d.document_id) for d in everything.documents], reverse=True
    )
    pages, cursor = [], ""
    while True:
        reply = await listed(limit=2, cursor=cursor)
        assert reply.total == 6
        pages.append([d.document_id for d in reply.documents])
        cursor = reply.next_cursor
        if not cursor:
            break
    assert [d for p in pages for d in p] == order and len(pages) == 3
    assert [d.document_id for d in (await listed(limit=2, offset=2)).documents] == order[2:4]  # offset still works
    assert {d.document_id for d in (await listed(statuses=[READY])).documents} == {made[1]}
    assert {d.document_id for d in (await listed(owner_user="bob")).documents} == {bobs.document_id}
    assert {d.document_id for d in (await listed(extension="pdf")).documents} == {made[0], made[2], bobs.document_id}
    assert {d.document_id for d in (await listed(mime_type="text/")).documents} == {made[1], made[3], made[4]}
    assert {d.document_id for d in (await listed(mime_type="text/plain")).documents} == {made[3]}
    # parsed by an older reading than 3 (unparsed ones count as 0), or than 4
    stale = await listed(parsed_before=3)
    assert made[1] not in {d.document_id for d in stale.documents} and stale.total == 5
    assert (await listed(parsed_before=4)).total == 6 and (await listed(parsed_before=1)).total == 5
    recent = await listed(updated_since=everything.documents[1].updated_at)
    assert [d.document_id for d in recent.documents] == order[:2] and recent.total == 2
    filtered = await listed(statuses=[common_pb2.DOCUMENT_STATUS_QUEUED], extension="pdf", limit=1)
    assert filtered.total == 3 and filtered.next_cursor
    following = await listed(
        statuses=[common_pb2.DOCUMENT_STATUS_QUEUED], extension="pdf", limit=5, cursor=filtered.next_cursor
    )
    assert len(following.documents) == 2 and not following.next_cursor
    for bad in (
        {"cursor": "x", "offset": 1},
        {"cursor": "bm90LWpzb24"},
        {"extension": "p.df"},
        {"statuses": [42]},
        {"limit": -1},
        {"parsed_before": -1},
    ):
        error = await rpc_error(listed(**bad))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details(), bad


async def test_problem_documents_are_for_admins(stub: Stub, app_dsn: str, postgres) -> None:
    failed = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(filename="broken.pptx"), metadata=BOB.metadata()
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=failed.document_id, status=common_pb2.DOCUMENT_STATUS_FAILED, error="no extractable text"
        ),
        metadata=BOB.metadata(),
    )
    stuck = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(filename="slow.pdf"), metadata=CAROL.metadata()
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(
            document_id=stuck.document_id, status=common_pb2.DOCUMENT_STATUS_EMBEDDING
        ),
        metadata=CAROL.metadata(),
    )
    fresh = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(filename="new.pdf"), metadata=CAROL.metadata()
    )
    healthy = await ready_document(stub, CAROL, "fine", ["fine text"])
    # an ingestion that last moved an hour ago (the owner backdates it: no waiting in the test)
    with psycopg.connect(owner_dsn_of(postgres, app_dsn.rsplit("/", 1)[1])) as conn:
        conn.execute(
            "UPDATE documents SET updated_at = now() - interval '1 hour' WHERE id = ANY(%s)",
            ([stuck.document_id, healthy],),
        )
    request = retriever_pb2.ListProblemDocumentsRequest()
    for user in (BOB, CAROL):
        assert (
            await rpc_error(stub.ListProblemDocuments(request, metadata=user.metadata()))
        ).code() == grpc.StatusCode.PERMISSION_DENIED
    reply = await stub.ListProblemDocuments(request, metadata=ADMIN.metadata())
    problems = {p.document.document_id: p for p in reply.documents}
    assert set(problems) == {failed.document_id, stuck.document_id}  # not the fresh one, not the ready one
    assert [p.document.document_id for p in reply.documents] == [stuck.document_id, failed.document_id]
    assert (problems[failed.document_id].problem, problems[failed.document_id].reason) == (
        "failed",
        "no extractable text",
    )
    assert problems[stuck.document_id].problem == "stuck" and "embedding for" in problems[stuck.document_id].reason
    assert problems[stuck.document_id].idle_seconds >= 3600
    # a longer threshold: the hour-old ingestion is not stuck yet
    longer = await stub.ListProblemDocuments(
        retriever_pb2.ListProblemDocumentsRequest(stuck_after_seconds=7200), metadata=ADMIN.metadata()
    )
    assert {p.document.document_id for p in longer.documents} == {failed.document_id}
    # the view widens nothing else: the admin still cannot read those documents
    assert (
        await rpc_error(
            stub.GetDocument(
                retriever_pb2.GetDocumentRequest(document_id=failed.document_id), metadata=ADMIN.metadata()
            )
        )
    ).code() == grpc.StatusCode.NOT_FOUND
    assert fresh.document_id not in problems


async def test_ocr_confidence_of_a_chunk_is_stored(stub: Stub, app_dsn: str, postgres) -> None:
    doc = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(title="scan", filename="scan.png"), metadata=ALICE.metadata()
    )
    chunks = chunks_of(doc.document_id, "v1", ["read from a scan", "typed text"])
    chunks[0].ocr_confidence = 0.75
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(document_id=doc.document_id, chunks=chunks), metadata=ALICE.metadata()
    )
    database = app_dsn.rsplit("/", 1)[1]
    with psycopg.connect(owner_dsn_of(postgres, database), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT text, ocr_confidence FROM chunks WHERE document_id = %s ORDER BY ordinal", (doc.document_id,)
        ).fetchall()
    assert rows == [("read from a scan", 0.75), ("typed text", None)]
