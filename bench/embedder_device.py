"""The embedder service on each device side by side: SciFact dense retrieval quality and gRPC throughput.

    python bench/embedder_device.py --data ../shared/data --devices cpu,auto,cuda:fp32 --out result.json

Each configuration starts the real embedder service (`build_service`, the settings the service reads from
EMBEDDER_*) on loopback and embeds SciFact's corpus (title and text) and its 300 test queries through gRPC,
`--call-size` texts per call and `--concurrency` calls in flight, as the ingestion workers and the gateway do.
Reported per configuration: the device and precision the settings resolved (`auto` is the production default:
cuda where torch sees a GPU, else the CPU; fp32 unless EMBEDDER_FP16 or a `:fp16` suffix), passages per second, nDCG@10 of cosine ranking, and
against the first configuration: the cosine between the two vectors of each text (min and mean) and the overlap
of each query's top 10. A GPU is the point of the comparison; on a machine without one, `auto` is the CPU again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval import ndcg_at, read_jsonl, read_qrels


def parse_configuration(name: str, model: str) -> dict[str, Any]:
    """`cpu`, `auto`, `cuda`, `cuda:fp32`, `cuda:fp16:128` (device, precision, batch size): the settings a service
    with those EMBEDDER_* would get."""
    device, _, rest = name.partition(":")
    precision, _, batch = rest.partition(":")
    overrides: dict[str, Any] = {"port": 0, "device": device or "auto"}
    if batch:
        overrides["batch_size"] = int(batch)
    if model:
        overrides["model"] = model
    if precision:
        if precision not in ("fp16", "fp32"):
            raise SystemExit(f"precision must be fp16 or fp32, got {precision!r} in {name!r}")
        overrides["fp16"] = precision == "fp16"
    return overrides


async def embed_all(stub: Any, texts: list[str], *, is_query: bool, call_size: int, concurrency: int) -> np.ndarray:
    from ragmesh.embedder.v1 import embedder_pb2

    calls = [texts[i : i + call_size] for i in range(0, len(texts), call_size)]
    results: list[np.ndarray | None] = [None] * len(calls)
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        async with gate:
            reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=calls[index], is_query=is_query), timeout=600)
            results[index] = np.array([v.values for v in reply.vectors], dtype=np.float32)

    await asyncio.gather(*(one(i) for i in range(len(calls))))
    return np.concatenate([r for r in results if r is not None])


async def run_configuration(
    overrides: dict[str, Any], passages: list[str], queries: list[str], call_size: int, concurrency: int
) -> dict[str, Any]:
    from ragmesh.embedder.v1 import embedder_pb2_grpc
    from ragmesh_common.context import UserContext
    from ragmesh_common.testing import channel_as, local_signer
    from ragmesh_embedder.config import Settings
    from ragmesh_embedder.server import build_service

    local_signer()  # the service trusts this process's key pair, the client signs with it
    settings = Settings(**overrides)
    service, _ = build_service(settings)
    started = time.perf_counter()
    port = await service.start()  # loads the model and warms it up
    load_seconds = time.perf_counter() - started
    try:
        async with channel_as(f"127.0.0.1:{port}", UserContext("bench", "eng", ("employee",))) as channel:
            stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
            await embed_all(
                stub, passages[: call_size * concurrency], is_query=False, call_size=call_size, concurrency=concurrency
            )  # the first calls on a GPU also build its kernels
            started = time.perf_counter()
            passage_vectors = await embed_all(
                stub, passages, is_query=False, call_size=call_size, concurrency=concurrency
            )
            passage_seconds = time.perf_counter() - started
            query_seconds = []
            for _ in range(2):  # the first pass meets each query length for the first time; the second is warm
                started = time.perf_counter()
                query_vectors = await embed_all(stub, queries, is_query=True, call_size=1, concurrency=concurrency)
                query_seconds.append(time.perf_counter() - started)
    finally:
        await service.stop()
    return {
        "device": settings.device,
        "fp16": settings.fp16,
        "batch_size": settings.batch_size,
        "load_seconds": round(load_seconds, 2),
        "passages_per_second": round(len(passages) / passage_seconds, 1),
        "queries_per_second_one_per_call": round(len(queries) / query_seconds[0], 1),
        "queries_per_second_one_per_call_warm": round(len(queries) / query_seconds[1], 1),
        "passages": passage_vectors,
        "queries": query_vectors,
    }


def top_k(queries: np.ndarray, passages: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ passages.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--devices", default="cpu,auto", help="configurations, comma-separated (see the docstring)")
    parser.add_argument("--model", default="", help="a model folder (default: the service's own default)")
    parser.add_argument("--passages", type=int, default=0, help="the first N corpus passages (0: all)")
    parser.add_argument("--call-size", type=int, default=32, help="texts per Embed call of the passages")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    folder = args.data / "beir_scifact"
    corpus = read_jsonl(folder / "corpus.jsonl")
    if args.passages:
        corpus = corpus[: args.passages]
    ids = [str(doc["_id"]) for doc in corpus]
    passages = [f"{doc.get('title', '')} {doc['text']}".strip() for doc in corpus]
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    known = set(ids)
    qrels = {q: {d: g for d, g in rel.items() if d in known} for q, rel in qrels.items()}
    qrels = {q: rel for q, rel in qrels.items() if rel}
    texts = {str(q["_id"]): q["text"] for q in read_jsonl(folder / "queries.jsonl")}
    query_ids = sorted(qrels, key=int)
    queries = [texts[q] for q in query_ids]

    import torch

    report: dict[str, Any] = {
        "benchmark": "bench/embedder_device.py",
        "sample": f"SciFact: {len(passages)} corpus passages, {len(queries)} test queries",
        "call_size": args.call_size,
        "concurrency": args.concurrency,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "configurations": {},
    }
    first: dict[str, Any] | None = None
    for name in args.devices.split(","):
        result = asyncio.run(
            run_configuration(
                parse_configuration(name, args.model), passages, queries, args.call_size, args.concurrency
            )
        )
        ranked = top_k(result["queries"], result["passages"], 10)
        entry = {k: v for k, v in result.items() if k not in ("passages", "queries")}
        entry["ndcg@10"] = round(
            float(
                np.mean(
                    [ndcg_at([ids[i] for i in row], qrels[q], 10) for q, row in zip(query_ids, ranked, strict=True)]
                )
            ),
            4,
        )
        if first is None:
            first = {"name": name, "ranked": ranked, **result}
        else:
            cosines = np.concatenate(
                [
                    np.sum(result["passages"] * first["passages"], axis=1),
                    np.sum(result["queries"] * first["queries"], axis=1),
                ]
            )
            overlap = [len(set(a) & set(b)) / 10 for a, b in zip(ranked, first["ranked"], strict=True)]
            entry[f"against {first['name']}"] = {
                "cosine_min": round(float(cosines.min()), 6),
                "cosine_mean": round(float(cosines.mean()), 6),
                "top10_overlap_mean": round(float(np.mean(overlap)), 4),
                "top1_same": round(float(np.mean(ranked[:, 0] == first["ranked"][:, 0])), 4),
                "speedup": round(entry["passages_per_second"] / first["passages_per_second"], 2),
            }
        report["configurations"][name] = entry
        print(name, json.dumps(entry), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
