"""Query-language benchmark (#29.5): German and French questions before and after query languages, and the English
sets unchanged.

    python bench/languages.py                          # about 10 minutes on 2 loaded cores
    python bench/languages.py --datasets multilingual  # the German/French set only

The retriever itself (build_service, the gRPC Search contract) over an embedded PostgreSQL + pgvector, with the
default embedder (all-MiniLM-L6-v2, English only) run in this process for the passages and the questions (given
as query_vector, so the retriever's alpha rules apply as in production). Each configuration is a retriever built
with other settings over the same database:

- before: RETRIEVER_QUERY_LANGUAGES empty and RETRIEVER_EMBEDDER_LANGUAGES=* (the behaviour before #29.5:
  a short or unclear query analysed in the default language, English; one alpha for every language);
- after: the defaults (short unclear queries searched in the close languages, alpha lowered for a language the
  embedder does not cover);
- after+hint: the defaults, each question sent with its language as the user's hint (Accept-Language: de).

Data: `bench/data/multilingual_qa.jsonl` (30 German and 8 French paragraphs written for this bench, 120 German and
32 French questions, many of them short, inflected differently from the text) mixed into the 2,067 English SQuAD
v1.1 dev paragraphs as distractors (one reader reads all of them: BM25 statistics over the mixed archive).
"short" = the questions the language detection cannot decide (fewer than 3 words or py3langid below 0.9): the
ones analysed as English before. English: SQuAD dev questions (every --squad-stride th, plus every question whose
search changes) over the SQuAD paragraphs, SciFact test claims over the SciFact abstracts (another reader).

Tuning (margin for BM25, uncovered alpha for hybrid) uses the even positions of the multilingual questions in file
order (`tune`); the odd positions (`held_out`) are reported for the chosen values. Results:
bench/results/languages.json. Benchmarks are not tests: no thresholds.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DIM = 384
MARGINS = (0.0, 0.2, 0.5, 0.8, 1.0)
UNCOVERED_ALPHAS = (0.0, 0.1, 0.2, 0.3, 0.4)


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    """nDCG@10 with binary gains (as pytrec_eval computes it for one judgement level)."""
    dcg = sum(1.0 / math.log2(rank + 2) for rank, doc in enumerate(ranked[:10]) if doc in relevant)
    idcg = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(relevant), 10)))
    return dcg / idcg if idcg else 0.0


class Archive:
    """An embedded PostgreSQL with the ragmesh schema and the retriever's documents indexed over gRPC."""

    def __init__(self, work: Path) -> None:
        from ragmesh_common.testing import local_signer
        from ragmesh_dev.engines.postgres import EmbeddedPostgres
        from ragmesh_dev.ports import free_port
        from ragmesh_retriever.migrate import apply_schema

        local_signer()
        os.environ.setdefault("RETRIEVER_RLS_KEY", secrets.token_hex(32))
        self.rls_key = os.environ["RETRIEVER_RLS_KEY"]
        self.server = EmbeddedPostgres(work / "postgres", free_port())
        self.server.start()
        password = secrets.token_urlsafe(12)
        apply_schema(self.server.owner_dsn(), "ragmesh_app", password, DIM, rls_key=self.rls_key)
        where = f"{self.server.host}:{self.server.port}/{self.server.database}"
        self.dsn = f"postgresql://ragmesh_app:{password}@{where}"

    def stop(self) -> None:
        self.server.stop()


class Retriever:
    """A retriever service with `overrides` on the archive's database, called over gRPC."""

    def __init__(self, archive: Archive, overrides: dict[str, Any]) -> None:
        from ragmesh_retriever.config import Settings
        from ragmesh_retriever.server import build_service

        settings = Settings.defaults(
            archive.dsn, rls_key=archive.rls_key, pool_size=8, statement_timeout_ms=120_000, **overrides
        )
        self.service = build_service(settings)
        self.channel: Any = None
        self.stub: Any = None

    async def __aenter__(self) -> Any:
        from ragmesh.retriever.v1 import retriever_pb2_grpc
        from ragmesh_common.server import insecure_channel

        port = await self.service.start()
        self.channel = insecure_channel(f"127.0.0.1:{port}")
        self.stub = retriever_pb2_grpc.RetrieverServiceStub(await self.channel.__aenter__())
        return self.stub

    async def __aexit__(self, *exc: object) -> None:
        await self.channel.__aexit__(None, None, None)
        await self.service.stop()


async def index(stub: Any, user: Any, docs: list[dict[str, Any]], vectors: Any) -> dict[str, str]:
    """Each doc (id, title, text) as one ready document of one paragraph chunk; document id → corpus id."""
    from ragmesh.common.v1 import common_pb2
    from ragmesh.retriever.v1 import retriever_pb2

    corpus_of: dict[str, str] = {}
    gate = asyncio.Semaphore(3)

    async def one(doc: dict[str, Any], vector: Any) -> None:
        async with gate:
            created = await stub.CreateOrGetDocument(
                retriever_pb2.CreateOrGetDocumentRequest(
                    title=doc["title"][:200] or doc["id"],
                    filename=f"{doc['id']}.md",
                    content_sha256=hashlib.sha256(f"{user.user_id}/{doc['id']}".encode()).hexdigest(),
                ),
                metadata=user.metadata(),
            )
            document_id = created.document.document_id
            chunk = common_pb2.Chunk(
                chunk_id=f"{document_id}:0",
                document_id=document_id,
                level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
                title=doc["title"],
                text=doc["text"],
                embedding=[float(x) for x in vector] if vector is not None else [],
            )
            await stub.IndexChunks(
                retriever_pb2.IndexChunksRequest(document_id=document_id, chunks=[chunk]), metadata=user.metadata()
            )
            await stub.UpdateDocumentStatus(
                retriever_pb2.UpdateDocumentStatusRequest(
                    document_id=document_id, status=common_pb2.DOCUMENT_STATUS_READY
                ),
                metadata=user.metadata(),
            )
            corpus_of[document_id] = doc["id"]

    await asyncio.gather(*[one(d, v) for d, v in zip(docs, vectors, strict=True)])
    return corpus_of


async def run(
    stub: Any,
    user: Any,
    queries: list[dict[str, Any]],
    corpus_of: dict[str, str],
    *,
    mode: str,
    hint: str = "",
) -> dict[str, float]:
    """nDCG@10 per query id: BM25 alone (alpha 0), the vector leg alone (alpha 1) or hybrid (the service's alpha,
    by the query's language); `hint` the user's language ("own": each question's language)."""
    from ragmesh.retriever.v1 import retriever_pb2

    gate = asyncio.Semaphore(4)
    scores: dict[str, float] = {}

    async def one(q: dict[str, Any]) -> None:
        request = retriever_pb2.SearchRequest(query=q["text"], top_k=10, query_vector=q["vector"])
        if mode != "hybrid":
            request.alpha = 0.0 if mode == "bm25" else 1.0
        if hint:
            request.language = q["lang"] if hint == "own" else hint
        async with gate:
            reply = await stub.Search(request, metadata=user.metadata())
        ranked = list(dict.fromkeys(corpus_of.get(r.chunk.document_id, "") for r in reply.results))
        scores[q["id"]] = ndcg10(ranked, q["relevant"])

    await asyncio.gather(*[one(q) for q in queries])
    return scores


def mean(scores: dict[str, float], ids: list[str]) -> float:
    return round(statistics.fmean(scores[i] for i in ids), 4) if ids else float("nan")


def groups(queries: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The subsets reported: per language, all and short; the tuning and held-out halves."""
    out: dict[str, list[str]] = {}
    for lang in sorted({q["lang"] for q in queries}):
        mine = [q for q in queries if q["lang"] == lang]
        out[f"{lang} all"] = [q["id"] for q in mine]
        out[f"{lang} short"] = [q["id"] for q in mine if q["short"]]
        for half, parity in (("tune", 0), ("held_out", 1)):
            out[f"{lang} all {half}"] = [q["id"] for q in mine if q["position"] % 2 == parity]
            out[f"{lang} short {half}"] = [q["id"] for q in mine if q["short"] and q["position"] % 2 == parity]
    return out


async def main_async(args: argparse.Namespace) -> int:
    from ragmesh_common.testing import user as signed_user
    from ragmesh_common.text.language import detect_language
    from ragmesh_embedder.config import Settings as EmbedderSettings
    from ragmesh_embedder.model import EmbeddingModel
    from ragmesh_retriever.config import ALPHA, LANGUAGE_MARGIN, UNCOVERED_ALPHA

    wanted = set(args.datasets.split(","))
    data = Path(args.data_dir)
    model = EmbeddingModel(EmbedderSettings.defaults())

    def encode(texts: list[str], is_query: bool) -> Any:
        """The model's vectors for `texts`, kept under --cache-dir by the texts' hash (a rerun does not embed again:
        2 loaded cores embed a few passages per second)."""
        import numpy as np

        key = hashlib.sha256(json.dumps([model.name, is_query, texts]).encode()).hexdigest()[:24]
        path = Path(args.cache_dir) / f"vectors-{key}.npy"
        if path.is_file():
            return np.load(path)
        vectors = model.encode(texts, is_query=is_query)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
        return vectors

    results: dict[str, Any] = {"notes": [], "configurations": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-lang-", dir=args.work_dir) as work:
        archive = Archive(Path(work))
        try:
            before = {"query_languages": "", "embedder_languages": "*"}
            loader = Retriever(archive, {})
            async with loader as stub:
                # the multilingual archive: German/French paragraphs among the English SQuAD ones
                squad_corpus = read_jsonl(data / "squad_v1.1_dev" / "corpus.jsonl")
                own = read_jsonl(ROOT / "bench" / "data" / "multilingual_qa.jsonl")
                docs = [{"id": d["id"], "title": d["title"], "text": d["text"]} for d in own] + [
                    {"id": d["_id"], "title": d.get("title", ""), "text": d["text"]} for d in squad_corpus
                ]
                log(f"embedding {len(docs)} passages (multilingual + SQuAD)")
                vectors = encode([f"{d['title']}\n{d['text']}" for d in docs], False)
                mixed = signed_user("bench-languages", "bench-languages", ())
                t0 = time.perf_counter()
                corpus_mixed = await index(stub, mixed, docs, vectors)
                log(f"indexed {len(docs)} in {time.perf_counter() - t0:.0f}s")
                scifact_user = signed_user("bench-scifact", "bench-scifact", ())
                corpus_scifact: dict[str, str] = {}
                if "scifact" in wanted:
                    # BM25 only (no vectors: embedding 5,183 abstracts takes most of an hour on 2 loaded cores);
                    # hybrid differs from before only for claims whose languages or alpha change (counted below)
                    sf = read_jsonl(data / "beir_scifact" / "corpus.jsonl")
                    sf_docs = [{"id": d["_id"], "title": d.get("title", ""), "text": d["text"]} for d in sf]
                    corpus_scifact = await index(stub, scifact_user, sf_docs, [None] * len(sf_docs))

            # the questions
            multilingual: list[dict[str, Any]] = []
            for d in own:
                for i, text in enumerate(d["questions"]):
                    multilingual.append(
                        {"id": f"{d['id']}q{i}", "text": text, "lang": d["lang"], "relevant": {d["id"]}}
                    )
            for position, q in enumerate(multilingual):
                q["position"] = position
                q["short"] = detect_language(q["text"], default="") == ""
            for q, v in zip(multilingual, encode([q["text"] for q in multilingual], True), strict=True):
                q["vector"] = [float(x) for x in v]
            english: dict[str, list[dict[str, Any]]] = {}
            from ragmesh_retriever.analysis import LanguagePolicy
            from ragmesh_retriever.config import Settings

            policy = LanguagePolicy.of(Settings.defaults(archive.dsn, rls_key=archive.rls_key))

            def changes(text: str) -> bool:
                """Whether the defaults search `text` otherwise than before: several languages, or a lower alpha."""
                choice = policy.choose(text)
                return choice.reason == "close" or policy.alpha(ALPHA, choice.languages[0]) != ALPHA

            if "squad" in wanted:
                squad_q = read_jsonl(data / "squad_v1.1_dev" / "queries.jsonl")
                qrels = read_qrels(data / "squad_v1.1_dev" / "qrels" / "test.tsv")
                changed = {q["_id"] for q in squad_q if changes(q["text"])}
                picked = [q for i, q in enumerate(squad_q) if i % args.squad_stride == 0 or q["_id"] in changed]
                english["squad"] = [
                    {
                        "id": q["_id"],
                        "text": q["text"],
                        "lang": "en",
                        "relevant": set(qrels[q["_id"]]),
                        "changed": q["_id"] in changed,
                    }
                    for q in picked
                    if q["_id"] in qrels
                ]
                results["notes"].append(
                    f"squad: every {args.squad_stride}th dev question plus the {len(changed)} whose search changes "
                    f"({len(english['squad'])} questions)"
                )
            if "scifact" in wanted:
                sf_q = read_jsonl(data / "beir_scifact" / "queries.jsonl")
                sf_qrels = read_qrels(data / "beir_scifact" / "qrels" / "test.tsv")
                english["scifact"] = [
                    {"id": q["_id"], "text": q["text"], "lang": "en", "relevant": set(sf_qrels[q["_id"]])}
                    for q in sf_q
                    if q["_id"] in sf_qrels
                ]
                sf_changed = [q["id"] for q in english["scifact"] if changes(q["text"])]
                results["scifact_changed"] = sf_changed
                results["notes"].append(
                    f"scifact: BM25 only (indexed without vectors); {len(sf_changed)} of the "
                    f"{len(english['scifact'])} test claims are searched in other languages or with another alpha "
                    "than before, so hybrid differs from before on those claims only"
                )
            for name_, queries in english.items():
                if name_ == "scifact":
                    for q in queries:
                        q["vector"] = []
                    continue
                for q, v in zip(queries, encode([q["text"] for q in queries], True), strict=True):
                    q["vector"] = [float(x) for x in v]

            subsets = groups(multilingual)
            results["questions"] = {name: len(ids) for name, ids in subsets.items()}

            async def measure(
                name: str, overrides: dict[str, Any], hint: bool = False, modes: tuple[str, ...] = ("bm25", "hybrid")
            ) -> dict[str, Any]:
                async with Retriever(archive, overrides) as stub:
                    out: dict[str, Any] = {"settings": overrides, "hint": hint}
                    for mode in modes:
                        scores = await run(
                            stub, mixed, multilingual, corpus_mixed, mode=mode, hint="own" if hint else ""
                        )
                        out[mode] = {subset: mean(scores, ids) for subset, ids in subsets.items()}
                        for dataset, queries in english.items():
                            if mode != "bm25" and dataset == "scifact":
                                continue  # indexed without vectors
                            reader = scifact_user if dataset == "scifact" else mixed
                            corpus = corpus_scifact if dataset == "scifact" else corpus_mixed
                            s = await run(stub, reader, queries, corpus, mode=mode)
                            out[mode][dataset] = mean(s, [q["id"] for q in queries])
                            if hint and dataset == "squad":  # a German user asking the English questions
                                s = await run(stub, reader, queries, corpus, mode=mode, hint="de")
                                out[mode]["squad (hint de)"] = mean(s, [q["id"] for q in queries])
                log(f"{name}: " + json.dumps({m: {k: v for k, v in out[m].items() if "half" not in k} for m in modes}))
                results["configurations"][name] = out
                return out

            await measure("before", before, modes=("bm25", "hybrid", "vector"))
            await measure("before+hint", before, hint=True)
            # tuning on the even positions: the margin (BM25, no hint), then the uncovered alpha (hybrid, hint)
            english_backup = dict(english)
            english.clear()
            sweep: dict[str, Any] = {"margin": {}, "uncovered_alpha": {}}
            for margin in MARGINS:
                out = await measure(f"sweep margin {margin}", {"language_margin": margin, "embedder_languages": "*"})
                sweep["margin"][str(margin)] = {k: out["bm25"][f"{k} tune"] for k in ("de short", "de all", "fr all")}
            for alpha in UNCOVERED_ALPHAS:
                out = await measure(f"sweep uncovered_alpha {alpha}", {"uncovered_alpha": alpha}, hint=True)
                sweep["uncovered_alpha"][str(alpha)] = {
                    k: out["hybrid"][f"{k} tune"] for k in ("de short", "de all", "fr all")
                }
            results["sweep_tune_half"] = sweep
            # the best German nDCG@10 on the tuning half (all, then short questions); a tie keeps the default
            defaults = {"margin": str(LANGUAGE_MARGIN), "uncovered_alpha": str(UNCOVERED_ALPHA)}
            results["chosen_on_tune"] = {
                key: max(values, key=lambda v, k=key: (values[v]["de all"], values[v]["de short"], v == defaults[k]))
                for key, values in sweep.items()
            }
            english.update(english_backup)
            await measure("after", {})
            await measure("after+hint", {}, hint=True)
            results["defaults"] = {"language_margin": LANGUAGE_MARGIN, "uncovered_alpha": UNCOVERED_ALPHA}
        finally:
            archive.stop()
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["notes"].append(
        "tune = even positions of the multilingual questions in file order, held_out = odd; the defaults "
        "(language_margin, uncovered_alpha) were chosen on tune; report held_out"
    )
    Path(args.output).write_text(json.dumps(results, indent=2, ensure_ascii=False, default=sorted) + "\n")
    log(f"wrote {args.output} in {results['seconds']}s")
    return 0


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            if line.strip():
                query_id, corpus_id, score = line.rstrip("\n").split("\t")
                if int(score) > 0:
                    qrels.setdefault(query_id, {})[corpus_id] = int(score)
    return qrels


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = argparse.ArgumentParser(description="ragmesh query-language benchmark (German/French, English unchanged)")
    parser.add_argument("--datasets", default="multilingual,squad,scifact", help="multilingual plus squad, scifact")
    parser.add_argument("--squad-stride", type=int, default=10)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "languages.json"))
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "ragmesh-bench-languages"))
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
