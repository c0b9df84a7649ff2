"""Where the mesh's query latency goes: the same queries timed hop by hop, interleaved, on one index.

    make bench-hops                                   # 10k chunks, 200 queries, every path
    python bench/hops.py --per-document 100 --queries 100   # the 100k-chunk point

`make bench-retrieval` reports mesh / in-process for the whole pipeline; this splits the difference. The
index is the benchmark's scale index (`retrieval.scale_documents` + `retrieval.scale_insert`: 1,000
documents, `--per-document` chunks each, SciFact text with its real MiniLM vectors plus noise), read by the
unfiltered user. Every query goes down each path in turn, and the first path rotates from query to query
(`retrieval.timed`), so that drift of a shared machine hits every path alike:

| path | what it includes |
|---|---|
| `gateway` | POST /api/v1/search (aiohttp client): HTTP, auth, orchestration, then everything below |
| `gateway, httpx client` | the same request through httpx.AsyncClient: the difference is the client library's own cost |
| `retriever gRPC, embeds` | RetrieverService/Search with `embed_query`: the retriever calls the embedder while it reads permissions and runs BM25 |
| `retriever gRPC, vector given` | the same search with the query vector sent along: no embedder hop |
| `embedder gRPC` | EmbedderService/Embed for the query alone |
| `in-process` | the bench's in-process pipeline (`retrieval.InProcess`): the model and the retriever's Catalog + backend in this process |
| `in-process, vector given` | the same without the model call |
| `in-process model` | the model call alone (worker thread) |

So: gateway − retriever gRPC is the gateway's hop, retriever gRPC − in-process the retriever's and the
embedder's gRPC hops, embedder gRPC − in-process model the embedder's hop alone. Prints a Markdown table
(p50, p95, mean in ms, and each path's mean over in-process) and writes `bench/results/hops.json`.
Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench  # the benchmark's scale index, in-process pipeline and helpers

WARMUP = 5


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
    from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
    from ragmesh_common.identity import UserContext
    from ragmesh_common.server import insecure_channel
    from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
    from ragmesh_dev.ports import free_port
    from ragmesh_embedder.config import Settings as EmbedderSettings
    from ragmesh_embedder.model import EmbeddingModel
    from ragmesh_retriever.backends.base import SearchQuery

    data_dir = Path(args.data_dir).resolve()
    if not (data_dir / "beir_scifact").is_dir():
        raise SystemExit(f"missing {data_dir / 'beir_scifact'}")
    import torch

    torch.set_num_threads(args.torch_threads)
    threads = str(args.torch_threads)
    work = Path(tempfile.mkdtemp(prefix="ragmesh-hops-", dir=args.work_dir))
    stack = Stack(
        work,
        ports={n: free_port() for n in DEFAULT_PORTS},
        extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "0", "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads},
    )
    try:
        bench.log(f"starting the mesh in {work}")
        stack.start(timeout=420)
        model = EmbeddingModel(EmbedderSettings.defaults())
        texts, vectors = bench.embed_scifact(data_dir, model)
        bench.reset_index(stack)
        document_ids = bench.scale_documents(stack)
        await asyncio.to_thread(
            bench.scale_insert,
            stack,
            texts,
            vectors,
            document_ids,
            (0, args.per_document),
            np.random.default_rng(bench.SCALE_SEED),
        )
        qrels = bench.read_qrels(data_dir / "beir_scifact" / "qrels" / "test.tsv")
        questions = [
            q["text"] for q in bench.read_jsonl(data_dir / "beir_scifact" / "queries.jsonl") if q["_id"] in qrels
        ][: args.queries]
        vector_of = {q: model.encode([q], is_query=True)[0].tolist() for q in questions}
        # the direct gRPC calls carry tokens the mesh trusts
        user = UserContext("bench-all", "scale-all", ("scale-reader",)).signed_by(stack.internal_signer("bench"))
        top_k = bench.LATENCY_REQUEST["top_k"]
        token = stack.token(user.user_id, user.department, list(user.roles))
        gateway, gateway_httpx = (
            bench.Gateway(stack.gateway_url, token),
            bench.Gateway(stack.gateway_url, token, "httpx"),
        )
        inproc = await bench.InProcess.open(stack.app_dsn, model, stack.secret("rls_key"))
        try:
            async with (
                insecure_channel(stack.addr("retriever")) as rch,
                insecure_channel(stack.addr("embedder")) as ech,
            ):
                retriever = retriever_pb2_grpc.RetrieverServiceStub(rch)
                embedder = embedder_pb2_grpc.EmbedderServiceStub(ech)

                async def inproc_with_vector(q: str) -> Any:
                    query = SearchQuery(
                        text=q,
                        vector=vector_of[q],
                        top_k=top_k,
                        alpha=inproc.alpha,
                        candidates=max(inproc.candidates, top_k),
                    )
                    async with inproc.db.transaction(user) as conn:
                        accessible = await inproc.catalog.accessible_ids(conn, None)
                    return await inproc.backend.search(user, query, accessible)

                paths = {
                    "gateway": lambda q: gateway.search(q, bench.LATENCY_REQUEST),
                    "gateway, httpx client": lambda q: gateway_httpx.search(q, bench.LATENCY_REQUEST),
                    "retriever gRPC, embeds": lambda q: retriever.Search(
                        retriever_pb2.SearchRequest(query=q, embed_query=True, top_k=top_k),
                        metadata=user.metadata(),
                        timeout=30,
                    ),
                    "retriever gRPC, vector given": lambda q: retriever.Search(
                        retriever_pb2.SearchRequest(query=q, query_vector=vector_of[q], top_k=top_k),
                        metadata=user.metadata(),
                        timeout=30,
                    ),
                    "embedder gRPC": lambda q: embedder.Embed(
                        embedder_pb2.EmbedRequest(texts=[q], is_query=True), metadata=user.metadata(), timeout=30
                    ),
                    "in-process": lambda q: inproc.search(user, q, top_k),
                    "in-process, vector given": inproc_with_vector,
                    "in-process model": lambda q: asyncio.to_thread(model.encode, [q], is_query=True),
                }
                rounds = [
                    [lambda call=call, q=q: call(q) for call in paths.values()] for q in questions[:WARMUP] + questions
                ]
                times = dict(zip(paths, await bench.timed(rounds, WARMUP, progress="hops"), strict=True))
        finally:
            await gateway.close()
            await gateway_httpx.close()
            await inproc.close()
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.fmean(times["in-process"])
    results = {
        name: {
            "p50_ms": round(bench.percentile(v, 0.5), 1),
            "p95_ms": round(bench.percentile(v, 0.95), 1),
            "mean_ms": round(statistics.fmean(v), 1),
            "mean_over_in_process": round(statistics.fmean(v) / base, 3),
        }
        for name, v in times.items()
    }
    return {
        "chunks": bench.SCALE_DOCUMENTS * args.per_document,
        "queries": len(questions),
        "paths": results,
        "meta": {
            "cpu_cores": os.cpu_count(),
            "torch_threads": args.torch_threads,
            "load_average_1min_end": round(os.getloadavg()[0], 2),
        },
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"{report['chunks']:,} chunks, {report['queries']} queries, paths interleaved per query",
        "",
        "| path | p50 ms | p95 ms | mean ms | mean / in-process |",
        "|---|---|---|---|---|",
    ]
    for name, row in report["paths"].items():
        lines.append(
            f"| {name} | {row['p50_ms']} | {row['p95_ms']} | {row['mean_ms']} | {row['mean_over_in_process']} |"
        )
    return "\n".join(lines)


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description="ragmesh query latency hop by hop")
    parser.add_argument("--per-document", type=int, default=10, help="chunks per scale document (10 → 10k chunks)")
    parser.add_argument("--queries", type=int, default=200, help="SciFact test claims, in file order")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch intra-op threads (services and in-process)")
    parser.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
    parser.add_argument("--output", default=str(root / "bench" / "results" / "hops.json"))
    parser.add_argument("--work-dir", default=None, help="parent of the temporary mesh data folder")
    args = parser.parse_args()
    if args.per_document < 1 or args.queries <= WARMUP or args.torch_threads < 1:
        parser.error(f"--per-document and --torch-threads must be at least 1, --queries above {WARMUP}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()  # `kill` of the benchmark stops its engines and services too
    report = asyncio.run(measure(args))
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1) + "\n")
    print(markdown(report), flush=True)
    bench.log(f"wrote {output}")


if __name__ == "__main__":
    main()
