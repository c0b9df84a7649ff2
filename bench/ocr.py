"""OCR bench: known text (SQuAD paragraphs) rendered to scanned pages, read back by the parser's OCR, measured.

- character error rate (CER): edit distance between the paragraph and the OCR'd text over the paragraph's length
  (whitespace collapsed, NFKC), micro-averaged, overall and per resolution;
- pages per second of the parser's image path (`DocumentParser.parse` of a PNG: decode, OCR, layout, blocks) in
  this process, one page at a time;
- retrieval on the scanned copy vs the text version: the SQuAD dev corpus (2,067 paragraphs) where the sampled
  paragraphs are replaced by their OCR'd text, queried with the questions whose answer paragraph is sampled;
  nDCG@10 of BM25, of the embedder's MiniLM vectors and of their fusion (relative-score, the retriever's default
  alpha 0.4 on the vector leg), scanned / text. In-process legs, not the mesh: the ratio isolates what OCR changes.

Pages are A4 at 150, 200 or 300 dpi (in turn), with `--noise` of the pixels set to random grey, a light blur and a
rotation drawn from +-`--max-rotate` degrees.

    .venv/bin/python bench/ocr.py                      # 60 pages, writes bench/results/ocr.json
    .venv/bin/python bench/ocr.py --pages 10 --skip-retrieval
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "squad_v1.1_dev"
_TOKEN = re.compile(r"\w+")


def normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insert, delete, substitute: 1 each), row by row."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def load_squad(data: Path) -> tuple[dict[str, dict[str, str]], dict[str, str], dict[str, str]]:
    corpus = {}
    with (data / "corpus.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            corpus[row["_id"]] = row
    queries = {}
    with (data / "queries.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            queries[row["_id"]] = row["text"]
    qrels: dict[str, str] = {}
    with (data / "qrels" / "test.tsv").open() as f:
        next(f)
        for line in f:
            qid, doc, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels[qid] = doc
    return corpus, queries, qrels


# -- retrieval legs ----------------------------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class Bm25:
    """Okapi BM25 (k1 1.2, b 0.75) over a fixed corpus."""

    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.terms = [Counter(tokens(d)) for d in docs]
        self.lengths = np.array([sum(t.values()) for t in self.terms], dtype=float)
        self.avg = float(self.lengths.mean())
        df: Counter[str] = Counter()
        for t in self.terms:
            df.update(t.keys())
        n = len(docs)
        self.idf = {term: math.log(1 + (n - c + 0.5) / (c + 0.5)) for term, c in df.items()}

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.terms))
        q = set(tokens(query))
        for i, tf in enumerate(self.terms):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            out[i] = sum(self.idf[w] * tf[w] * (self.k1 + 1) / (tf[w] + norm) for w in q if w in tf)
        return out


def minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


def ndcg_at_10(scores: np.ndarray, relevant: int) -> float:
    top = np.argsort(-scores, kind="stable")[:10]
    hits = np.nonzero(top == relevant)[0]
    return 1.0 / math.log2(hits[0] + 2) if len(hits) else 0.0


def retrieval(
    corpus_ids: list[str],
    texts: list[str],
    vectors: np.ndarray,
    questions: list[tuple[str, int]],
    query_vectors: np.ndarray,
    alpha: float,
) -> dict[str, float]:
    bm25 = Bm25(texts)
    legs: dict[str, list[float]] = {"bm25": [], "vector": [], "hybrid": []}
    for (question, relevant), qv in zip(questions, query_vectors, strict=True):
        lexical = bm25.scores(question)
        dense = vectors @ qv
        legs["bm25"].append(ndcg_at_10(lexical, relevant))
        legs["vector"].append(ndcg_at_10(dense, relevant))
        legs["hybrid"].append(ndcg_at_10(alpha * minmax(dense) + (1 - alpha) * minmax(lexical), relevant))
    return {leg: round(statistics.fmean(values), 4) for leg, values in legs.items()}


# -- main ----------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=60, help="SQuAD paragraphs rendered, one page each")
    parser.add_argument("--dpi", default="150,200,300", help="resolutions, used in turn")
    parser.add_argument("--noise", type=float, default=0.004, help="share of pixels set to random grey")
    parser.add_argument("--max-rotate", type=float, default=1.5, help="rotation drawn from +- this, degrees")
    parser.add_argument("--ocr-threads", type=int, default=1, help="onnxruntime threads (PARSER_OCR_THREADS)")
    parser.add_argument("--alpha", type=float, default=0.4, help="vector weight of the fused leg")
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--data-dir", type=Path, default=DATA)
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "ocr.json")
    args = parser.parse_args()

    from ragmesh_dev import scans
    from ragmesh_parser.converter import DocumentParser, OcrSettings

    corpus, queries, qrels = load_squad(args.data_dir)
    answered = {doc for doc in qrels.values()}
    candidates = [doc for doc in corpus if doc in answered]
    rng = random.Random(args.seed)
    sample = sorted(rng.sample(candidates, min(args.pages, len(candidates))), key=candidates.index)
    dpis = [int(d) for d in args.dpi.split(",")]

    converter = DocumentParser(None, 600, OcrSettings(threads=args.ocr_threads))
    started = time.perf_counter()
    converter.warmup()
    warmup = time.perf_counter() - started

    ocr_text: dict[str, str] = {}
    per_dpi: dict[int, list[tuple[int, int]]] = {d: [] for d in dpis}
    pages: list[dict[str, Any]] = []
    parse_seconds = 0.0
    for index, doc in enumerate(sample):
        dpi = dpis[index % len(dpis)]
        rotate = rng.uniform(-args.max_rotate, args.max_rotate)
        text = corpus[doc]["text"]
        page = scans.render_page([text], dpi=dpi, noise=args.noise, rotate=rotate, seed=index)
        png = scans.image_bytes(page, "PNG", dpi=dpi)
        began = time.perf_counter()
        try:
            parsed = converter.parse(f"{doc}.png", png, "png")
            read = " ".join(block.text for block in parsed.blocks)
        except ValueError as exc:  # no text found: every character is an error
            read = ""
            print(f"  {doc}: {exc}", file=sys.stderr)
        seconds = time.perf_counter() - began
        parse_seconds += seconds
        reference, hypothesis = normalise(text), normalise(read)
        errors = edit_distance(reference, hypothesis)
        per_dpi[dpi].append((errors, len(reference)))
        ocr_text[doc] = read
        pages.append(
            {
                "id": doc,
                "dpi": dpi,
                "rotate": round(rotate, 2),
                "cer": round(errors / len(reference), 4),
                "seconds": round(seconds, 2),
            }
        )
        print(
            f"[{index + 1}/{len(sample)}] {doc} dpi {dpi} rot {rotate:+.2f}: CER {errors / len(reference):.4f} ({seconds:.1f}s)"
        )

    total_errors = sum(e for rows in per_dpi.values() for e, _ in rows)
    total_chars = sum(n for rows in per_dpi.values() for _, n in rows)
    result: dict[str, Any] = {
        "setup": {
            "pages": len(sample),
            "dpi": dpis,
            "noise": args.noise,
            "max_rotate_degrees": args.max_rotate,
            "ocr_threads": args.ocr_threads,
            "seed": args.seed,
            "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "warmup_seconds": round(warmup, 1),
        },
        "cer": round(total_errors / total_chars, 4),
        "cer_by_dpi": {str(d): round(sum(e for e, _ in r) / sum(n for _, n in r), 4) for d, r in per_dpi.items() if r},
        "cer_median_page": round(statistics.median(p["cer"] for p in pages), 4),
        "pages_per_second": round(len(sample) / parse_seconds, 3),
        "seconds_per_page_median": round(statistics.median(p["seconds"] for p in pages), 2),
        "pages": pages,
    }
    print(f"CER {result['cer']} (by dpi {result['cer_by_dpi']}), {result['pages_per_second']} pages/s")

    if not args.skip_retrieval:
        from ragmesh_embedder.config import Settings as EmbedderSettings
        from ragmesh_embedder.model import EmbeddingModel

        model = EmbeddingModel(EmbedderSettings())
        ids = list(corpus)
        position = {doc: i for i, doc in enumerate(ids)}
        text_docs = [f"{corpus[d]['title']}\n{corpus[d]['text']}" for d in ids]
        scan_docs = [
            f"{corpus[d]['title']}\n{ocr_text[d]}" if d in ocr_text else text_docs[i] for i, d in enumerate(ids)
        ]
        began = time.perf_counter()
        text_vectors = np.concatenate(
            [model.encode(text_docs[i : i + 64], is_query=False) for i in range(0, len(ids), 64)]
        )
        scan_vectors = text_vectors.copy()
        sampled = [position[d] for d in sample]
        scan_vectors[sampled] = model.encode([scan_docs[i] for i in sampled], is_query=False)
        questions = [(queries[q], position[d]) for q, d in qrels.items() if d in ocr_text and q in queries]
        query_vectors = model.encode([q for q, _ in questions], is_query=True)
        text_scores = retrieval(ids, text_docs, text_vectors, questions, query_vectors, args.alpha)
        scan_scores = retrieval(ids, scan_docs, scan_vectors, questions, query_vectors, args.alpha)
        result["retrieval"] = {
            "corpus": len(ids),
            "scanned_paragraphs": len(sample),
            "questions": len(questions),
            "seconds": round(time.perf_counter() - began, 1),
            "ndcg@10_text": text_scores,
            "ndcg@10_scan": scan_scores,
            "ratio": {leg: round(scan_scores[leg] / text_scores[leg], 4) for leg in text_scores if text_scores[leg]},
        }
        print(f"nDCG@10 text {text_scores}, scan {scan_scores}, ratio {result['retrieval']['ratio']}")

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
