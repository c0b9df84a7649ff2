"""Applies the ragmesh schema as the database owner and creates the application role.

The schema is the retriever's tables (sql/schema.sql, beside this module) and then the span table that every
service's telemetry exporter writes (ragmesh_common/sql/traces.sql, beside the exporter).

The services never run this: they connect as the application role, which is neither
superuser nor BYPASSRLS, so row-level security applies to every query they make.

    python -m ragmesh_retriever.migrate --owner-dsn postgresql://postgres@127.0.0.1:5432/ragmesh \
        --app-role ragmesh_app --app-password secret --dim 384
"""

from __future__ import annotations

import argparse
import logging
import os
from importlib.resources import files

import psycopg
from psycopg import sql

logger = logging.getLogger(__name__)


def apply_schema(owner_dsn: str, app_role: str, app_password: str, dim: int) -> None:
    if dim <= 0 or dim > 16000:
        raise ValueError(f"embedding dimension must be in 1..16000, got {dim}")
    parts = [
        files("ragmesh_retriever").joinpath("sql/schema.sql").read_text(),
        files("ragmesh_common").joinpath("sql/traces.sql").read_text(),
    ]
    with psycopg.connect(owner_dsn, autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (app_role,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(
            sql.SQL("{} ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB PASSWORD {}").format(
                sql.SQL(verb), sql.Identifier(app_role), sql.Literal(app_password)
            )
        )
        current = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('chunks') AND attname = 'embedding'"
        ).fetchone()
        if current is not None and current[0] not in (-1, dim):
            raise ValueError(
                f"chunks.embedding has dimension {current[0]} but the embedder gives {dim}: "
                "re-index into a fresh database (make clean-data) or set RETRIEVER_EMBEDDING_DIM to match"
            )
        role = sql.Identifier(app_role).as_string(conn)
        with conn.transaction():
            for part in parts:
                conn.execute(part.format(app_role=role, dim=int(dim)))
    logger.info("schema applied (role %s, dim %d)", app_role, dim)


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # secrets may come from the environment so they never show in the process list
    parser.add_argument("--owner-dsn", default=os.environ.get("RAGMESH_OWNER_DSN"))
    parser.add_argument("--app-role", default=os.environ.get("RAGMESH_APP_ROLE", "ragmesh_app"))
    parser.add_argument("--app-password", default=os.environ.get("RAGMESH_APP_PASSWORD"))
    parser.add_argument("--dim", type=int, default=int(os.environ.get("RETRIEVER_EMBEDDING_DIM", "384")))
    args = parser.parse_args()
    if not args.owner_dsn or not args.app_password:
        parser.error("--owner-dsn/RAGMESH_OWNER_DSN and --app-password/RAGMESH_APP_PASSWORD are required")
    apply_schema(args.owner_dsn, args.app_role, args.app_password, args.dim)


if __name__ == "__main__":
    main()
