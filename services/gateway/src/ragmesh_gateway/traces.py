"""Reads the spans every service wrote to PostgreSQL `rag_traces` (admin API and dashboard).

Row-level security lets a transaction read spans only when its `rag.roles` holds `admin`: each read runs in a
transaction that carries the requesting user's roles, so the database checks the role the API checked.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

_LIST = """
SELECT trace_id,
       min(start_time) AS start_time,
       extract(epoch FROM max(end_time) - min(start_time)) * 1000 AS duration_ms,
       count(*) AS span_count,
       array_agg(DISTINCT service ORDER BY service) AS services,
       (array_agg(name ORDER BY start_time) FILTER (WHERE parent_span_id IS NULL))[1] AS root_name,
       bool_or(status_code = 'error') AS has_error,
       (array_agg(attributes->>'rag.user.id') FILTER (WHERE attributes ? 'rag.user.id'))[1] AS user_id
FROM rag_traces
WHERE start_time > now() - make_interval(hours => %(hours)s)
GROUP BY trace_id
HAVING (%(name)s::text IS NULL OR bool_or(name ILIKE '%%' || %(name)s || '%%'))
ORDER BY min(start_time) DESC
LIMIT %(limit)s
"""

_SPANS = """
SELECT span_id, parent_span_id, name, service, kind, start_time, end_time, duration_ms, status_code,
       status_message, attributes, events
FROM rag_traces WHERE trace_id = %s ORDER BY start_time, span_id
"""


class TraceStore:
    def __init__(self, dsn: str) -> None:
        self._pool = AsyncConnectionPool(dsn, min_size=0, max_size=4, open=False, timeout=10,
                                         kwargs={"connect_timeout": 10, "autocommit": True})

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def _as(self, roles: Sequence[str]) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT set_config('rag.roles', %s, true)", (",".join(roles),))
            yield conn

    async def list(self, roles: Sequence[str], limit: int = 50, hours: int = 24,
                   name: str | None = None) -> list[dict[str, Any]]:
        """Recent traces, as a user with `roles` (nothing unless they hold `admin`)."""
        async with self._as(roles) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_LIST, {"limit": limit, "hours": hours, "name": name})
            rows = await cur.fetchall()
        for row in rows:
            row["start_time"] = row["start_time"].isoformat()
            row["duration_ms"] = round(float(row["duration_ms"] or 0), 2)
        return rows

    async def spans(self, roles: Sequence[str], trace_id: str) -> list[dict[str, Any]]:
        """The spans of one trace, as a user with `roles` (nothing unless they hold `admin`)."""
        async with self._as(roles) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_SPANS, (trace_id,))
            rows = await cur.fetchall()
        for row in rows:
            row["start_time"] = row["start_time"].isoformat()
            row["end_time"] = row["end_time"].isoformat() if row["end_time"] else None
        return rows
