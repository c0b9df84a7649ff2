"""The grpc.aio server lifecycle every ragmesh service shares.

Health is the library servicer: NOT_SERVING while warming up and while draining,
SERVING only after `warmup` returned. Reflection is on. SIGTERM/SIGINT stop the
server gracefully (grace period from `<SERVICE>_GRACE_SECONDS`, default 5).

mTLS between services (optional): with RAGMESH_TLS_CERT, RAGMESH_TLS_KEY and RAGMESH_TLS_CA (PEM files) set, the
server listens with TLS and requires a client certificate signed by that CA, and `mesh_channel` connects with
the same certificate. Kubernetes' native gRPC probes cannot present a client certificate: RAGMESH_HEALTH_PORT
(plaintext, the Health service only, nothing else) is what they check then.

Metrics: every RPC is counted and timed (`ragmesh_common.metrics`), served in Prometheus' text format at
`GET /metrics` on RAGMESH_METRICS_PORT (plaintext HTTP; 0 = not served, the default).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ragmesh_common.config import ConfigError, ServiceSettings, settings_config
from ragmesh_common.context import UserContextInterceptor
from ragmesh_common.metrics import MetricsInterceptor, MetricsServer
from ragmesh_common.validation import ValidationInterceptor

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # A restarted service is reached within ~2 s: gRPC's default reconnect backoff grows to 120 s, and while a
    # channel waits out its backoff every call on it fails UNAVAILABLE although the service is back.
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class TlsSettings(ServiceSettings):
    """RAGMESH_TLS_CERT / _KEY / _CA: all three (mTLS on) or none (plaintext); RAGMESH_HEALTH_PORT and
    RAGMESH_METRICS_PORT: 0 = none."""

    model_config = settings_config(env_prefix="RAGMESH_")

    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    health_port: int = 0
    metrics_port: int = 0

    def files(self) -> MeshTls | None:
        given = {"RAGMESH_TLS_CERT": self.tls_cert, "RAGMESH_TLS_KEY": self.tls_key, "RAGMESH_TLS_CA": self.tls_ca}
        if not any(given.values()):
            return None
        missing = [name for name, value in given.items() if value is None]
        if missing:
            raise ConfigError(f"mTLS needs all of RAGMESH_TLS_CERT, RAGMESH_TLS_KEY, RAGMESH_TLS_CA; {missing} not set")
        assert self.tls_cert is not None and self.tls_key is not None and self.tls_ca is not None
        return MeshTls.load(self.tls_cert, self.tls_key, self.tls_ca)


@dataclass(frozen=True, repr=False)
class MeshTls:
    """This process's certificate and key and the CA that signs every certificate of the mesh (PEM bytes)."""

    cert: bytes
    key: bytes
    ca: bytes

    @classmethod
    def load(cls, cert: Path, key: Path, ca: Path) -> MeshTls:
        read = {}
        for name, path in (("RAGMESH_TLS_CERT", cert), ("RAGMESH_TLS_KEY", key), ("RAGMESH_TLS_CA", ca)):
            try:
                read[name] = path.read_bytes()
            except OSError as exc:
                raise ConfigError(f"environment variable {name}: cannot read {path}: {exc.strerror}") from None
            if b"-----BEGIN " not in read[name]:
                raise ConfigError(f"environment variable {name}: {path} is not a PEM file")
        return cls(read["RAGMESH_TLS_CERT"], read["RAGMESH_TLS_KEY"], read["RAGMESH_TLS_CA"])

    @classmethod
    def from_env(cls) -> MeshTls | None:
        return TlsSettings.from_env().files()

    def server_credentials(self) -> grpc.ServerCredentials:
        """Requires a client certificate signed by the CA: a caller without one fails the handshake."""
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca, require_client_auth=True)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert
        )


AddServicers = Callable[[aio.Server], Sequence[str]]
Hook = Callable[[], Awaitable[None]]


class GrpcService:
    """One gRPC server: servicers, health, reflection, the user-context and request-validation interceptors."""

    def __init__(
        self,
        name: str,
        add_servicers: AddServicers,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        warmup: Hook | None = None,
        on_stop: Hook | None = None,
        grace: float = 5.0,
        tls: MeshTls | None = None,
        health_port: int | None = None,
        metrics_port: int | None = None,
    ) -> None:
        """`tls`, `health_port` and `metrics_port` default to RAGMESH_TLS_*, RAGMESH_HEALTH_PORT and
        RAGMESH_METRICS_PORT (see the module docstring)."""
        self.name = name
        self._add = add_servicers
        self._host = host
        self._port = port
        self._warmup = warmup
        self._on_stop = on_stop
        self._grace = grace
        env = TlsSettings.from_env() if tls is None or health_port is None or metrics_port is None else None
        self.tls = tls if tls is not None else env.files() if env is not None else None
        self._health_port = health_port if health_port is not None else env.health_port if env is not None else 0
        self._metrics_port = metrics_port if metrics_port is not None else env.metrics_port if env is not None else 0
        self.metrics_server: MetricsServer | None = None
        self.health_server: aio.Server | None = None
        self.health_port = 0
        self.health = health.aio.HealthServicer()  # type: ignore[attr-defined]  # not in grpc-stubs
        self.server: aio.Server | None = None
        self.port = 0
        self._services: list[str] = []

    async def start(self) -> int:
        """Binds and starts serving; reports SERVING once warmup finished. Returns the port."""
        # identity first (an unauthenticated call learns nothing about its request), then the one request check
        # metrics outermost: a refused call (no identity, a bad request) is counted with its status code too
        server = aio.server(
            interceptors=[MetricsInterceptor(), UserContextInterceptor(service=self.name), ValidationInterceptor()],
            options=CHANNEL_OPTIONS,
        )
        self._services = list(self._add(server))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            [*self._services, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
            server,
        )
        address = f"{self._host}:{self._port}"
        if self.tls is not None:
            self.port = server.add_secure_port(address, self.tls.server_credentials())
        else:
            self.port = server.add_insecure_port(address)
        if self.port == 0:
            raise RuntimeError(f"{self.name}: could not bind {self._host}:{self._port}")
        await self._set_all(health_pb2.HealthCheckResponse.NOT_SERVING)
        await server.start()
        self.server = server
        if self._health_port:
            await self._start_health_server()
        if self._metrics_port and self.metrics_server is None:
            self.metrics_server = MetricsServer(self._host, self._metrics_port)
        logger.info(
            "%s listening on %s:%d (%s), warming up",
            self.name,
            self._host,
            self.port,
            "mTLS" if self.tls is not None else "plaintext",
        )
        if self._warmup is not None:
            await self._warmup()
        await self._set_all(health_pb2.HealthCheckResponse.SERVING)
        logger.info("%s ready (SERVING) on %s:%d", self.name, self._host, self.port)
        return self.port

    async def _start_health_server(self) -> None:
        """A plaintext port that serves the Health service only (for probes that cannot do mTLS)."""
        server = aio.server()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        self.health_port = server.add_insecure_port(f"{self._host}:{self._health_port}")
        if self.health_port == 0:
            raise RuntimeError(f"{self.name}: could not bind the health port {self._host}:{self._health_port}")
        await server.start()
        self.health_server = server
        logger.info("%s health checks (plaintext) on %s:%d", self.name, self._host, self.health_port)

    async def _set_all(self, status: int) -> None:
        await self.health.set("", status)
        for service in self._services:
            await self.health.set(service, status)

    async def stop(self) -> None:
        if self.server is None:
            return
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self._grace)
        self.server = None
        if self.health_server is not None:
            await self.health_server.stop(0)
            self.health_server = None
        if self.metrics_server is not None:
            self.metrics_server.close()
            self.metrics_server = None
        if self._on_stop is not None:
            await self._on_stop()
        logger.info("%s stopped", self.name)

    async def serve_forever(self) -> None:
        """Starts, then waits for SIGTERM or SIGINT and stops gracefully."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        await stop.wait()
        logger.info("%s draining (grace %.1fs)", self.name, self._grace)
        await self.stop()


def insecure_channel(address: str) -> aio.Channel:
    """A plaintext client channel with the mesh's message limits (tools and tests; services use mesh_channel)."""
    return aio.insecure_channel(address, options=CHANNEL_OPTIONS)


def mesh_channel(address: str, tls: MeshTls | None = None) -> aio.Channel:
    """A channel from one service to another: mTLS with `tls` or, by default, the RAGMESH_TLS_* files when set
    (this process's certificate, the mesh CA checks the server's); plaintext when neither."""
    tls = tls if tls is not None else MeshTls.from_env()
    if tls is None:
        return insecure_channel(address)
    return aio.secure_channel(address, tls.channel_credentials(), options=CHANNEL_OPTIONS)


async def wait_serving(address: str, timeout: float = 60.0, service: str = "") -> None:
    """Waits until the health check at `address` answers SERVING (used by launchers and tests)."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Exception | str = "no answer"
    async with insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while asyncio.get_running_loop().time() < deadline:
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
            except grpc.RpcError as exc:
                last = exc
            await asyncio.sleep(0.25)
    raise TimeoutError(f"{address} not SERVING after {timeout:.0f}s (last: {last})")


EVENT_LOOPS = ("uvloop", "asyncio")


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Runs a process's main coroutine on the event loop named by `RAGMESH_EVENT_LOOP`: `uvloop` (default;
    libuv's loop, the one uvicorn picks for itself when it is installed, as uvicorn[standard] does) or
    `asyncio` (the standard library's). grpc.aio, psycopg and redis run on both; uvloop takes less CPU per
    request and per gRPC call (`make bench-gateway` compares the two)."""
    choice = os.environ.get("RAGMESH_EVENT_LOOP", "uvloop").strip().lower() or "uvloop"
    if choice not in EVENT_LOOPS:
        main.close()
        raise SystemExit(f"RAGMESH_EVENT_LOOP must be one of {', '.join(EVENT_LOOPS)}, not {choice!r}")
    if choice == "uvloop":
        import uvloop

        uvloop.run(main)
    else:
        asyncio.run(main)


_Settings = TypeVar("_Settings")


def run_service(
    name: str, settings_from_env: Callable[[], _Settings], build: Callable[[_Settings], GrpcService], **telemetry: bool
) -> None:
    """The `__main__` of every gRPC service: logging, settings (a bad one exits naming the variable), telemetry,
    serve until SIGTERM.

    `telemetry` takes the instrumentation switches of `setup_telemetry` (e.g. instrument_psycopg=True).
    """
    from ragmesh_common.logs import setup_logging
    from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

    setup_logging(name)
    try:
        settings = settings_from_env()
        TlsSettings.from_env().files()  # RAGMESH_TLS_*: all or none, readable PEM files
    except ConfigError as exc:  # one line naming the variable, not a traceback
        raise SystemExit(f"{name}: {exc}") from None

    async def main() -> None:
        setup_telemetry(name, **telemetry)
        try:
            await build(settings).serve_forever()
        finally:
            shutdown_telemetry()

    run_event_loop(main())
