"""The database session of the retriever: a connection pool whose transactions run as the request's user.
Each transaction's first statement hands PostgreSQL an identity assertion signed with RETRIEVER_RLS_KEY
(`ragmesh_common.rls`); `rag_set_identity` verifies it, and the row-level-security policies read only that
verified identity."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ragmesh_common.context import UserContext
from ragmesh_common.rls import SET_IDENTITY, assertion, check_key


async def check_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """psycopg_pool's check_connection (an empty query), on a plain cursor: `conn.execute` goes through the
    OpenTelemetry psycopg instrumentation and would store a span per connection checkout."""
    await conn.set_autocommit(True)
    try:
        async with psycopg.AsyncCursor(conn) as cur:
            await cur.execute("")
    finally:
        if not conn.closed:
            await conn.set_autocommit(False)


class Database:
    """An async connection pool whose transactions run as a given user under RLS."""

    def __init__(self, dsn: str, *, rls_key: str, pool_size: int = 8, statement_timeout_ms: int = 10000) -> None:
        self._rls_key = check_key(rls_key, "RETRIEVER_RLS_KEY")
        # Custom plans always: every search binds the caller's accessible document ids as an array, and a
        # cached generic plan (psycopg prepares a statement after 5 runs) cannot hash an array parameter, so
        # the filter would scan the whole array per row (measured: vector leg 9 → 65 ms at 10k chunks).
        # Recovery after a PostgreSQL restart: `check` drops a connection the restart broke when it is taken
        # from the pool (one empty round trip), instead of failing the request that took it; the short
        # reconnect_timeout caps the pool's doubling reconnect backoff (1, 2, 4, 8 s ... left alone it made
        # recovery take ~18 s): a given-up attempt is started afresh, at once, by the next request or health
        # probe. `timeout` bounds how long a request waits for a connection while the database is down.
        self._pool = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=5,
            check=check_connection,
            reconnect_timeout=2,
            kwargs={
                "connect_timeout": 3,
                "application_name": "ragmesh-retriever",
                "options": "-c plan_cache_mode=force_custom_plan",
            },
        )
        self._timeout = statement_timeout_ms

    async def open(self) -> None:
        await self._pool.open(wait=True, timeout=30)
        async with self._pool.connection() as conn:
            row = await (
                await conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            ).fetchone()
            if row is None or row[0] or row[1]:
                # RLS would silently not apply: refuse to serve rather than leak documents
                raise RuntimeError("RETRIEVER_DATABASE_URL must name a role without SUPERUSER and BYPASSRLS")

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self, timeout: float = 2.0) -> str | None:
        """None when the database answers within `timeout`, else why not (for the health status)."""
        try:
            async with asyncio.timeout(timeout):
                async with self._pool.connection(timeout=timeout) as conn, psycopg.AsyncCursor(conn) as cur:
                    await cur.execute("SELECT 1")  # a plain cursor: the health probe is not traced
        except (psycopg.Error, PoolTimeout, TimeoutError, OSError) as exc:
            return f"{type(exc).__name__}: {exc}".strip()[:300]
        return None

    @asynccontextmanager
    async def transaction(
        self, user: UserContext, settings: dict[str, str] | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A transaction as `user` (the identity RLS reads, verified by the database), with more
        transaction-local `settings` set in the same round trip.

        The setup statement runs on a plain `psycopg.AsyncCursor`, which the OpenTelemetry psycopg
        instrumentation (it wraps the connection's cursor factory) does not trace: like BEGIN and COMMIT it is
        part of opening the transaction, and a traced statement costs ~0.15 ms plus a stored span. Every
        statement run on `conn` is traced."""
        extra = settings or {}
        async with self._pool.connection() as conn, conn.transaction():
            identity_sql, identity_params = self.identity_statement(conn, user)
            async with psycopg.AsyncCursor(conn) as setup:
                await setup.execute(
                    identity_sql
                    + ", set_config('statement_timeout', %s, true)"
                    + ", set_config(%s, %s, true)" * len(extra),
                    (*identity_params, str(self._timeout), *(x for item in extra.items() for x in item)),
                )
            yield conn

    def identity_statement(self, conn: psycopg.AsyncConnection[Any], user: UserContext) -> tuple[str, tuple[Any, ...]]:
        """The SELECT that gives this transaction its identity: an assertion for `user` on this connection."""
        return SET_IDENTITY, assertion(self._rls_key, user.user_id, user.department, user.roles, conn.info.backend_pid)
