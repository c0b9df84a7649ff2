"""Stop-gap measurement of the graph leg's core at N chunks without the mesh (issue #27), for a machine that cannot
hold the whole mesh: one ArcadeDB (Bolt), the scale graph of `retrieval.py --graph-latency` (the HotpotQA-100
corpus extracted by the graph service's spaCy extractor, chunk n = passage n mod 994, copies renamed by
`retrieval.replica`, written with GraphStore.replace_document), then for each HotpotQA-100 question the
store's neighbourhood read and the PageRank (`ppr.chunk_scores`), with the default caps, with them lifted, and
with no relation edges read (GRAPH_PPR_MAX_RELATIONS=0: mention edges only).
No catalogue: every document is readable (the permission check, a CheckDocumentAccess call per new document
set, is not in these numbers), no retriever search beside it. `--graph-latency` is the full measurement.

    python bench/graph_leg_local.py --chunks 10000 --queries 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench


async def main(args: argparse.Namespace) -> None:
    from ragmesh_dev.engines.arcadedb import EmbeddedArcadeDB
    from ragmesh_dev.ports import free_port
    from ragmesh_graph.config import Settings
    from ragmesh_graph.extract import query_keys
    from ragmesh_graph.nlp import Extractor
    from ragmesh_graph.ppr import chunk_scores
    from ragmesh_graph.store import GraphStore

    data_dir = Path(args.data_dir)
    defaults = {name: f.default for name, f in Settings.model_fields.items()}
    extractor = Extractor(defaults["spacy_model"], defaults["max_entities_per_chunk"])
    started = time.perf_counter()
    pool = bench.graph_pool(data_dir, extractor)
    extraction = time.perf_counter() - started
    frequency = bench.pool_entity_frequency(pool)
    work = Path(tempfile.mkdtemp(prefix="ragmesh-graphleg-"))
    db = EmbeddedArcadeDB(work / "arcadedb", free_port(), free_port(), "graphleg-password", heap="1g")
    db.start()
    out: dict[str, object] = {"chunks": args.chunks, "pool_passages": len(pool), "extraction_s": round(extraction, 1)}
    try:
        store = GraphStore.connect(db.uri, db.user, db.password, db.database, 120.0)
        store.attempts = 20
        await store.warmup()
        documents = [f"doc{d:04d}" for d in range(1000)]
        started = time.perf_counter()
        rows = await bench.graph_load(store, pool, frequency, documents, (0, args.chunks // 1000))
        out["load_s"] = round(time.perf_counter() - started, 1)
        out["rows"] = rows

        async def readable(ids: set[str]) -> set[str]:
            return ids

        questions = [q["text"] for q in bench.read_jsonl(data_dir / "hotpotqa_train100" / "queries.jsonl")]
        questions = questions[: args.queries]
        for label, caps in (
            ("capped", {"max_chunks": defaults["ppr_max_chunks"], "max_relations": defaults["ppr_max_relations"]}),
            ("uncapped", {"max_chunks": 10**9, "max_relations": 10**9}),
            ("no relations read", {"max_chunks": defaults["ppr_max_chunks"], "max_relations": 0}),
        ):
            fetch, rank, walked, relations, cut = [], [], [], [], 0
            for q in questions:
                keys = query_keys(q, extractor.question_entities(q))
                t0 = time.perf_counter()
                graph = await store.neighbourhood(
                    keys, readable, hops=defaults["ppr_hops"], hub_chunks=defaults["ppr_hub_chunks"], **caps
                )
                t1 = time.perf_counter()
                chunk_scores(graph, damping=defaults["ppr_damping"], relation_weight=defaults["ppr_relation_weight"])
                t2 = time.perf_counter()
                fetch.append((t1 - t0) * 1000)
                rank.append((t2 - t1) * 1000)
                walked.append(len({m.uid for m in graph.mentions}))
                relations.append(len(graph.relations))
                cut += bool(graph.capped)
            out[label] = {
                "subgraph fetch (Bolt)": bench.summary_ms(fetch),
                "pagerank": bench.summary_ms(rank),
                "chunks walked p50/max": [bench.percentile([float(w) for w in walked], 0.5), max(walked)],
                "relations p50/max": [bench.percentile([float(r) for r in relations], 0.5), max(relations)],
                "capped queries": cut,
            }
            print(label, json.dumps(out[label]), flush=True)
        await store.close()
    finally:
        db.stop()
        shutil.rmtree(work, ignore_errors=True)
    Path(args.output).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
    parser.add_argument("--output", default=str(root / "bench" / "results" / "graph-leg-local.json"))
    asyncio.run(main(parser.parse_args()))
