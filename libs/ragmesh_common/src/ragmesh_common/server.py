"""The grpc.aio server lifecycle every ragmesh service shares.

Health is the library servicer: NOT_SERVING while warming up and while draining,
SERVING only after `warmup` returned. Reflection is on. SIGTERM/SIGINT stop the
server gracefully (grace period from `<SERVICE>_GRACE_SECONDS`, default 5).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import grpc
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ragmesh_common.context import UserContextInterceptor
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
    ) -> None:
        self.name = name
        self._add = add_servicers
        self._host = host
        self._port = port
        self._warmup = warmup
        self._on_stop = on_stop
        self._grace = grace
        self.health = health.aio.HealthServicer()  # type: ignore[attr-defined]  # not in grpc-stubs
        self.server: aio.Server | None = None
        self.port = 0
        self._services: list[str] = []

    async def start(self) -> int:
        """Binds and starts serving; reports SERVING once warmup finished. Returns the port."""
        # identity first (an unauthenticated call learns nothing about its request), then the one request check
        server = aio.server(interceptors=[UserContextInterceptor(), ValidationInterceptor()], options=CHANNEL_OPTIONS)
        self._services = list(self._add(server))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            [*self._services, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
            server,
        )
        self.port = server.add_insecure_port(f"{self._host}:{self._port}")
        if self.port == 0:
            raise RuntimeError(f"{self.name}: could not bind {self._host}:{self._port}")
        await self._set_all(health_pb2.HealthCheckResponse.NOT_SERVING)
        await server.start()
        self.server = server
        logger.info("%s listening on %s:%d, warming up", self.name, self._host, self.port)
        if self._warmup is not None:
            await self._warmup()
        await self._set_all(health_pb2.HealthCheckResponse.SERVING)
        logger.info("%s ready (SERVING) on %s:%d", self.name, self._host, self.port)
        return self.port

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
    """A client channel with the mesh's message limits."""
    return aio.insecure_channel(address, options=CHANNEL_OPTIONS)


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
    from ragmesh_common.config import ConfigError
    from ragmesh_common.logs import setup_logging
    from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

    setup_logging(name)
    try:
        settings = settings_from_env()
    except ConfigError as exc:  # one line naming the variable, not a traceback
        raise SystemExit(f"{name}: {exc}") from None

    async def main() -> None:
        setup_telemetry(name, **telemetry)
        try:
            await build(settings).serve_forever()
        finally:
            shutdown_telemetry()

    run_event_loop(main())
