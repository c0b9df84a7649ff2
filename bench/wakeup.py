"""What a loopback round trip costs when the other side has been idle: gRPC aio against a plain socket.

    make bench-wakeup                                   # 500 calls per row, gaps 0, 5, 20 and 50 ms
    python bench/wakeup.py --requests 1000 --gaps 0,0.03

A search through the mesh waits ~30 ms for the embedder's forward pass and ~50 ms for the retriever, so by
the time a reply comes back, the waiting process and its threads have gone to sleep. This times one echo
round trip (2,000 bytes each way) from a client process to a server process on 127.0.0.1, on the services'
event loop (uvloop), back to back and after each gap: through gRPC aio (the generic handler the services use,
no interceptors) and through a plain asyncio TCP stream. The difference between a row with a gap and the one
without is the cost of waking the idle threads (kernel, hypervisor and, for gRPC, its own poller threads that
hand each message to the event loop). Rows alternate transports per call, so drift of a shared machine hits
both alike. Prints a Markdown table (median, p95 and mean µs) and writes `bench/results/wakeup.json`.
Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval import percentile, write_report  # the benchmarks' percentile and report

PAYLOAD = b"x" * 2000
SERVICE, METHOD = "bench.Echo", "Echo"


async def serve(grpc_port: int, tcp_port: int) -> None:
    """Both echo servers in this process, on its own event loop, until killed."""
    import grpc
    from grpc import aio

    async def echo(request: bytes, context: Any) -> bytes:
        return request

    server = aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(SERVICE, {METHOD: grpc.unary_unary_rpc_method_handler(echo)})]
    )
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()

    async def stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                writer.write(await reader.readexactly(len(PAYLOAD)))
        except asyncio.IncompleteReadError:
            writer.close()

    tcp = await asyncio.start_server(stream, "127.0.0.1", tcp_port)
    async with tcp:
        await asyncio.gather(tcp.serve_forever(), server.wait_for_termination())


async def measure(grpc_port: int, tcp_port: int, gaps: list[float], requests: int, warmup: int) -> dict[str, Any]:
    from grpc import aio

    channel = aio.insecure_channel(f"127.0.0.1:{grpc_port}")
    call = channel.unary_unary(f"/{SERVICE}/{METHOD}")
    reader, writer = await asyncio.open_connection("127.0.0.1", tcp_port)

    async def grpc_echo() -> None:
        await call(PAYLOAD, timeout=5)

    async def tcp_echo() -> None:
        writer.write(PAYLOAD)
        await reader.readexactly(len(PAYLOAD))

    paths = {"grpc aio": grpc_echo, "plain tcp": tcp_echo}
    out: dict[str, Any] = {}
    try:
        for gap in gaps:
            times: dict[str, list[float]] = {name: [] for name in paths}
            for i in range(warmup + requests):
                for k in range(len(paths)):
                    name = list(paths)[(i + k) % len(paths)]  # the first transport alternates
                    if gap:
                        await asyncio.sleep(gap)
                    started = time.perf_counter()
                    await paths[name]()
                    if i >= warmup:
                        times[name].append((time.perf_counter() - started) * 1e6)
            for name, values in times.items():
                out[f"{name}, idle {gap * 1000:g} ms"] = {
                    "median_us": round(percentile(values, 0.5)),
                    "p95_us": round(percentile(values, 0.95)),
                    "mean_us": round(statistics.fmean(values)),
                    "calls": len(values),
                    "transport": name,
                    "gap_ms": gap * 1000,
                }
    finally:
        writer.close()
        await channel.close()
    return out


def main() -> int:
    import uvloop

    from ragmesh_dev.devstack import interrupt_on_sigterm
    from ragmesh_dev.ports import free_port, wait_port

    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=500, help="timed calls per row")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--gaps", default="0,0.005,0.02,0.05", help="idle seconds before each call, comma list")
    parser.add_argument("--output", default=str(root / "bench" / "results" / "wakeup.json"))
    parser.add_argument("--serve", nargs=2, type=int, metavar=("GRPC_PORT", "TCP_PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        uvloop.run(serve(*args.serve))
        return 0
    try:
        gaps = [float(g) for g in args.gaps.split(",") if g.strip()]
    except ValueError:
        parser.error(f"--gaps must be a comma list of seconds, not {args.gaps!r}")
    if args.requests < 1 or args.warmup < 0 or not gaps or min(gaps) < 0:
        parser.error("--requests must be at least 1, --warmup and every gap at least 0")

    interrupt_on_sigterm()  # kill stops the echo server too
    grpc_port, tcp_port = free_port(), free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(grpc_port), str(tcp_port)])
    try:
        try:
            wait_port("127.0.0.1", tcp_port, 30)  # both servers listen once the TCP port answers (gRPC binds first)
        except TimeoutError:
            print("[bench] the echo server did not start", file=sys.stderr)
            return 1
        rows = uvloop.run(measure(grpc_port, tcp_port, gaps, args.requests, args.warmup))
    finally:
        server.kill()
        server.wait()
    results = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "loop": "uvloop"},
        "payload_bytes": len(PAYLOAD),
        "rows": rows,
    }
    base = {r["transport"]: r["median_us"] for r in rows.values() if r["gap_ms"] == min(gaps) * 1000}
    least = f"idle {min(gaps) * 1000:g} ms" if min(gaps) else "back to back"
    write_report(
        args.output,
        results,
        "## Loopback round trip after idle (µs)",
        ["transport, idle before the call", "median", "p95", "mean", f"median − {least}"],
        [
            (name, r["median_us"], r["p95_us"], r["mean_us"], r["median_us"] - base[r["transport"]])
            for name, r in rows.items()
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
