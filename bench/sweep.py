"""Retriever settings sweep: quality of service settings that need a restart (heading weight, candidate
pool, ...) side by side, on the same index.

    make bench-sweep                                       # heading weights 1, 1.5, 2, 3 on all three sets
    python bench/sweep.py --datasets hotpotqa \\
        --variant 'w1={"bm25_heading_weight": 1}' --variant 'w3={"bm25_heading_weight": 3}' \\
        --config 'rsf={}' --config 'dbsf={"fusion": "FUSION_TYPE_DISTRIBUTION_BASED"}'

Each corpus is indexed once, exactly as `bench/retrieval.py` indexes it (one summary chunk and one
paragraph chunk per document), into an embedded PostgreSQL through the retriever's own gRPC service
(`IndexChunks`); then, per variant (retriever `Settings` overrides), a retriever service is started on
that index and every configuration (`SearchRequest` fields, as JSON) is
evaluated with the queries' vectors sent along. Vectors come from the offline MiniLM model in-process and
are cached in `--cache-dir` (.data/bench-cache), so a sweep re-runs in minutes. No gateway, no latency:
use `make bench-retrieval` for the mesh. Writes bench/results/sweep.json (dataset → variant →
configuration → metric → value) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench  # the benchmark's datasets, metrics and chunk texts

RLS_KEY = secrets.token_hex(32)  # the throwaway database's identity-assertion key
DEFAULT_VARIANTS = {f"heading_weight={w:g}": {"bm25_heading_weight": w} for w in (1.0, 1.5, 2.0, 3.0)}
DEFAULT_CONFIGS: dict[str, dict[str, Any]] = {
    "bm25": {"alpha": 0.0},
    "hybrid": {},
    "hybrid+dbsf": {"fusion": "FUSION_TYPE_DISTRIBUTION_BASED"},
}


def named_json(values: list[str] | None, default: dict[str, dict[str, Any]], what: str) -> dict[str, dict[str, Any]]:
    if not values:
        return default
    out: dict[str, dict[str, Any]] = {}
    for item in values:
        name, sep, body = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--{what} wants NAME=JSON, got {item!r}")
        try:
            parsed = json.loads(body)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"--{what} {name}: {exc}") from exc
        if not isinstance(parsed, dict):
            raise SystemExit(f"--{what} {name}: a JSON object is needed")
        out[name] = parsed
    return out


def vectors(cache: Path, name: str, corpus: list[dict[str, Any]], queries: list[dict[str, Any]]) -> Any:
    """(summary, paragraph, query) vectors of a dataset, embedded once and cached."""
    import numpy as np

    path = cache / f"{name}-{len(corpus)}-{len(queries)}.npz"
    if path.exists():
        z = np.load(path)
        return z["summary"], z["paragraph"], z["query"]
    from ragmesh_embedder.config import Settings as EmbedderSettings
    from ragmesh_embedder.model import EmbeddingModel

    model = EmbeddingModel(EmbedderSettings.defaults())
    started = time.perf_counter()
    bench.log(f"{name}: embedding {2 * len(corpus)} passages and {len(queries)} queries (cached in {path})")
    summary = model.encode([bench.summary_text(d.get("title", ""), d["text"]) for d in corpus], is_query=False)
    paragraph = model.encode([bench.passage_embed_text(d.get("title", ""), d["text"]) for d in corpus], is_query=False)
    query = model.encode([q["text"] for q in queries], is_query=True)
    bench.log(f"{name}: embedded in {time.perf_counter() - started:.0f}s")
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, summary=summary, paragraph=paragraph, query=query)
    return summary, paragraph, query


async def index(stub: Any, user: Any, corpus: list[dict[str, Any]], summary: Any, paragraph: Any) -> dict[str, str]:
    from ragmesh.common.v1 import common_pb2
    from ragmesh.retriever.v1 import retriever_pb2

    corpus_of_document: dict[str, str] = {}
    gate = asyncio.Semaphore(8)

    async def one(i: int, d: dict[str, Any]) -> None:
        async with gate:
            request = retriever_pb2.CreateOrGetDocumentRequest(
                title=d.get("title") or d["_id"], filename=f"{d['_id']}.txt", content_sha256=bench.content_sha256(d)
            )
            doc = (await stub.CreateOrGetDocument(request, metadata=user.metadata(), timeout=60)).document
            did = doc.document_id
            top = common_pb2.Chunk(
                chunk_id=f"{did}:0",
                document_id=did,
                level=common_pb2.CHUNK_LEVEL_DOCUMENT,
                ordinal=0,
                text=bench.summary_text(d.get("title", ""), d["text"]),
                title=d.get("title", ""),
                kind=common_pb2.CHUNK_KIND_SUMMARY,
                embedding=summary[i].tolist(),
            )
            para = common_pb2.Chunk(
                chunk_id=f"{did}:1",
                document_id=did,
                parent_id=top.chunk_id,
                level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
                ordinal=1,
                text=d["text"],
                title=d.get("title", ""),
                kind=common_pb2.CHUNK_KIND_PARAGRAPH,
                embedding=paragraph[i].tolist(),
            )
            await stub.IndexChunks(
                retriever_pb2.IndexChunksRequest(document_id=did, chunks=[top, para]),
                metadata=user.metadata(),
                timeout=120,
            )
            await stub.UpdateDocumentStatus(
                retriever_pb2.UpdateDocumentStatusRequest(document_id=did, status=common_pb2.DOCUMENT_STATUS_READY),
                metadata=user.metadata(),
                timeout=60,
            )
            corpus_of_document[did] = d["_id"]

    await asyncio.gather(*[one(i, d) for i, d in enumerate(corpus)])
    return corpus_of_document


async def evaluate(
    stub: Any,
    user: Any,
    dataset: bench.Dataset,
    queries: list[dict[str, Any]],
    qvectors: Any,
    qrels: dict[str, dict[str, int]],
    corpus_of_document: dict[str, str],
    fields: dict[str, Any],
) -> dict[str, float]:
    from google.protobuf import json_format

    from ragmesh.retriever.v1 import retriever_pb2

    fields = {"top_k": 100, **fields}
    gate = asyncio.Semaphore(bench.QUERY_CONCURRENCY)
    scores: dict[str, list[float]] = {m: [] for m in dataset.metrics}

    async def one(j: int, query: dict[str, Any]) -> None:
        request = json_format.ParseDict(fields, retriever_pb2.SearchRequest())
        request.query = query["text"]
        request.query_vector[:] = qvectors[j].tolist()
        async with gate:
            reply = await stub.Search(request, metadata=user.metadata(), timeout=60)
        ranked = list(dict.fromkeys(corpus_of_document[r.chunk.document_id] for r in reply.results))
        for m in dataset.metrics:
            scores[m].append(bench.metric(m, ranked, qrels[query["_id"]]))

    await asyncio.gather(*[one(j, q) for j, q in enumerate(queries)])
    return {m: round(statistics.fmean(v), 4) for m, v in scores.items()}


async def main_async(args: argparse.Namespace) -> int:
    import psycopg

    from ragmesh.retriever.v1 import retriever_pb2_grpc
    from ragmesh_common.server import insecure_channel
    from ragmesh_common.testing import user as local_user
    from ragmesh_dev.engines.postgres import EmbeddedPostgres
    from ragmesh_dev.ports import free_port
    from ragmesh_retriever.config import Settings
    from ragmesh_retriever.migrate import apply_schema
    from ragmesh_retriever.server import build_service

    variants = named_json(args.variant, DEFAULT_VARIANTS, "variant")
    configs = named_json(args.config, DEFAULT_CONFIGS, "config")
    for name, overrides in variants.items():
        try:
            Settings.defaults("postgresql://check", rls_key=RLS_KEY, **overrides)
        except TypeError as exc:
            raise SystemExit(f"--variant {name}: {exc}") from exc
    data_dir = Path(args.data_dir).resolve()
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    unknown = [n for n in names if n not in bench.DATASETS]
    if unknown:
        raise SystemExit(f"unknown dataset(s) {unknown}; choose from {', '.join(bench.DATASETS)}")
    work = Path(tempfile.mkdtemp(prefix="ragmesh-sweep-"))
    server = EmbeddedPostgres(work / "postgres", free_port())
    server.start()
    user = local_user("bench-sweep", "bench")  # a local key pair: the in-process retrievers trust it
    results: dict[str, Any] = {}
    try:
        for name in names:
            dataset = bench.DATASETS[name]
            folder = data_dir / dataset.folder
            corpus = bench.read_jsonl(folder / "corpus.jsonl")
            qrels = bench.read_qrels(folder / "qrels" / "test.tsv")
            queries = [q for q in bench.read_jsonl(folder / "queries.jsonl") if q["_id"] in qrels]
            if name == "squad":
                queries = queries[:: args.squad_stride]
            summary, paragraph, qvectors = vectors(Path(args.cache_dir), name, corpus, queries)
            database = f"sweep_{name}"
            with psycopg.connect(server.owner_dsn(), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{database}"')
            apply_schema(
                server.owner_dsn().rsplit("/", 1)[0] + f"/{database}", "ragmesh_app", "sweep-pw", 384, rls_key=RLS_KEY
            )
            dsn = f"postgresql://ragmesh_app:sweep-pw@{server.host}:{server.port}/{database}"
            corpus_of_document: dict[str, str] = {}
            for v, (variant, overrides) in enumerate(variants.items()):
                service = build_service(Settings.defaults(dsn, rls_key=RLS_KEY, **overrides))
                port = await service.start()
                try:
                    async with insecure_channel(f"127.0.0.1:{port}") as channel:
                        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
                        if v == 0:
                            started = time.perf_counter()
                            corpus_of_document = await index(stub, user, corpus, summary, paragraph)
                            bench.log(
                                f"{name}: indexed {len(corpus)} documents in {time.perf_counter() - started:.0f}s"
                            )
                        for config, fields in configs.items():
                            scores = await evaluate(
                                stub, user, dataset, queries, qvectors, qrels, corpus_of_document, fields
                            )
                            results.setdefault(name, {}).setdefault(variant, {})[config] = scores
                            bench.log(
                                f"{name} {variant} {config}: " + ", ".join(f"{m} {s:.4f}" for m, s in scores.items())
                            )
                finally:
                    await service.stop()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["meta"] = {"variants": variants, "configs": configs, "squad_stride": args.squad_stride}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    lines = ["| dataset | variant | configuration | metric | value |", "|---|---|---|---|---|"]
    for name in names:
        for variant, by_config in results.get(name, {}).items():
            for config, scores in by_config.items():
                lines += [f"| {name} | {variant} | {config} | {m} | {s:.4f} |" for m, s in scores.items()]
    print("\n".join(lines))
    return 0


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description="ragmesh retriever settings sweep (quality only)")
    parser.add_argument("--datasets", default="hotpotqa,squad,scifact")
    parser.add_argument("--variant", action="append", help="NAME=JSON of retriever Settings overrides (repeatable)")
    parser.add_argument("--config", action="append", help="NAME=JSON of SearchRequest fields (repeatable)")
    parser.add_argument("--squad-stride", type=int, default=10, help="evaluate every Nth SQuAD question")
    parser.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
    parser.add_argument("--cache-dir", default=str(root / ".data" / "bench-cache"))
    parser.add_argument("--output", default=str(root / "bench" / "results" / "sweep.json"))
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()  # `kill` of the benchmark stops its engines and services too
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
