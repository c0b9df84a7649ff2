"""Applies the ragmesh schema as the database owner and creates the roles the services use.

The schema is the retriever's tables (sql/schema.sql, beside this module) and then the span table that every
service's telemetry exporter writes (ragmesh_common/sql/traces.sql, beside the exporter).

Roles (none superuser, none BYPASSRLS, so row-level security applies to every query they make):
- the application role (`--app-role`): the retriever and the gateway's traces reads; it reaches an RLS
  identity only through `rag_set_identity` with an assertion signed with the RLS key;
- the traces role (`--traces-role`): INSERT on `rag_traces` and nothing else (RAG_TRACES_DSN);
- the retention role (`--retention-role`): may only execute `rag_traces_prune`, whose floor
  (`--traces-floor-hours`, `--traces-floor-rows`) only this migration sets;
- the connectors role (`--connectors-role`): the connector tables (ragmesh_common/sql/connectors.sql) and
  nothing else (CONNECTORS_DSN of the gateway's admin API and the ingestion worker).
A role given no password is created without LOGIN (its grants exist; nothing can connect as it).

The services never run this. Secrets come from the environment so they never show in the process list:

    RAGMESH_OWNER_DSN=postgresql://postgres@127.0.0.1:5432/ragmesh RAGMESH_APP_PASSWORD=... \
    RAGMESH_RLS_KEY=... RAGMESH_TRACES_PASSWORD=... RAGMESH_RETENTION_PASSWORD=... \
        python -m ragmesh_retriever.migrate --app-role ragmesh_app --dim 384
"""

from __future__ import annotations

import argparse
import logging
import os
from importlib.resources import files

import psycopg
from psycopg import sql

from ragmesh_common.rls import check_key

logger = logging.getLogger(__name__)

TRACES_ROLE = "ragmesh_traces"
RETENTION_ROLE = "ragmesh_retention"
CONNECTORS_ROLE = "ragmesh_connectors"
# Whatever the retention role asks, spans younger than a day and the newest 10,000 stay.
TRACES_FLOOR_HOURS = 24.0
TRACES_FLOOR_ROWS = 10_000


def _role(conn: psycopg.Connection[tuple[object, ...]], name: str, password: str | None) -> None:
    """Creates or updates a role without superuser, BYPASSRLS, CREATEROLE or CREATEDB; LOGIN only with a password."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
    if exists and password is None:
        return
    login = sql.SQL("LOGIN PASSWORD {}").format(sql.Literal(password)) if password is not None else sql.SQL("NOLOGIN")
    conn.execute(
        sql.SQL("{} ROLE {} NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB {}").format(
            sql.SQL("ALTER" if exists else "CREATE"), sql.Identifier(name), login
        )
    )


def apply_schema(
    owner_dsn: str,
    app_role: str,
    app_password: str,
    dim: int,
    *,
    rls_key: str,
    traces_role: str = TRACES_ROLE,
    traces_password: str | None = None,
    retention_role: str = RETENTION_ROLE,
    retention_password: str | None = None,
    traces_floor_hours: float = TRACES_FLOOR_HOURS,
    traces_floor_rows: int = TRACES_FLOOR_ROWS,
    connectors_role: str = CONNECTORS_ROLE,
    connectors_password: str | None = None,
) -> None:
    if dim <= 0 or dim > 16000:
        raise ValueError(f"embedding dimension must be in 1..16000, got {dim}")
    if traces_floor_hours < 0 or traces_floor_rows < 0:
        raise ValueError("the trace retention floor must not be negative")
    check_key(rls_key, "the RLS key (RAGMESH_RLS_KEY)")
    parts = [
        files("ragmesh_retriever").joinpath("sql/schema.sql").read_text(),
        files("ragmesh_common").joinpath("sql/traces.sql").read_text(),
        files("ragmesh_common").joinpath("sql/connectors.sql").read_text(),
    ]
    with psycopg.connect(owner_dsn, autocommit=True, connect_timeout=10) as conn:
        _role(conn, app_role, app_password)
        _role(conn, traces_role, traces_password)
        _role(conn, retention_role, retention_password)
        _role(conn, connectors_role, connectors_password)
        current = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('chunks') AND attname = 'embedding'"
        ).fetchone()
        if current is not None and current[0] not in (-1, dim):
            raise ValueError(
                f"chunks.embedding has dimension {current[0]} but the embedder gives {dim}: "
                "re-index into a fresh database (make clean-data) or set RETRIEVER_EMBEDDING_DIM to match"
            )
        # The SECURITY DEFINER functions keep this search_path (SET search_path FROM CURRENT): the session's
        # temporary schema last, so a caller's temporary table can never stand in for one of the schema's.
        conn.execute("SELECT set_config('search_path', current_setting('search_path') || ', pg_temp', false)")
        names = {
            "app_role": sql.Identifier(app_role).as_string(conn),
            "traces_role": sql.Identifier(traces_role).as_string(conn),
            "retention_role": sql.Identifier(retention_role).as_string(conn),
            "connectors_role": sql.Identifier(connectors_role).as_string(conn),
            "dim": int(dim),
            "traces_floor_seconds": float(traces_floor_hours) * 3600,
            "traces_floor_rows": int(traces_floor_rows),
        }
        with conn.transaction():
            for part in parts:
                conn.execute(part.format(**names))
            conn.execute(
                "INSERT INTO rag_identity_key (id, inner_pad, outer_pad) "
                "VALUES (true, rag_hmac_pad(convert_to(%(key)s, 'UTF8'), 54), rag_hmac_pad(convert_to(%(key)s, 'UTF8'), 92)) "
                "ON CONFLICT (id) DO UPDATE SET inner_pad = excluded.inner_pad, outer_pad = excluded.outer_pad",
                {"key": rls_key},
            )
    logger.info("schema applied (roles %s, %s, %s; dim %d)", app_role, traces_role, retention_role, dim)


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # secrets may come from the environment so they never show in the process list
    parser.add_argument("--owner-dsn", default=os.environ.get("RAGMESH_OWNER_DSN"))
    parser.add_argument("--app-role", default=os.environ.get("RAGMESH_APP_ROLE", "ragmesh_app"))
    parser.add_argument("--app-password", default=os.environ.get("RAGMESH_APP_PASSWORD"))
    parser.add_argument("--dim", type=int, default=int(os.environ.get("RETRIEVER_EMBEDDING_DIM", "384")))
    parser.add_argument("--rls-key", default=os.environ.get("RAGMESH_RLS_KEY"))
    parser.add_argument("--traces-role", default=os.environ.get("RAGMESH_TRACES_ROLE", TRACES_ROLE))
    parser.add_argument("--traces-password", default=os.environ.get("RAGMESH_TRACES_PASSWORD"))
    parser.add_argument("--retention-role", default=os.environ.get("RAGMESH_RETENTION_ROLE", RETENTION_ROLE))
    parser.add_argument("--retention-password", default=os.environ.get("RAGMESH_RETENTION_PASSWORD"))
    parser.add_argument("--connectors-role", default=os.environ.get("RAGMESH_CONNECTORS_ROLE", CONNECTORS_ROLE))
    parser.add_argument("--connectors-password", default=os.environ.get("RAGMESH_CONNECTORS_PASSWORD"))
    parser.add_argument("--traces-floor-hours", type=float, default=TRACES_FLOOR_HOURS)
    parser.add_argument("--traces-floor-rows", type=int, default=TRACES_FLOOR_ROWS)
    args = parser.parse_args()
    if not args.owner_dsn or not args.app_password or not args.rls_key:
        parser.error(
            "--owner-dsn/RAGMESH_OWNER_DSN, --app-password/RAGMESH_APP_PASSWORD and --rls-key/RAGMESH_RLS_KEY "
            "(the retriever's RETRIEVER_RLS_KEY) are required"
        )
    apply_schema(
        args.owner_dsn,
        args.app_role,
        args.app_password,
        args.dim,
        rls_key=args.rls_key,
        traces_role=args.traces_role,
        traces_password=args.traces_password,
        retention_role=args.retention_role,
        retention_password=args.retention_password,
        traces_floor_hours=args.traces_floor_hours,
        traces_floor_rows=args.traces_floor_rows,
        connectors_role=args.connectors_role,
        connectors_password=args.connectors_password,
    )


if __name__ == "__main__":
    main()
