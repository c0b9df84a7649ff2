"""The attack of issue #30 through its own path: someone holding the application DSN (or a SQL injection in a
service) connects as the application role and tries to become another user, an admin, or to erase the audit
trail. Row-level security reads only an identity `rag_set_identity` verified; every attempt reads nothing or
is refused."""

from __future__ import annotations

import hashlib
import hmac
import time

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ragmesh_common.rls import SET_IDENTITY, assertion


def _as(conn: psycopg.Connection, key: str, user: str, department: str = "", roles: tuple[str, ...] = ()) -> None:
    conn.execute(SET_IDENTITY, assertion(key, user, department, roles, conn.info.backend_pid))


@pytest.fixture(scope="module")
def victim(postgres) -> dict[str, str]:
    """A private document with a chunk and an audit row, owned by `rls-victim` of department `vault`."""
    with psycopg.connect(postgres.app_dsn) as conn:
        _as(conn, postgres.rls_key, "rls-victim", "vault")
        row = conn.execute(
            "INSERT INTO documents (title, filename, owner_user, owner_department, acl_departments) "
            "VALUES ('victim-secret', 'secret.md', 'rls-victim', 'vault', '{vault}') RETURNING id"
        ).fetchone()
        assert row is not None
        doc_id = str(row[0])
        conn.execute(
            "INSERT INTO chunks (id, document_id, level, ordinal, text, tsv, doc_len) "
            "VALUES (%s, %s, 3, 0, 'the vault combination', to_tsvector('english', 'the vault combination'), 3)",
            (f"{doc_id}:0", doc_id),
        )
        conn.execute(
            "INSERT INTO document_audit (document_id, owner_user, actor, action) "
            "VALUES (%s, 'rls-victim', 'rls-victim', 'create')",
            (doc_id,),
        )
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO rag_traces (trace_id, span_id, name, service, kind, start_time) "
            "VALUES ('victim-trace', 's', 'chat', 'gateway', 'server', now())"
        )
    return {"document_id": doc_id}


_READS = {
    "documents": "SELECT count(*) FROM documents",
    "chunks": "SELECT count(*) FROM chunks",
    "postings": "SELECT count(*) FROM postings",
    "lex_doc_stats": "SELECT count(*) FROM lex_doc_stats",
    "document_audit": "SELECT count(*) FROM document_audit",
    "rag_traces": "SELECT count(*) FROM rag_traces",
}


def test_a_loop_over_user_names_with_session_variables_reads_nothing(postgres, victim) -> None:
    with psycopg.connect(postgres.owner_dsn) as conn:
        owners = [r[0] for r in conn.execute("SELECT DISTINCT owner_user FROM documents")]
        departments = [r[0] for r in conn.execute("SELECT DISTINCT owner_department FROM documents")]
    assert "rls-victim" in owners
    with psycopg.connect(postgres.app_dsn, autocommit=True) as conn:
        role = conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()
        assert role == (False, False)
        for user in [*owners, "admin", "root"]:
            for department in departments[:5]:
                with conn.transaction():
                    conn.execute(
                        "SELECT set_config('rag.user_id', %s, true), set_config('rag.department', %s, true), "
                        "set_config('rag.roles', 'admin,employee', true)",
                        (user, department),
                    )
                    counts = {name: conn.execute(sql).fetchone()[0] for name, sql in _READS.items()}
                assert counts == dict.fromkeys(_READS, 0), (user, department)
        with conn.transaction():  # session-level, not transaction-local: the same
            conn.execute("SET rag.user_id = 'rls-victim'")
            conn.execute("SET rag.roles = 'admin'")
            assert conn.execute(_READS["documents"]).fetchone() == (0,)
            assert conn.execute(_READS["rag_traces"]).fetchone() == (0,)
    with psycopg.connect(postgres.app_dsn) as conn:  # the real identity does read it (the test can fail)
        _as(conn, postgres.rls_key, "rls-victim", "vault")
        assert conn.execute("SELECT title FROM documents WHERE id = %s", (victim["document_id"],)).fetchone() == (
            "victim-secret",
        )


def test_only_a_valid_fresh_assertion_for_this_connection_is_accepted(postgres) -> None:
    key = postgres.rls_key
    with psycopg.connect(postgres.app_dsn) as conn:
        pid = conn.info.backend_pid
        refused = {
            "wrong key": assertion("x" * 64, "rls-victim", "vault", (), pid),
            "expired": assertion(key, "rls-victim", "vault", (), pid, now=time.time() - 120),
            "too long": assertion(key, "rls-victim", "vault", (), pid, ttl=3600),
            "another connection's": assertion(key, "rls-victim", "vault", (), pid + 1),
        }
        user, department, roles, expires, mac = assertion(key, "rls-victim", "vault", (), pid)
        refused["another user"] = ("rls-other", department, roles, expires, mac)
        refused["another role"] = (user, department, ["admin"], expires, mac)
        refused["a later expiry"] = (user, department, roles, expires + 30, mac)
        for why, params in refused.items():
            try:
                conn.execute(SET_IDENTITY, params)
            except psycopg.errors.InsufficientPrivilege as exc:
                assert "identity assertion refused" in str(exc), why
            else:
                pytest.fail(f"an assertion with {why} was accepted")
            conn.rollback()
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute(SET_IDENTITY, assertion(key, "rls\x1fvictim", "vault", (), pid))
        conn.rollback()


def test_the_recorded_identity_cannot_be_forged_or_carried_over(postgres, victim) -> None:
    with psycopg.connect(postgres.app_dsn) as conn:
        _as(conn, postgres.rls_key, "rls-victim", "vault")
        recorded = conn.execute("SELECT current_setting('rag.identity')").fetchone()[0]
        conn.commit()
        # the value a verified transaction held, replayed in the next one: refused
        conn.execute("SELECT set_config('rag.identity', %s, true)", (recorded,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="rag_set_identity"):
            conn.execute(_READS["documents"])
        conn.rollback()
        # made up, with the attacker's own key in a temporary table that shadows the real one
        conn.execute("CREATE TEMP TABLE rag_identity_key (id boolean PRIMARY KEY, inner_pad bytea, outer_pad bytea)")
        conn.execute(
            "INSERT INTO pg_temp.rag_identity_key VALUES (true, rag_hmac_pad('evil', 54), rag_hmac_pad('evil', 92))"
        )
        started = conn.execute("SELECT extract(epoch FROM transaction_timestamp())::text").fetchone()[0]
        payload = "\x1f".join(("rls-victim", "vault", "admin"))
        tag = hmac.new(b"evil", f"ragmesh-rls-session\x1f{started}\x1f{payload}".encode(), hashlib.sha256).hexdigest()
        conn.execute("SELECT set_config('rag.identity', %s, true)", (f"{payload}\x1f{tag}",))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="rag_set_identity"):
            conn.execute(_READS["documents"])
        conn.rollback()


def test_the_key_and_its_mac_are_the_schema_owners(postgres) -> None:
    with psycopg.connect(postgres.app_dsn) as conn:
        for statement in (
            "SELECT * FROM rag_identity_key",
            "SELECT rag_identity_mac('anything')",
            "UPDATE rag_identity_key SET inner_pad = ''",
            "SELECT * FROM rag_traces_retention_floor",
            "UPDATE rag_traces_retention_floor SET min_rows = 0",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
            conn.rollback()


def test_the_app_role_cannot_prune_traces_and_retention_keeps_its_floor(postgres, victim) -> None:
    with psycopg.connect(postgres.app_dsn) as conn:
        _as(conn, postgres.rls_key, "root", "ops", ("admin",))
        assert conn.execute("SELECT count(*) FROM rag_traces WHERE trace_id = 'victim-trace'").fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT rag_traces_prune(0.000001, 0, 100000)")
        conn.rollback()
        for statement in ("DELETE FROM rag_traces", "TRUNCATE rag_traces", "UPDATE rag_traces SET name = 'x'"):
            _as(conn, postgres.rls_key, "root", "ops", ("admin",))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
            conn.rollback()
    with psycopg.connect(postgres.traces_dsn) as conn:  # the writers insert, and nothing else
        for statement in (
            "SELECT count(*) FROM rag_traces",
            "DELETE FROM rag_traces",
            "SELECT rag_traces_prune(1, 1, 1)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
            conn.rollback()
    with psycopg.connect(postgres.retention_dsn, autocommit=True) as conn:
        # the tiniest retention the caller can ask for: the floor (this test database's: 6 minutes, 10 rows) holds
        conn.execute("SELECT rag_traces_prune(0.000001, 1, 100000)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM rag_traces")
    with psycopg.connect(postgres.owner_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM rag_traces WHERE trace_id = 'victim-trace'").fetchone() == (1,)


def test_document_audit_is_append_only_for_everyone_but_the_schema_owner(postgres, victim) -> None:
    doc_id = victim["document_id"]
    with psycopg.connect(postgres.app_dsn) as conn:
        for statement in (
            "UPDATE document_audit SET action = 'nothing' WHERE document_id = %s",
            "DELETE FROM document_audit WHERE document_id = %s",
            "TRUNCATE document_audit",
        ):
            _as(conn, postgres.rls_key, "rls-victim", "vault")  # even the document's owner
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement, (doc_id,) if "%s" in statement else None)
            conn.rollback()
    # a role that was given the grants by mistake (or a superuser that is not the owner) meets the trigger
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS rls_intruder")
        conn.execute("CREATE ROLE rls_intruder LOGIN SUPERUSER PASSWORD 'intruder-pw'")
    intruder = make_conninfo(postgres.owner_dsn, user="rls_intruder", password="intruder-pw")
    try:
        with psycopg.connect(intruder) as conn:
            for statement in (
                "UPDATE document_audit SET action = 'nothing' WHERE document_id = %s",
                "DELETE FROM document_audit WHERE document_id = %s",
                "TRUNCATE document_audit",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                    conn.execute(statement, (doc_id,) if "%s" in statement else None)
                conn.rollback()
    finally:
        with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
            conn.execute("DROP ROLE rls_intruder")
    with psycopg.connect(postgres.owner_dsn) as conn:
        assert conn.execute("SELECT action FROM document_audit WHERE document_id = %s", (doc_id,)).fetchall() == [
            ("create",)
        ]


@pytest.mark.parametrize(
    "key, message, expected",
    [  # RFC 4231 test cases 1, 2 and 6 (the last with a key longer than SHA-256's 64-byte block)
        (b"\x0b" * 20, b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (b"Jefe", b"what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (
            b"\xaa" * 131,
            b"Test Using Larger Than Block-Size Key - Hash Key First",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
        ),
    ],
)
def test_the_sql_hmac_is_rfc_2104_hmac_sha256(postgres, key: bytes, message: bytes, expected: str) -> None:
    with psycopg.connect(postgres.owner_dsn) as conn:
        row = conn.execute("SELECT encode(rag_hmac_sha256(%s, %s), 'hex')", (key, message)).fetchone()
    assert row == (expected,)
    assert hmac.new(key, message, hashlib.sha256).hexdigest() == expected  # what the services compute
