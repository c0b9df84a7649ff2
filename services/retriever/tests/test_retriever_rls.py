"""Row-level security, checked directly in PostgreSQL as the application role."""

from __future__ import annotations

import os

import psycopg
import pytest

from ragmesh_common.rls import SET_IDENTITY, assertion
from ragmesh_retriever.session import Database


def _as(conn: psycopg.Connection, user: str, department: str, roles: str = "") -> None:
    """This transaction's identity, as the retriever sets it: an assertion signed with the RLS key."""
    key = os.environ["RETRIEVER_RLS_KEY"]
    conn.execute(
        SET_IDENTITY, assertion(key, user, department, [r for r in roles.split(",") if r], conn.info.backend_pid)
    )


def _insert(conn: psycopg.Connection, title: str, owner: str, department: str, **acl: object) -> str:
    _as(conn, owner, department)
    row = conn.execute(
        "INSERT INTO documents (title, filename, owner_user, owner_department, acl_departments, acl_users, "
        "acl_roles, acl_public) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            title,
            f"{title}.md",
            owner,
            department,
            acl.get("departments", [department]),
            acl.get("users", []),
            acl.get("roles", []),
            acl.get("public", False),
        ),
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO chunks (id, document_id, level, ordinal, text, tsv, doc_len) "
        "VALUES (%s, %s, 3, 0, %s, to_tsvector('english', %s), 3)",
        (f"{row[0]}:0", row[0], title, title),
    )
    return str(row[0])


def test_app_role_sees_only_its_departments_rows(postgres) -> None:
    with psycopg.connect(postgres.app_dsn, autocommit=True) as conn:
        role = conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()
        assert role == (False, False)
        with conn.transaction():
            eng = _insert(conn, "rls-eng-plan", "rls-alice", "eng")
            hr = _insert(conn, "rls-hr-salaries", "rls-bob", "hr")
            shared = _insert(conn, "rls-shared-with-carol", "rls-bob", "hr", users=["rls-carol"])
            public = _insert(conn, "rls-handbook", "rls-bob", "hr", public=True)
        with conn.transaction():
            _as(conn, "rls-alice", "eng")
            docs = {str(r[0]) for r in conn.execute("SELECT id FROM documents WHERE title LIKE 'rls-%'")}
            chunks = {str(r[0]) for r in conn.execute("SELECT document_id FROM chunks WHERE text LIKE 'rls%'")}
        assert docs == {eng, public} and chunks == {eng, public}
        with conn.transaction():
            _as(conn, "rls-carol", "finance")
            docs = {str(r[0]) for r in conn.execute("SELECT id FROM documents WHERE title LIKE 'rls-%'")}
        assert docs == {shared, public}
        with conn.transaction():  # no user context at all: nothing
            assert conn.execute("SELECT count(*) FROM documents").fetchone() == (0,)
        with conn.transaction():  # another department cannot change or delete the rows it cannot see
            _as(conn, "rls-alice", "eng")
            assert conn.execute("DELETE FROM documents WHERE id = %s", (hr,)).rowcount == 0
            assert conn.execute("UPDATE documents SET title = 'x' WHERE id = %s", (hr,)).rowcount == 0
        with conn.transaction():  # and cannot plant a document in someone else's name
            _as(conn, "rls-alice", "eng")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("INSERT INTO documents (title, filename, owner_user) VALUES ('x', 'x', 'rls-bob')")


def test_superuser_bypasses_rls_and_the_services_refuse_it(postgres) -> None:
    with psycopg.connect(postgres.owner_dsn) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (True,)
        # without any user context the superuser still sees every row: RLS does not bind it
        assert conn.execute("SELECT count(*) FROM documents WHERE title LIKE 'rls-%'").fetchone()[0] >= 4


async def test_service_database_refuses_a_superuser_dsn(postgres) -> None:
    db = Database(postgres.owner_dsn, rls_key=postgres.rls_key)
    with pytest.raises(RuntimeError, match="SUPERUSER"):
        await db.open()
    await db.close()


_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")


def test_every_table_the_app_role_may_touch_is_under_forced_rls_with_policies(postgres) -> None:
    """Every table, view or sequence of the schema that the application role may read or write: row-level
    security enabled and forced, and a policy for each command it is granted. Tables it has no grant on
    (the owner's own statistics) are listed too, and must really be closed to it."""
    with psycopg.connect(postgres.owner_dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity, "
            "       array(SELECT p FROM unnest(%s::text[]) p WHERE has_table_privilege(%s, c.oid, p)), "
            "       array(SELECT pol.polcmd::text FROM pg_policy pol WHERE pol.polrelid = c.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') "
            "  AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
            (list(_PRIVILEGES), postgres.app_role),
        ).fetchall()
    tables = {
        name: (kind, rls, forced, set(granted), set(commands)) for name, kind, rls, forced, granted, commands in rows
    }
    # the tables that hold document-derived data are all here
    assert {"documents", "chunks", "postings", "lex_doc_stats", "lex_stats", "rag_traces"} <= set(tables)
    readable = {name for name, (_, _, _, granted, _) in tables.items() if granted}
    assert readable == {
        "documents",
        "chunks",
        "postings",
        "lex_doc_stats",
        "rag_scopes",  # the ACL scopes and their statistics: the readable scopes only (below)
        "lex_scope_stats",
        "lex_scope_terms",
        "rag_scope_documents",
        "rag_traces",
        "document_audit",
        "conversations",
        "conversation_messages",
        "message_feedback",
    }
    command_of = {"SELECT": "r", "INSERT": "a", "UPDATE": "w", "DELETE": "d"}
    for name in readable:
        kind, rls, forced, granted, commands = tables[name]
        assert kind in ("r", "p") and rls and forced, f"{name}: RLS enabled {rls}, forced {forced}"
        for privilege in granted:
            assert commands & {command_of[privilege], "*"}, f"{name}: {privilege} granted without a policy"
    assert not {"lex_terms", "lex_configs"} & set(tables)  # corpus-wide statistics are gone


def test_postings_and_statistics_follow_their_documents(postgres) -> None:
    """The application role reads the postings and length statistics of the documents a user may read, and
    none of any other; it cannot write them at all (the chunk triggers do, as the schema owner)."""
    with psycopg.connect(postgres.app_dsn, autocommit=True) as conn:
        with conn.transaction():
            mine = _insert(conn, "rls-postings-apricot", "rls-dora", "legal")
            theirs = _insert(conn, "rls-postings-walnut", "rls-erin", "finance")
        with conn.transaction():  # a document still being ingested is searched by nobody, its owner included
            _as(conn, "rls-dora", "legal")
            assert conn.execute("SELECT count(*) FROM postings WHERE document_id = %s", (mine,)).fetchone() == (0,)
        for owner, department, doc in (("rls-dora", "legal", mine), ("rls-erin", "finance", theirs)):
            with conn.transaction():
                _as(conn, owner, department)
                conn.execute("UPDATE documents SET status = 'ready' WHERE id = %s", (doc,))
        with conn.transaction():
            _as(conn, "rls-dora", "legal")
            terms = {r[0] for r in conn.execute("SELECT term FROM postings")}
            docs = {str(r[0]) for r in conn.execute("SELECT document_id FROM postings")}
            stats = {str(r[0]) for r in conn.execute("SELECT document_id FROM lex_doc_stats")}
        assert mine in docs and theirs not in docs
        assert {"apricot", "rls-postings-apricot"} <= terms and not {"walnut", "rls-postings-walnut"} & terms
        assert mine in stats and theirs not in stats
        with conn.transaction():  # no user context: nothing
            assert conn.execute("SELECT count(*) FROM postings").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM lex_doc_stats").fetchone() == (0,)
        for statement, params in (
            ("DELETE FROM postings WHERE document_id = %s", (theirs,)),
            ("DELETE FROM postings WHERE document_id = %s", (mine,)),
            ("UPDATE postings SET tf = 100 WHERE document_id = %s", (mine,)),
            (
                "INSERT INTO postings (term, level, chunk_id, document_id, tf, doc_len) "
                "VALUES ('planted', 3, 'x', %s, 1, 1)",
                (theirs,),
            ),
            ("DELETE FROM lex_doc_stats WHERE document_id = %s", (mine,)),
            ("SELECT * FROM lex_stats", None),
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                _as(conn, "rls-dora", "legal")
                conn.execute(statement, params)
        with conn.transaction():  # deleting a chunk one owns removes its postings (the trigger, as the owner)
            _as(conn, "rls-erin", "finance")
            assert conn.execute("DELETE FROM chunks WHERE document_id = %s", (theirs,)).rowcount == 1
            assert conn.execute("SELECT count(*) FROM postings WHERE document_id = %s", (theirs,)).fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM lex_doc_stats WHERE document_id = %s", (theirs,)).fetchone() == (
                0,
            )
