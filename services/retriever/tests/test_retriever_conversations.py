"""Conversations under row-level security, as the application role (FORCE RLS): only the owner reads or
changes a conversation, an admin included; an answer is withdrawn when a document it drew on is deleted or
no longer readable, decided when it is read; feedback is the owner's, and the admin's list has no text."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.context import UserContext
from ragmesh_common.errors import InvalidArgument, NotFound
from ragmesh_retriever.conversations import MAX_COMMENT_CHARS, MAX_TITLE_CHARS, Conversations
from ragmesh_retriever.session import Database

ALICE = UserContext(f"conv-alice-{uuid.uuid4().hex[:6]}", "eng")
BOB = UserContext(f"conv-bob-{uuid.uuid4().hex[:6]}", "eng")
ADMIN = UserContext(f"conv-admin-{uuid.uuid4().hex[:6]}", "eng", ("admin",))


@pytest.fixture
async def store(postgres):  # type: ignore[no-untyped-def]
    db = Database(postgres.app_dsn, rls_key=postgres.rls_key)
    await db.open()
    yield Conversations(db)
    await db.close()


async def _document(db: Database, owner: UserContext, **acl: object) -> str:
    async with db.transaction(owner) as conn:
        row = await (
            await conn.execute(
                "INSERT INTO documents (title, filename, owner_user, owner_department, acl_departments, acl_users, "
                "status) VALUES ('conv-doc', 'conv.md', %s, %s, %s, %s, 'ready') RETURNING id",
                (owner.user_id, owner.department, acl.get("departments", []), acl.get("users", [])),
            )
        ).fetchone()
    assert row is not None
    return str(row[0])


def _turn(conversation_id: str, question: str, answer: str, sources: list[str]) -> retriever_pb2.AppendMessageRequest:
    return retriever_pb2.AppendMessageRequest(
        conversation_id=conversation_id,
        question=question,
        rewritten_question=f"{question} (rewritten)",
        answer=answer,
        short_answer=answer[:10],
        outcome="answer",
        trace_id="ab" * 16,
        details_json=json.dumps({"sources": [{"title": "secret title", "snippet": answer}]}),
        source_document_ids=sources,
    )


async def test_only_the_owner_sees_a_conversation_not_another_user_nor_an_admin(store: Conversations) -> None:
    conv = await store.create(ALICE, "")
    doc = await _document(store.db, ALICE, users=[ALICE.user_id])
    appended = await store.append(
        ALICE, _turn(conv.conversation_id, "What is the plan for Q3 launches?", "Ship", [doc])
    )
    assert appended.conversation.title == "What is the plan for Q3 launches?"  # from the first question
    got = await store.get(ALICE, conv.conversation_id)
    assert [m.answer for m in got.messages] == ["Ship"] and not got.messages[0].withdrawn
    for other in (BOB, ADMIN):
        with pytest.raises(NotFound):
            await store.get(other, conv.conversation_id)
        page, _ = await store.page(other, 100, "")
        assert conv.conversation_id not in {c.conversation_id for c in page}
        with pytest.raises(NotFound):
            await store.rename(other, conv.conversation_id, "mine now")
        with pytest.raises(NotFound):
            await store.delete(other, conv.conversation_id)
        with pytest.raises(NotFound):  # nor plant a turn in it
            await store.append(other, _turn(conv.conversation_id, "q", "a", []))
        with pytest.raises(NotFound):
            await store.feedback(
                other,
                retriever_pb2.SetMessageFeedbackRequest(
                    conversation_id=conv.conversation_id, message_id=appended.message_id, rating="down"
                ),
            )
    # unknown ids: the same answer as foreign ones
    with pytest.raises(NotFound):
        await store.get(ALICE, str(uuid.uuid4()))
    with pytest.raises(InvalidArgument):
        await store.get(ALICE, "not-a-uuid")


async def test_rls_in_sql_hides_rows_of_other_owners_and_refuses_foreign_inserts(
    postgres, store: Conversations
) -> None:
    conv = await store.create(ALICE, "alice's")
    await store.append(ALICE, _turn(conv.conversation_id, "q", "a", []))
    async with store.db.transaction(ADMIN) as conn:
        assert (
            await (
                await conn.execute(
                    "SELECT count(*) FROM conversations WHERE id = %s", (uuid.UUID(conv.conversation_id),)
                )
            ).fetchone()
        ) == (0,)
        assert (
            await (
                await conn.execute("SELECT count(*) FROM conversation_messages WHERE owner_user = %s", (ALICE.user_id,))
            ).fetchone()
        ) == (0,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with store.db.transaction(BOB) as conn:  # a row in Alice's name
            await conn.execute("INSERT INTO conversations (owner_user) VALUES (%s)", (ALICE.user_id,))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with store.db.transaction(BOB) as conn:  # a message of his own into Alice's conversation
            await conn.execute(
                "INSERT INTO conversation_messages (conversation_id, owner_user, question, outcome) "
                "VALUES (%s, %s, 'q', 'answer')",
                (uuid.UUID(conv.conversation_id), BOB.user_id),
            )
    with psycopg.connect(postgres.app_dsn, autocommit=True) as raw:  # no identity at all: nothing
        assert raw.execute("SELECT count(*) FROM conversations").fetchone() == (0,)


async def test_an_answer_is_withdrawn_when_a_source_is_deleted_or_no_longer_readable(store: Conversations) -> None:
    bobs = await _document(store.db, BOB, users=[ALICE.user_id])  # Bob shares it with Alice
    alices = await _document(store.db, ALICE)
    conv = await store.create(ALICE, "")
    first = await store.append(ALICE, _turn(conv.conversation_id, "q1", "from bob's doc", [bobs, alices]))
    second = await store.append(ALICE, _turn(conv.conversation_id, "q2", "from alice's doc", [alices]))
    messages = (await store.get(ALICE, conv.conversation_id)).messages
    assert [m.withdrawn for m in messages] == [False, False]
    async with store.db.transaction(BOB) as conn:  # Bob takes Alice off the ACL
        await conn.execute("UPDATE documents SET acl_users = '{}' WHERE id = %s", (uuid.UUID(bobs),))
    messages = (await store.get(ALICE, conv.conversation_id)).messages
    assert messages[0].message_id == first.message_id and messages[0].withdrawn
    assert messages[0].question == "q1"  # the question is kept
    assert (messages[0].answer, messages[0].short_answer, messages[0].rewritten_question) == ("", "", "")
    assert json.loads(messages[0].details_json) == {} and not messages[0].source_document_ids
    assert messages[1].message_id == second.message_id and not messages[1].withdrawn
    async with store.db.transaction(BOB) as conn:  # shared again: readable again, shown again
        await conn.execute("UPDATE documents SET acl_users = %s WHERE id = %s", ([ALICE.user_id], uuid.UUID(bobs)))
    assert not (await store.get(ALICE, conv.conversation_id)).messages[0].withdrawn
    async with store.db.transaction(ALICE) as conn:  # Alice deletes her own document
        await conn.execute("DELETE FROM documents WHERE id = %s", (uuid.UUID(alices),))
    assert [m.withdrawn for m in (await store.get(ALICE, conv.conversation_id)).messages] == [True, True]


async def test_feedback_is_the_owners_and_the_admin_list_carries_no_text(store: Conversations) -> None:
    conv = await store.create(ALICE, "")
    turn = await store.append(ALICE, _turn(conv.conversation_id, "private question", "private answer", []))
    request = retriever_pb2.SetMessageFeedbackRequest(
        conversation_id=conv.conversation_id, message_id=turn.message_id, rating="down", comment="wrong year"
    )
    stored = await store.feedback(ALICE, request)
    assert (stored.rating, stored.trace_id) == ("down", "ab" * 16)
    rated = await store.rated(ALICE, "down", 100)
    assert [(m.question, m.answer, m.feedback_comment) for m in rated if m.message_id == turn.message_id] == [
        ("private question", "private answer", "wrong year")
    ]
    assert not [m for m in await store.rated(BOB, "down", 100) if m.message_id == turn.message_id]
    listed = [f for f in await store.all_feedback(ADMIN, "down", 1000) if f.message_id == turn.message_id]
    assert [(f.user_id, f.comment, f.trace_id) for f in listed] == [(ALICE.user_id, "wrong year", "ab" * 16)]
    assert "private" not in str(listed[0])
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await store.all_feedback(BOB, "", 10)
    with pytest.raises(InvalidArgument):
        await store.feedback(
            ALICE,
            retriever_pb2.SetMessageFeedbackRequest(
                conversation_id=conv.conversation_id, message_id=turn.message_id, rating="meh"
            ),
        )
    with pytest.raises(InvalidArgument):
        await store.feedback(
            ALICE,
            retriever_pb2.SetMessageFeedbackRequest(
                conversation_id=conv.conversation_id,
                message_id=turn.message_id,
                rating="up",
                comment="x" * (MAX_COMMENT_CHARS + 1),
            ),
        )


async def test_titles_paging_and_delete(store: Conversations) -> None:
    user = UserContext(f"conv-pager-{uuid.uuid4().hex[:6]}", "eng")
    made = [await store.create(user, f"c{i}") for i in range(3)]
    first, cursor = await store.page(user, 2, "")
    assert [c.title for c in first] == ["c2", "c1"] and cursor
    rest, cursor = await store.page(user, 2, cursor)
    assert [c.title for c in rest] == ["c0"] and cursor == ""
    with pytest.raises(InvalidArgument):
        await store.rename(user, made[0].conversation_id, "t" * (MAX_TITLE_CHARS + 1))
    assert (await store.rename(user, made[0].conversation_id, "renamed")).title == "renamed"
    turn = await store.append(user, _turn(made[0].conversation_id, "q", "a", []))
    await store.feedback(
        user,
        retriever_pb2.SetMessageFeedbackRequest(
            conversation_id=made[0].conversation_id, message_id=turn.message_id, rating="up"
        ),
    )
    await store.delete(user, made[0].conversation_id)
    with pytest.raises(NotFound):
        await store.get(user, made[0].conversation_id)
    assert not [m for m in await store.rated(user, "", 100) if m.message_id == turn.message_id]
