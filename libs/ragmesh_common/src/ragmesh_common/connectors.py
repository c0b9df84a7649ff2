"""Connectors: sources beyond uploads (a folder or share, a web site) that the ingestion worker syncs into documents
on a schedule. What the gateway's admin API and the worker share: the connector's definition (validated models),
the admin-configured limits on where a folder connector may read, the Celery task names and the beat schedule,
and the store of connectors, item states and run reports in PostgreSQL (sql/connectors.sql, applied by the
retriever's migration; the connectors role, CONNECTORS_DSN).

A run is a Celery task (RUN_TASK) on the ingestion queue; Celery beat sends TICK_TASK every
CONNECTORS_TICK_SECONDS and the tick queues a run for every connector whose schedule is due. The worker runs
one connector at a time (a PostgreSQL advisory lock held for the run), writes each item's state as soon as that
item is done and one report per run. The gateway enqueues manual runs and reads the reports.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ragmesh_common.identity import IDENTIFIER_PATTERN

if TYPE_CHECKING:
    from celery import Celery

RUN_TASK = "ragmesh.connector_run"
TICK_TASK = "ragmesh.connectors_tick"
DSN_ENV = "CONNECTORS_DSN"
ALLOWED_ROOTS_ENV = "CONNECTORS_ALLOWED_ROOTS"
TICK_ENV = "CONNECTORS_TICK_SECONDS"
DEFAULT_TICK_SECONDS = 30.0
MIN_SCHEDULE_SECONDS = 60  # a scheduled connector runs at most once a minute (0: manual runs only)
MAX_PROBLEMS = 200  # problems kept in one run's report (the counts stay exact)
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
DB_TIMEOUT_SECONDS = 10
STATEMENT_TIMEOUT_MS = 30_000
POOL_SIZE = 4  # connections per process (the gateway's request threads, a worker's connector runs)

Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
MAX_ACL_ENTRIES = 100


class AclSpec(BaseModel):
    """Who may read a connector's documents besides the connector itself (the document ACL of an upload)."""

    model_config = ConfigDict(extra="forbid")

    public: bool = False
    departments: list[Identifier] = Field(default_factory=list, max_length=MAX_ACL_ENTRIES)
    roles: list[Identifier] = Field(default_factory=list, max_length=MAX_ACL_ENTRIES)
    users: list[Identifier] = Field(default_factory=list, max_length=MAX_ACL_ENTRIES)

    def normal(self) -> dict[str, Any]:
        """The ACL as compared and stored: sorted, without duplicates."""
        return {
            "public": self.public,
            "departments": sorted(set(self.departments)),
            "roles": sorted(set(self.roles)),
            "users": sorted(set(self.users)),
        }


class FolderConfig(BaseModel):
    """A folder or mounted share. `root` must lie inside one of CONNECTORS_ALLOWED_ROOTS."""

    model_config = ConfigDict(extra="forbid")

    root: str = Field(min_length=1, max_length=4096, description="absolute path inside an allowed base directory")
    max_file_bytes: int = Field(50 * 1024 * 1024, ge=1, le=1024**3, description="larger files are skipped")


class WebConfig(BaseModel):
    """A web site: pages reached from the seeds and sitemaps, on the allowed hosts only."""

    model_config = ConfigDict(extra="forbid")

    seeds: list[Annotated[str, StringConstraints(max_length=2048)]] = Field(default_factory=list, max_length=100)
    sitemaps: list[Annotated[str, StringConstraints(max_length=2048)]] = Field(default_factory=list, max_length=20)
    allowed_hosts: list[Annotated[str, StringConstraints(min_length=1, max_length=260)]] = Field(
        min_length=1, max_length=50, description="host or host:port; `*.example.com` for its subdomains"
    )
    max_depth: int = Field(2, ge=0, le=10, description="links followed from a seed")
    max_pages: int = Field(200, ge=1, le=100_000, description="requests per run")
    max_page_bytes: int = Field(5 * 1024 * 1024, ge=1, le=100 * 1024 * 1024)
    max_run_bytes: int = Field(200 * 1024 * 1024, ge=1, le=10 * 1024**3)
    timeout_seconds: float = Field(10.0, gt=0, le=120, description="each request, start to last byte")
    user_agent: str = Field("ragmesh-connector", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_./ ()+:-]+$")

    @model_validator(mode="after")
    def _urls(self) -> WebConfig:
        if not self.seeds and not self.sitemaps:
            raise ValueError("give at least one seed or sitemap URL")
        for url in [*self.seeds, *self.sitemaps]:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) URL: {url!r}")
            if not host_allowed(url, self.allowed_hosts):
                raise ValueError(f"{url!r} is not on an allowed host ({', '.join(self.allowed_hosts)})")
        return self


class ConnectorIn(BaseModel):
    """POST /api/v1/admin/connectors: a new connector."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="its documents are owned by `connector:<name>`")
    kind: Literal["folder", "web"]
    config: FolderConfig | WebConfig
    acl: AclSpec = Field(
        default_factory=AclSpec, description="the documents' ACL where the source says nothing (folder mapping files)"
    )
    schedule_seconds: int = Field(
        0, ge=0, le=30 * 86400, description=f"run every this many seconds (>= {MIN_SCHEDULE_SECONDS}); 0: manual only"
    )

    @model_validator(mode="after")
    def _kind(self) -> ConnectorIn:
        expected = FolderConfig if self.kind == "folder" else WebConfig
        if not isinstance(self.config, expected):
            raise ValueError(f"a {self.kind} connector's config has the fields of {expected.__name__}")
        if 0 < self.schedule_seconds < MIN_SCHEDULE_SECONDS:
            raise ValueError(f"schedule_seconds must be 0 (manual) or at least {MIN_SCHEDULE_SECONDS}")
        return self


def owner_of(name: str) -> str:
    """The identity that owns a connector's documents."""
    return f"connector:{name}"


# ---------- where a folder connector may read ----------


def allowed_roots(raw: str | None = None) -> list[Path]:
    """CONNECTORS_ALLOWED_ROOTS: absolute base directories (separated by the OS path separator or commas). None
    configured: no folder connector may be created or run."""
    text = os.environ.get(ALLOWED_ROOTS_ENV, "") if raw is None else raw
    roots = []
    for part in text.replace(",", os.pathsep).split(os.pathsep):
        part = part.strip()
        if not part:
            continue
        if not os.path.isabs(part):
            raise ValueError(f"{ALLOWED_ROOTS_ENV}: {part!r} is not an absolute path")
        roots.append(Path(os.path.normpath(part)))
    return roots


def check_root(root: str, allowed: Sequence[Path]) -> Path:
    """`root` as a normal absolute path if it lies inside an allowed base (by its name: the worker checks the
    real path again, symlinks resolved), else ValueError with the reason."""
    if not allowed:
        raise ValueError(f"no folder may be synced: the administrator has set no {ALLOWED_ROOTS_ENV}")
    if not os.path.isabs(root):
        raise ValueError("root must be an absolute path")
    if ".." in PurePosixPath(root).parts or "\x00" in root:
        raise ValueError("root must not contain '..'")
    normal = Path(os.path.normpath(root))
    for base in allowed:
        if normal == base or base in normal.parents:
            return normal
    raise ValueError(f"root {root!r} is outside the allowed base directories ({', '.join(map(str, allowed))})")


def host_allowed(url: str, allowed_hosts: Sequence[str]) -> bool:
    """Whether `url` is http(s) on an allowed host: `host` (any port), `host:port`, or `*.domain` (its
    subdomains, not the domain itself)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        return False
    for entry in allowed_hosts:
        entry = entry.strip().lower()
        name, _, want_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if want_port and (not want_port.isdigit() or int(want_port) != port):
            continue
        name = name.rstrip(".")
        if name.startswith("*."):
            if host.endswith(name[1:]) and host != name[2:]:
                return True
        elif host == name:
            return True
    return False


# ---------- Celery: the tasks and the beat schedule ----------


def send_run(app: Celery, connector_id: str, run_id: str, queue: str) -> None:
    """Queues one connector run (blocking; the gateway calls it off its event loop, under a timeout)."""
    app.send_task(RUN_TASK, args=[connector_id, run_id], queue=queue, retry=True, retry_policy={"max_retries": 1})


def tick_seconds() -> float:
    raw = os.environ.get(TICK_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TICK_SECONDS
    except ValueError:
        raise SystemExit(f"{TICK_ENV} must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise SystemExit(f"{TICK_ENV} must be > 0")
    return value


def configure_beat(app: Celery, queue: str, seconds: float) -> None:
    """Celery beat sends TICK_TASK every `seconds`; the tick (in the worker) queues the runs that are due. One
    periodic task, not one per connector, so connectors created through the API need no beat restart."""
    app.conf.beat_schedule = {
        "connectors-tick": {
            "task": TICK_TASK,
            "schedule": seconds,
            "options": {"queue": queue, "expires": seconds},  # a tick nobody took in time is dropped
        }
    }


# ---------- the store ----------


class ConnectorExists(ValueError):
    """A connector of that name exists."""


@dataclass
class ItemState:
    """What a connector last ingested from one source item."""

    source_key: str
    content_sha256: str = ""
    etag: str = ""
    last_modified: str = ""
    acl: dict[str, Any] = field(default_factory=dict)
    document_id: str = ""


def _json_ready(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, uuid.UUID):
            value = str(value)
        elif hasattr(value, "isoformat"):
            value = value.isoformat()
        out[key] = value
    return out


_RUN_COLUMNS = (
    "id::text AS run_id, connector_id::text, trigger, status, queued_at, started_at, finished_at, counts, problems, "
    "message"
)


class ConnectorStore:
    """The connector tables as the connectors role (blocking: the gateway calls it in a thread, the worker's tasks
    run in threads), through a pool of at most `pool_size` connections opened on first use (so a process that
    forks, as Celery's prefork worker does, opens it in the child that uses it). Every connection has a connect
    and a statement timeout; taking one from a full pool waits at most DB_TIMEOUT_SECONDS (psycopg_pool's
    PoolTimeout, a psycopg error). `close()` closes the pool."""

    def __init__(self, dsn: str, pool_size: int = POOL_SIZE) -> None:
        self.dsn = dsn
        self._pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
            dsn,
            connection_class=psycopg.Connection[dict[str, Any]],
            min_size=1,
            max_size=max(1, pool_size),
            open=False,
            timeout=DB_TIMEOUT_SECONDS,
            name="connectors",
            check=ConnectionPool.check_connection,  # a connection the server dropped is replaced, not handed out
            kwargs=self._connection_options(),
        )
        self._opened = threading.Lock()

    @staticmethod
    def _connection_options() -> dict[str, Any]:
        return {
            "connect_timeout": DB_TIMEOUT_SECONDS,
            "autocommit": True,
            "row_factory": dict_row,
            "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
        }

    @contextmanager
    def _connect(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        with self._opened:
            if self._pool.closed:
                self._pool.open(wait=False)
        with self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        self._pool.close()

    # connectors
    def create(self, spec: ConnectorIn, created_by: str) -> dict[str, Any]:
        config = spec.config.model_dump()
        try:
            with self._connect() as conn:
                row = conn.execute(
                    "INSERT INTO connectors (name, kind, config, acl, schedule_seconds, created_by, next_run_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, CASE WHEN %s > 0 THEN now() END) RETURNING id",
                    (
                        spec.name,
                        spec.kind,
                        Jsonb(config),
                        Jsonb(spec.acl.normal()),
                        spec.schedule_seconds,
                        created_by,
                        spec.schedule_seconds,
                    ),
                ).fetchone()
        except psycopg.errors.UniqueViolation:
            raise ConnectorExists(f"a connector named {spec.name!r} exists") from None
        assert row is not None
        found = self.get(str(row["id"]))
        assert found is not None
        return found

    _SELECT = (
        "SELECT c.id::text AS connector_id, c.name, c.kind, c.config, c.acl, c.schedule_seconds, c.state, "
        "c.created_by, c.created_at, c.next_run_at, "
        "(SELECT count(*) FROM connector_items i WHERE i.connector_id = c.id AND i.document_id IS NOT NULL) "
        "AS documents, "
        "(SELECT row_to_json(r) FROM (SELECT id::text AS run_id, status, queued_at, finished_at, counts "
        " FROM connector_runs WHERE connector_id = c.id ORDER BY queued_at DESC LIMIT 1) r) AS last_run "
        "FROM connectors c"
    )

    def list_all(self) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute(self._SELECT + " ORDER BY c.name").fetchall()
        return [_json_ready(r) for r in rows]

    def get(self, connector_id: str) -> dict[str, Any] | None:
        with self._connect() as conn:
            row = conn.execute(self._SELECT + " WHERE c.id = %s", (connector_id,)).fetchone()
        return _json_ready(row) if row else None

    def mark_deleting(self, connector_id: str) -> bool:
        with self._connect() as conn:
            cur = conn.execute("UPDATE connectors SET state = 'deleting' WHERE id = %s", (connector_id,))
            return cur.rowcount == 1

    def delete(self, connector_id: str) -> None:
        with self._connect() as conn:
            conn.execute("DELETE FROM connectors WHERE id = %s", (connector_id,))

    # runs
    def queue_run(self, connector_id: str, trigger: str) -> dict[str, Any]:
        with self._connect() as conn:
            row = conn.execute(
                f"INSERT INTO connector_runs (connector_id, trigger) VALUES (%s, %s) RETURNING {_RUN_COLUMNS}",
                (connector_id, trigger),
            ).fetchone()
        assert row is not None
        return _json_ready(row)

    def claim_due(self) -> list[str]:
        """The active scheduled connectors whose time has come, each moved to its next time in the same
        statement (so two ticks never queue the same run)."""
        with self._connect() as conn:
            rows = conn.execute(
                "UPDATE connectors SET next_run_at = now() + make_interval(secs => schedule_seconds) "
                "WHERE state = 'active' AND schedule_seconds > 0 AND (next_run_at IS NULL OR next_run_at <= now()) "
                "RETURNING id::text AS connector_id"
            ).fetchall()
        return [r["connector_id"] for r in rows]

    def runs(self, connector_id: str, limit: int = 20) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM connector_runs WHERE connector_id = %s ORDER BY queued_at DESC LIMIT %s",
                (connector_id, limit),
            ).fetchall()
        return [_json_ready(r) for r in rows]

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self._connect() as conn:
            row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM connector_runs WHERE id = %s", (run_id,)).fetchone()
        return _json_ready(row) if row else None

    def start_run(self, run_id: str) -> None:
        with self._connect() as conn:
            conn.execute("UPDATE connector_runs SET status = 'running', started_at = now() WHERE id = %s", (run_id,))

    def progress(self, run_id: str, counts: dict[str, int]) -> None:
        with self._connect() as conn:
            conn.execute("UPDATE connector_runs SET counts = %s WHERE id = %s", (Jsonb(counts), run_id))

    def finish_run(
        self, run_id: str, status: str, counts: dict[str, int], problems: list[dict[str, str]], message: str = ""
    ) -> None:
        with self._connect() as conn:
            conn.execute(
                "UPDATE connector_runs SET status = %s, finished_at = now(), counts = %s, problems = %s, "
                "message = %s, started_at = coalesce(started_at, now()) WHERE id = %s",
                (status, Jsonb(counts), Jsonb(problems[:MAX_PROBLEMS]), message[:2000], run_id),
            )

    def interrupt_stale(self, connector_id: str, current_run: str) -> int:
        """Marks the connector's other `running` runs interrupted: the caller holds the connector's run lock, so
        they belong to a worker that died. Their items done so far are kept; this run resumes after them."""
        with self._connect() as conn:
            cur = conn.execute(
                "UPDATE connector_runs SET status = 'interrupted', finished_at = now(), "
                "message = 'the worker stopped during the run; the next run resumed it' "
                "WHERE connector_id = %s AND status = 'running' AND id <> %s",
                (connector_id, current_run),
            )
            return cur.rowcount

    @contextmanager
    def run_lock(self, connector_id: str) -> Iterator[bool]:
        """Whether this process may run the connector now: a session advisory lock on a connection of its own (not
        the pool's: a session lock must never outlive the run on a reused connection) held for the run, so it is
        released when the run ends or its worker dies."""
        with psycopg.connect(self.dsn, **self._connection_options()) as conn:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended('ragmesh-connector:' || %s, 0)) AS locked",
                (connector_id,),
            ).fetchone()
            locked = bool(row and row["locked"])
            try:
                yield locked
            finally:
                if locked and not conn.closed:
                    conn.execute(
                        "SELECT pg_advisory_unlock(hashtextextended('ragmesh-connector:' || %s, 0))", (connector_id,)
                    )

    # items
    def items(self, connector_id: str) -> dict[str, ItemState]:
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT source_key, content_sha256, etag, last_modified, acl, coalesce(document_id::text, '') AS "
                "document_id FROM connector_items WHERE connector_id = %s",
                (connector_id,),
            ).fetchall()
        return {r["source_key"]: ItemState(**r) for r in rows}

    def save_item(self, connector_id: str, item: ItemState, run_id: str) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO connector_items (connector_id, source_key, content_sha256, etag, last_modified, acl, "
                "document_id, last_run_id, last_seen_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now()) "
                "ON CONFLICT (connector_id, source_key) DO UPDATE SET content_sha256 = excluded.content_sha256, "
                "etag = excluded.etag, last_modified = excluded.last_modified, acl = excluded.acl, "
                "document_id = excluded.document_id, last_run_id = excluded.last_run_id, last_seen_at = now()",
                (
                    connector_id,
                    item.source_key,
                    item.content_sha256,
                    item.etag,
                    item.last_modified,
                    Jsonb(item.acl),
                    item.document_id or None,
                    run_id,
                ),
            )

    def delete_item(self, connector_id: str, source_key: str) -> None:
        with self._connect() as conn:
            conn.execute(
                "DELETE FROM connector_items WHERE connector_id = %s AND source_key = %s", (connector_id, source_key)
            )
