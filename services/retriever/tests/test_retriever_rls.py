"""Row-level security, checked directly in PostgreSQL as the application role."""
from __future__ import annotations

import psycopg
import pytest

from ragmesh_retriever.catalog import Database


def _as(conn: psycopg.Connection, user: str, department: str, roles: str = "") -> None:
    conn.execute("SELECT set_config('rag.user_id', %s, true), set_config('rag.department', %s, true), "
                 "set_config('rag.roles', %s, true)", (user, department, roles))


def _insert(conn: psycopg.Connection, title: str, owner: str, department: str, **acl: object) -> str:
    _as(conn, owner, department)
    row = conn.execute(
        "INSERT INTO documents (title, filename, owner_user, owner_department, acl_departments, acl_users, "
        "acl_roles, acl_public) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (title, f"{title}.md", owner, department, acl.get("departments", [department]), acl.get("users", []),
         acl.get("roles", []), acl.get("public", False)),
    ).fetchone()
    assert row is not None
    conn.execute("INSERT INTO chunks (id, document_id, level, ordinal, text, tsv, doc_len) "
                 "VALUES (%s, %s, 3, 0, %s, to_tsvector('english', %s), 3)", (f"{row[0]}:0", row[0], title, title))
    return str(row[0])


def test_app_role_sees_only_its_departments_rows(postgres) -> None:  # type: ignore[no-untyped-def]
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


def test_superuser_bypasses_rls_and_the_services_refuse_it(postgres) -> None:  # type: ignore[no-untyped-def]
    with psycopg.connect(postgres.owner_dsn) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (True,)
        # without any user context the superuser still sees every row: RLS does not bind it
        assert conn.execute("SELECT count(*) FROM documents WHERE title LIKE 'rls-%'").fetchone()[0] >= 4


async def test_service_database_refuses_a_superuser_dsn(postgres) -> None:  # type: ignore[no-untyped-def]
    db = Database(postgres.owner_dsn)
    with pytest.raises(RuntimeError, match="SUPERUSER"):
        await db.open()
    await db.close()
