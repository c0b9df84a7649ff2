"""Reads the spans every service wrote to PostgreSQL `rag_traces` (admin API and dashboard), and keeps the
table bounded.

Row-level security lets a transaction read spans only when its verified identity holds the role `admin`: each
read runs in a transaction whose first statement hands PostgreSQL an identity assertion for the requesting user,
signed with GATEWAY_TRACES_RLS_KEY (`ragmesh_common.rls`), so the database checks the role the API checked.
The application role cannot claim a role by setting a variable.

Retention: spans older than RAG_TRACES_RETENTION_HOURS, and the oldest beyond RAG_TRACES_MAX_ROWS, are deleted
every RAG_TRACES_RETENTION_INTERVAL_SECONDS by each gateway (deleting is idempotent, so replicas may overlap),
through a connection of its own as the retention role (GATEWAY_TRACES_RETENTION_DSN; without it this gateway
does not prune). Neither the application role nor the traces role may delete spans; the retention role calls
`rag_traces_prune` (traces.sql), which runs as the schema owner and never goes below the floor the migration
set (spans younger than a day and the newest 10,000 stay, by default), one short batch per call.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from ragmesh_common.context import UserContext
from ragmesh_common.rls import SET_IDENTITY, assertion, check_key

# The filters (each off when NULL): the window [since, until], a user, errors only, a minimum duration, a span
# name (a pipeline step, an RPC), and a free text matched against span names and attribute values (the
# question itself is on a span only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). One row more
# than the page is read: it says whether there is a next page.
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
WHERE start_time >= %(since)s AND start_time <= %(until)s
GROUP BY trace_id
HAVING (%(name)s::text IS NULL OR bool_or(name ILIKE '%%' || %(name)s || '%%' ESCAPE '\\'))
   AND (%(user)s::text IS NULL OR bool_or(attributes->>'rag.user.id' = %(user)s))
   AND (NOT %(errors)s OR bool_or(status_code = 'error'))
   AND (%(min_ms)s::float8 IS NULL OR extract(epoch FROM max(end_time) - min(start_time)) * 1000 >= %(min_ms)s)
   AND (%(step)s::text IS NULL OR bool_or(name = %(step)s))
   AND (%(text)s::text IS NULL
        OR bool_or(name ILIKE '%%' || %(text)s || '%%' ESCAPE '\\'
                   OR attributes::text ILIKE '%%' || %(text)s || '%%' ESCAPE '\\'))
ORDER BY min(start_time) DESC, trace_id
LIMIT %(limit)s OFFSET %(offset)s
"""

# Per span name over the window: how many, how many failed, and the 50th/95th/99th duration percentiles. Client
# spans are left out (each gRPC hop is also its server's span), so a step counts once.
_STATS = """
SELECT service, name, count(*) AS count,
       count(*) FILTER (WHERE status_code = 'error') AS errors,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY duration_ms) AS p99_ms
FROM rag_traces
WHERE start_time >= %(since)s AND start_time <= %(until)s AND kind <> 'client' AND duration_ms IS NOT NULL
GROUP BY service, name
ORDER BY count(*) DESC, service, name
LIMIT %(limit)s
"""

_SPANS = """
SELECT span_id, parent_span_id, name, service, kind, start_time, end_time, duration_ms, status_code,
       status_message, attributes, events
FROM rag_traces WHERE trace_id = %s ORDER BY start_time, span_id
"""

logger = logging.getLogger(__name__)

RETENTION_BATCH = 5000  # rows per call: short transactions, no long lock on the table the exporters write
_PRUNE = "SELECT rag_traces_prune(%(seconds)s, %(rows)s, %(batch)s)"


@dataclass(frozen=True)
class Retention:
    """How much of rag_traces to keep; 0 turns a limit off."""

    hours: float = 168.0
    max_rows: int = 1_000_000
    interval_seconds: float = 300.0

    @classmethod
    def from_env(cls) -> Retention:
        def number(name: str, default: float) -> float:
            raw = os.environ.get(name, "").strip()
            try:
                value = float(raw) if raw else default
            except ValueError:
                raise SystemExit(f"{name} must be a number, not {raw!r}") from None
            if value < 0:
                raise SystemExit(f"{name} must be >= 0, not {raw!r}")
            return value

        return cls(
            hours=number("RAG_TRACES_RETENTION_HOURS", cls.hours),
            max_rows=int(number("RAG_TRACES_MAX_ROWS", cls.max_rows)),
            interval_seconds=number("RAG_TRACES_RETENTION_INTERVAL_SECONDS", cls.interval_seconds) or 300.0,
        )

    @property
    def enabled(self) -> bool:
        return self.hours > 0 or self.max_rows > 0


def _like(text: str | None) -> str | None:
    """`text` for ILIKE '%...%', its wildcards taken literally."""
    if text is None or not text.strip():
        return None
    return text.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass(frozen=True)
class TraceFilter:
    """Which traces to list: a window (since/until, or the last `hours`) and the optional filters of _LIST."""

    hours: float = 24
    since: datetime | None = None
    until: datetime | None = None
    name: str | None = None
    user: str | None = None
    errors: bool = False
    min_ms: float | None = None
    step: str | None = None
    text: str | None = None

    def params(self) -> dict[str, Any]:
        until = self.until or datetime.now(UTC)
        since = self.since or until - timedelta(hours=self.hours)
        return {
            "since": since,
            "until": until,
            "name": _like(self.name),
            "user": self.user or None,
            "errors": self.errors,
            "min_ms": self.min_ms,
            "step": self.step or None,
            "text": _like(self.text),
        }


class TraceStore:
    def __init__(self, dsn: str, rls_key: str, *, retention_dsn: str | None = None) -> None:
        self._rls_key = check_key(rls_key, "GATEWAY_TRACES_RLS_KEY")
        self._pool = AsyncConnectionPool(
            dsn, min_size=0, max_size=4, open=False, timeout=10, kwargs={"connect_timeout": 10, "autocommit": True}
        )
        self._retention_dsn = retention_dsn

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def _as(self, user: UserContext) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                SET_IDENTITY,
                assertion(self._rls_key, user.user_id, user.department, user.roles, conn.info.backend_pid),
            )
            yield conn

    async def list(
        self,
        user: UserContext,
        limit: int = 50,
        hours: int = 24,
        name: str | None = None,
        *,
        filters: TraceFilter | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Recent traces, newest first, as `user` (nothing unless their roles hold `admin`)."""
        window = filters or TraceFilter(hours=hours, name=name)
        async with self._as(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_LIST, {**window.params(), "limit": limit, "offset": offset})
            rows = await cur.fetchall()
        for row in rows:
            row["start_time"] = row["start_time"].isoformat()
            row["duration_ms"] = round(float(row["duration_ms"] or 0), 2)
        return rows

    async def stats(self, user: UserContext, window: TraceFilter, limit: int = 40) -> builtins.list[dict[str, Any]]:
        """Per span name in the window: count, errors, error rate and p50/p95/p99 in ms (as `user`, an admin)."""
        async with self._as(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_STATS, {**window.params(), "limit": limit})
            rows = await cur.fetchall()
        for row in rows:
            for key in ("p50_ms", "p95_ms", "p99_ms"):
                row[key] = round(float(row[key] or 0), 2)
            row["error_rate"] = round(row["errors"] / row["count"], 4) if row["count"] else 0.0
        return rows

    async def spans(self, user: UserContext, trace_id: str) -> builtins.list[dict[str, Any]]:
        """The spans of one trace, as `user` (nothing unless their roles hold `admin`)."""
        async with self._as(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_SPANS, (trace_id,))
            rows = await cur.fetchall()
        for row in rows:
            row["start_time"] = row["start_time"].isoformat()
            row["end_time"] = row["end_time"].isoformat() if row["end_time"] else None
        return rows

    async def enforce(self, retention: Retention) -> int:
        """Deletes the spans `retention` does not keep (through `rag_traces_prune`, as the retention role);
        returns how many. The database never deletes below its floor, whatever `retention` says."""
        if not self._retention_dsn:
            raise RuntimeError("trace retention needs GATEWAY_TRACES_RETENTION_DSN (the retention role)")
        deleted = 0
        async with await psycopg.AsyncConnection.connect(
            self._retention_dsn, connect_timeout=10, autocommit=True
        ) as conn:
            while True:
                cur = await conn.execute(
                    _PRUNE, {"seconds": retention.hours * 3600, "rows": retention.max_rows, "batch": RETENTION_BATCH}
                )
                row = await cur.fetchone()
                count = int(row[0]) if row else 0
                deleted += count
                if count < RETENTION_BATCH:
                    return deleted

    async def keep_bounded(self, retention: Retention) -> None:
        """Runs `enforce` now and then every `retention.interval_seconds`, until cancelled; a failed pass (the
        database is down) is logged and tried again at the next interval."""
        while True:
            try:
                deleted = await asyncio.wait_for(self.enforce(retention), timeout=max(retention.interval_seconds, 60))
                if deleted:
                    logger.info(
                        "trace retention: deleted %d spans (keep %.1f h, at most %d rows)",
                        deleted,
                        retention.hours,
                        retention.max_rows,
                    )
            except Exception as exc:  # noqa: BLE001 - retention must never stop the gateway
                logger.warning("trace retention pass failed: %s", exc)
            await asyncio.sleep(retention.interval_seconds)
