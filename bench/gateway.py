"""The gateway's own hop, without the noise of the model and the database: what the event loop, the token
cache and tracing cost per search.

    make bench-gateway                                # 1,000 searches per configuration
    python bench/gateway.py --requests 3000

Each configuration runs as its own pair of processes: the real gateway (`python -m ragmesh_gateway`, as
devstack starts it) and a stub retriever that answers RetrieverService/Search at once with 30 results of
realistic size (the retriever's gRPC server, traced as in production, minus the search). The client sends
POST /api/v1/search with aiohttp (`retrieval.Gateway`), one request at a time; the configurations take turns
request by request and the first one rotates (`retrieval.timed`), so drift of a shared machine hits all
alike. Spans are made as in production but not stored (no `RAG_TRACES_DSN`): `make bench-spans` measures
storing them. Rate limiting is off, as in the latency benchmarks (it is one Redis round trip).

Configurations (environment of both processes):

| configuration | environment |
|---|---|
| `asyncio, no token cache` | RAGMESH_EVENT_LOOP=asyncio, GATEWAY_TOKEN_CACHE_SIZE=0 (the gateway before stop 12) |
| `asyncio` | RAGMESH_EVENT_LOOP=asyncio |
| `uvloop, no token cache` | GATEWAY_TOKEN_CACHE_SIZE=0 |
| `uvloop` | the defaults |
| `uvloop, no tracing` | OTEL_SDK_DISABLED=true: what tracing costs the gateway and the retriever's server |

Prints a Markdown table (p50, p95, mean in ms; mean over the first configuration) and writes
`bench/results/gateway.json`. Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench  # Gateway client and the interleaved timing loop

CONFIGURATIONS: dict[str, dict[str, str]] = {
    "asyncio, no token cache": {"RAGMESH_EVENT_LOOP": "asyncio", "GATEWAY_TOKEN_CACHE_SIZE": "0"},
    "asyncio": {"RAGMESH_EVENT_LOOP": "asyncio"},
    "uvloop, no token cache": {"GATEWAY_TOKEN_CACHE_SIZE": "0"},
    "uvloop": {},
    "uvloop, no tracing": {"OTEL_SDK_DISABLED": "true"},
}
QUERY = "0-dimensional biomaterials show inductive properties."
WARMUP = 50


def serve_stub_retriever(port: int) -> None:
    """RetrieverService/Search answered at once (this file run with --stub-retriever PORT)."""
    from grpc import aio

    from ragmesh.common.v1 import common_pb2
    from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
    from ragmesh_common.server import run_event_loop
    from ragmesh_common.telemetry import setup_telemetry

    text = " ".join(["Biomaterials with nanoscale features induce bone formation in muscle tissue."] * 8)
    reply = retriever_pb2.SearchResponse(
        backend="pgvector",
        accessible_documents=1000,
        results=[
            common_pb2.ScoredChunk(
                chunk=common_pb2.Chunk(
                    chunk_id=f"c{i}",
                    document_id=f"d{i}",
                    text=text,
                    title="Osteoinduction",
                    section_path=["Abstract"],
                    page=1,
                ),
                score=0.5,
                hybrid_score=0.5,
                vector_score=0.6,
                lexical_score=4.0,
            )
            for i in range(30)
        ],
    )

    class Stub(retriever_pb2_grpc.RetrieverServiceServicer):
        async def Search(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's naming
            return reply

    async def main() -> None:
        setup_telemetry("retriever")
        server = aio.server()
        retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(Stub(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    run_event_loop(main())


async def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import aiohttp

    from ragmesh_cli.devtoken import mint
    from ragmesh_common.tokens import SIGNING_KEY_ENV, generate_keypair
    from ragmesh_dev.ports import free_port

    secret = "bench-gateway-secret-of-sufficient-length"
    signing_key = generate_keypair()[0]  # the gateway signs each hop's internal token (the stub does not check)
    processes: list[subprocess.Popen[bytes]] = []
    logs: list[Any] = []
    gateways: dict[str, bench.Gateway] = {}
    base = {k: v for k, v in os.environ.items() if k not in ("RAG_TRACES_DSN", "OTEL_SDK_DISABLED")}
    base.update({"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    try:
        for name, extra in CONFIGURATIONS.items():
            rport, gport = free_port(), free_port()
            env = {**base, **extra}
            slug = name.replace(", ", "-").replace(" ", "-")
            log = (work / f"{slug}.log").open("wb")
            logs.append(log)
            processes.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--stub-retriever", str(rport)],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            addr = f"127.0.0.1:{rport}"
            env.update(
                {
                    "GATEWAY_PORT": str(gport),
                    "GATEWAY_JWT_SECRET": secret,
                    "GATEWAY_RATE_LIMIT_PER_MINUTE": "0",
                    SIGNING_KEY_ENV: signing_key,
                    "GATEWAY_UPLOAD_DIR": str(work / "uploads"),
                    "REDIS_URL": "redis://127.0.0.1:1/0",
                    **{f"{s}_ADDR": addr for s in ("PARSER", "EMBEDDER", "RETRIEVER", "RERANKER", "GRAPH", "ANSWERER")},
                }
            )
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "ragmesh_gateway"], env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
            gateways[name] = bench.Gateway(f"http://127.0.0.1:{gport}", mint(secret, "alice", "eng", ["employee"]))
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            for name, gateway in gateways.items():  # every gateway up and its stub answering
                deadline = time.monotonic() + 120
                while True:
                    try:
                        async with session.get(f"{gateway.url}/healthz") as reply:
                            if reply.status == 200:
                                await gateway.search(QUERY, {"top_k": 10})
                                break
                    except (TimeoutError, aiohttp.ClientError, RuntimeError):
                        pass
                    if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                        raise RuntimeError(f"{name}: the gateway or its stub did not start (logs in {work})")
                    await asyncio.sleep(0.5)
        rounds = [
            [(lambda g=g: g.search(QUERY, {"top_k": 10})) for g in gateways.values()]
            for _ in range(args.requests + WARMUP)
        ]
        times = await bench.timed(rounds, warmup=WARMUP, progress="searches")
    finally:
        for gateway in gateways.values():
            await gateway.close()
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()
    first = statistics.mean(times[0])
    rows = {
        name: {
            "p50_ms": round(bench.percentile(ms, 0.5), 3),
            "p95_ms": round(bench.percentile(ms, 0.95), 3),
            "mean_ms": round(statistics.mean(ms), 3),
            "mean_over_first": round(statistics.mean(ms) / first, 3),
        }
        for name, ms in zip(gateways, times, strict=True)
    }
    return {
        "requests": args.requests,
        "configurations": rows,
        "meta": {"cpu_cores": os.cpu_count(), "load_average_1min_end": round(os.getloadavg()[0], 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="the gateway's own hop, by configuration")
    parser.add_argument("--requests", type=int, default=1000, help="searches per configuration")
    parser.add_argument("--output", default=str(Path(__file__).resolve().parent / "results" / "gateway.json"))
    parser.add_argument("--stub-retriever", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stub_retriever:
        serve_stub_retriever(args.stub_retriever)
        return
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()  # kill stops the gateways and stubs too
    with tempfile.TemporaryDirectory(prefix="ragmesh-gateway-bench-") as work:
        result = asyncio.run(measure(args, Path(work)))
    bench.write_report(
        args.output,
        result,
        f"{args.requests} searches per configuration, interleaved",
        ["configuration", "p50 ms", "p95 ms", "mean ms", "mean / first"],
        [
            (name, r["p50_ms"], r["p95_ms"], r["mean_ms"], r["mean_over_first"])
            for name, r in result["configurations"].items()
        ],
    )


if __name__ == "__main__":
    main()
