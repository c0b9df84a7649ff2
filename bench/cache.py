"""Semantic cache benchmark: hit rate on paraphrased questions, hit and miss latency side by side, and leaks.

    make bench-cache                       # 60 SQuAD questions
    python bench/cache.py --limit 10       # a quicker run

Starts the whole mesh with its embedded defaults (`ragmesh_dev.devstack.Stack`), uploads the gold paragraph of
each of a seeded sample of SQuAD v1.1 dev questions as its own Markdown document, then, through the HTTP API:

1. `bench-reader` (may read every document) asks each original question: a miss, answered by the model (the
   miss latency); a verified answer is stored.
2. `bench-reader` asks each paraphrase (rule-made, `paraphrase`): a hit when a close enough cached question
   has readable, unchanged sources (the hit latency); a miss is answered (and stored) as usual.
3. `bench-partial` (may read the even-numbered documents only) asks each paraphrase, and `bench-outsider`
   (may read none) too: a leak is any source, answer or cache hit from a document the asker cannot read.

Writes bench/results/cache.json (and prints it). Benchmarks are not tests: the numbers are as measured.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench  # read_jsonl, read_qrels, log

SEED = 20261125
READY_TIMEOUT_S = 1800.0
CHAT_TIMEOUT_S = 600.0
DEPARTMENT = "bench-cache"
OPTIONS = {"max_tokens": 32, "graph": False}
THRESHOLDS = (0.8, 0.85, 0.9, 0.95)

# Rule-made paraphrases: the first rule whose pattern matches rewrites the question; every paraphrase is also
# lower-cased without its question mark. The rules change wording, not meaning (a contraction, a synonym, a
# polite frame).
RULES: list[tuple[str, str]] = [
    (r"^What is ", "What's "),
    (r"^What was ", "What's "),
    (r"^Who is ", "Who's "),
    (r"^Which ", "What "),
    (r"^How many ", "What number of "),
    (r"^In what year ", "In which year "),
    (r"^What year ", "Which year "),
    (r"^Where ", "In what place "),
    (r"^When ", "At what time "),
]


def paraphrase(question: str) -> str:
    text = question.strip()
    for pattern, replacement in RULES:
        if re.match(pattern, text):
            text = re.sub(pattern, replacement, text, count=1)
            break
    else:
        text = "Can you tell me " + text[0].lower() + text[1:]
    return text.rstrip("?").strip().lower()


def sample(data_dir: Path, count: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Questions with one gold paragraph each, the paragraphs distinct."""
    folder = data_dir / "squad_v1.1_dev"
    passages = {p["_id"]: p for p in bench.read_jsonl(folder / "corpus.jsonl")}
    qrels = bench.read_qrels(folder / "qrels" / "test.tsv")
    pool = [q for q in bench.read_jsonl(folder / "queries.jsonl") if len(qrels.get(q["_id"], {})) == 1]
    random.Random(seed).shuffle(pool)
    chosen: list[dict[str, Any]] = []
    used: set[str] = set()
    for q in pool:
        passage = next(iter(qrels[q["_id"]]))
        if passage in used or passage not in passages:
            continue
        used.add(passage)
        chosen.append({**q, "passage": passage})
        if len(chosen) == count:
            break
    return chosen, passages


def p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
    from ragmesh_dev.ports import free_port

    questions, passages = sample(Path(args.eval_dir).resolve(), args.limit, args.seed)
    work = Path(tempfile.mkdtemp(prefix="ragmesh-cache-"))
    stack = Stack(work, ports={n: free_port() for n in DEFAULT_PORTS}, extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "0"})
    try:
        bench.log(f"starting the mesh in {work}")
        stack.start(timeout=600)
        users = {
            "owner": ("bench-owner", DEPARTMENT),
            "reader": ("bench-reader", DEPARTMENT),
            "partial": ("bench-partial", "bench-other"),
            "outsider": ("bench-outsider", "bench-none"),
        }
        tokens = {k: stack.token(name, dept) for k, (name, dept) in users.items()}
        tokens["admin"] = stack.token("bench-admin", "", ["admin"])
        with httpx.Client(base_url=stack.gateway_url, timeout=httpx.Timeout(CHAT_TIMEOUT_S, connect=10.0)) as client:
            return measure(client, tokens, questions, passages)
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


def measure(
    client: httpx.Client, tokens: dict[str, str], questions: list[dict[str, Any]], passages: dict[str, Any]
) -> dict[str, Any]:
    def headers(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[who]}"}

    readable: dict[str, set[str]] = {"reader": set(), "partial": set(), "outsider": set()}
    for i, q in enumerate(questions):
        passage = passages[q["passage"]]
        acl = {"departments": [DEPARTMENT], "users": ["bench-partial"] if i % 2 == 0 else []}
        content = f"# {passage['title']}\n\n{passage['text']}\n".encode()
        reply = client.post(
            "/api/v1/documents",
            headers=headers("owner"),
            files={"file": (f"cache-{i}.md", content, "text/markdown")},
            data={"acl": json.dumps(acl), "title": f"{passage['title']} ({i})"},
        )
        assert reply.status_code in (200, 202), reply.text
        q["document_id"] = reply.json()["document_id"]
        readable["reader"].add(q["document_id"])
        if i % 2 == 0:
            readable["partial"].add(q["document_id"])
    deadline = time.monotonic() + READY_TIMEOUT_S
    for q in questions:
        while client.get(f"/api/v1/documents/{q['document_id']}", headers=headers("owner")).json()["status"] not in (
            "ready",
            "failed",
        ):
            assert time.monotonic() < deadline, "ingestion timed out"
            time.sleep(1)
    bench.log(f"{len(questions)} documents ready")
    ours = {q["document_id"] for q in questions}
    leaks: list[str] = []

    def ask(who: str, question: str) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        reply = client.post("/api/v1/chat", headers=headers(who), json={"question": question, **OPTIONS})
        ms = (time.perf_counter() - started) * 1000
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        for source in body["sources"]:
            if source["document_id"] in ours and source["document_id"] not in readable[who]:
                leaks.append(f"{who} {question!r}: source {source['document_id']} (cache_hit={body['cache_hit']})")
        return body, ms

    def similarity(body: dict[str, Any]) -> float | None:
        stage = next((p for p in body["progress"] if p.get("stage") == "cache"), {})
        value = stage.get("similarity")
        return float(value) if value is not None else None

    rows: list[dict[str, Any]] = []
    for q in questions:
        first, miss_ms = ask("reader", q["text"])
        rows.append(
            {
                "question": q["text"],
                "paraphrase": paraphrase(q["text"]),
                "miss_ms": round(miss_ms, 1),
                "stored": first["outcome"] == "answer" and bool(first.get("verified")) and not first.get("withheld"),
                "first_hit": first["cache_hit"],
            }
        )
    bench.log("originals asked")
    for row in rows:
        body, ms = ask("reader", row["paraphrase"])
        row.update(hit=body["cache_hit"], paraphrase_ms=round(ms, 1), similarity=similarity(body))
    bench.log("paraphrases asked")
    partial_hits = outsider_hits = 0
    for row in rows:
        body, _ = ask("partial", row["paraphrase"])
        partial_hits += bool(body["cache_hit"])
        body, _ = ask("outsider", row["paraphrase"])
        outsider_hits += bool(body["cache_hit"])
    stats = client.get("/api/v1/admin/cache", headers=headers("admin")).json()

    stored = [r for r in rows if r["stored"]]
    hits = [r for r in rows if r["hit"]]
    miss_ms = [r["miss_ms"] for r in rows if not r["first_hit"]]
    hit_ms = [r["paraphrase_ms"] for r in hits]
    ratio = round(statistics.median(hit_ms) / statistics.median(miss_ms), 4) if hit_ms and miss_ms else None
    sims = [r["similarity"] for r in rows if r["similarity"] is not None]
    # what other thresholds would have served (the reader may read every source; the stored originals only)
    stored_sims = [r["similarity"] or 0.0 for r in stored if not r["first_hit"]]
    at = {
        str(t): round(sum(s >= t for s in stored_sims) / len(stored_sims), 4) if stored_sims else None
        for t in THRESHOLDS
    }
    return {
        "questions": len(rows),
        "paraphrases": "rule-made (bench/cache.py RULES): one wording rule, lower case, no question mark",
        "stored_originals": len(stored),
        "paraphrase_hits": len(hits),
        "hit_rate": round(len(hits) / len(rows), 4) if rows else None,
        "hit_rate_of_stored": round(sum(r["hit"] for r in stored) / len(stored), 4) if stored else None,
        "similarity_p50": round(statistics.median(sims), 4) if sims else None,
        "similarity_min": round(min(sims), 4) if sims else None,
        "hit_rate_of_stored_at_threshold": at,
        "miss_ms_p50": p50(miss_ms),
        "hit_ms_p50": p50(hit_ms),
        "hit_over_miss_p50": ratio,
        "partial_reader_hits": partial_hits,
        "outsider_hits": outsider_hits,
        "leaks": len(leaks),
        "leak_details": leaks,
        "admin_stats": stats,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=60, help="SQuAD questions (each with a paraphrase)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--eval-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "cache.json"))
    args = parser.parse_args()
    report = run(args)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    summary = {k: v for k, v in report.items() if k not in ("rows", "leak_details")}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
