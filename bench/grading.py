"""Check that the relevance grade generalises: answerable questions kept, off-topic ones rejected.

    make bench-grading ARGS="[DATA_DIR] [--sample 300] [--cache vectors.npy] [-v]"   (DATA_DIR: ../shared/data)

In-process, on the SQuAD v1.1 dev paragraphs (2,067): each question retrieves 30 candidates as the retriever
does by default (BM25 and all-MiniLM-L6-v2 cosine, relative-score fusion with alpha 0.4), and the grader
(`ragmesh_gateway.grading`, default thresholds) grades them; an `ambiguous` set gets the corrective search
(keywords, alpha 0.3, 60 candidates) and is graded again, as in the gateway. Answerable: SQuAD questions
spread evenly over the file. Off-topic: the list below, written to be about nothing in those articles
(everyday, technical and pop-culture questions). Reported: the share graded `correct` (answered) per set,
and for answerable questions how often the gold paragraph is among the kept chunks.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from ragmesh.common.v1 import common_pb2
from ragmesh_gateway import grading
from ragmesh_gateway.grading import GradedQuery, Thresholds
from ragmesh_gateway.query.router import route

OFF_TOPIC = [
    "What is the capital of Mongolia?",
    "How do I reset my Outlook password?",
    "What is the recommended tire pressure for a mountain bike?",
    "How long should I boil an egg for a soft yolk?",
    "Who won the 2018 FIFA World Cup?",
    "What is the airspeed velocity of an unladen swallow?",
    "How do I configure a VPN on Windows 11?",
    "What is our company's parental leave policy?",
    "Which Pokémon evolves into Charizard?",
    "How many calories are in a banana?",
    "What is the syntax of a Python list comprehension?",
    "When does the cafeteria close on Fridays?",
    "Who directed the movie Inception?",
    "How do I file an expense report in SAP Concur?",
    "What is the best way to train a puppy to sit?",
    "How do I change a flat tyre on a Toyota Corolla?",
    "What is the Kubernetes default pod eviction timeout?",
    "What is the plot of the Harry Potter books?",
    "How do I make sourdough starter?",
    "What are the rules of pickleball?",
    "What is the exchange rate between the euro and the Japanese yen?",
    "Who is the lead singer of Coldplay?",
    "How much annual leave do part-time employees get?",
    "What does HTTP status code 418 mean?",
    "How do you knit a scarf for beginners?",
    "What is the tallest building in Dubai?",
    "How do I enable dark mode in Slack?",
    "What time zone is Auckland in?",
    "What are the side effects of ibuprofen?",
    "How do I book a meeting room in the Berlin office?",
    "Which keyboard shortcut takes a screenshot on a Mac?",
    "What is the price of a Tesla Model 3?",
    "How many players are on a rugby union team?",
    "What's the difference between latte and cappuccino?",
    "How do I renew my passport online?",
    "What is the boiling point of ethanol at sea level?",
    "Who painted the Girl with a Pearl Earring?",
    "How do I set up two-factor authentication on GitHub?",
    "What is the VAT rate in Ireland?",
    "What is the lyric of the chorus of Bohemian Rhapsody?",
]
_WORD = re.compile(r"\w+")
STOP = grading.STOP_WORDS
K1, B, ALPHA, CANDIDATES = 1.2, 0.75, 0.4, 30


class Index:
    def __init__(self, ids: list[str], titles: list[str], texts: list[str], vectors: np.ndarray) -> None:
        self.ids, self.titles, self.texts, self.vectors = ids, titles, texts, vectors
        self.docs = [
            Counter(w for w in _WORD.findall(f"{ti} {te}".lower()) if w not in STOP)
            for ti, te in zip(titles, texts, strict=True)
        ]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        self.df = Counter(w for d in self.docs for w in d)
        self.postings: dict[str, list[int]] = {}
        for i, d in enumerate(self.docs):
            for w in d:
                self.postings.setdefault(w, []).append(i)

    def bm25(self, query: str) -> np.ndarray:
        scores = np.zeros(len(self.docs))
        n, avg = len(self.docs), self.lengths.mean()
        for w in {w for w in _WORD.findall(query.lower()) if w not in STOP}:
            idf = math.log(1 + (n - self.df[w] + 0.5) / (self.df[w] + 0.5))
            for i in self.postings.get(w, []):
                tf = self.docs[i][w]
                scores[i] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.lengths[i] / avg))
        return scores

    def search(self, query: str, qvec: np.ndarray, alpha: float, k: int) -> list[common_pb2.ScoredChunk]:
        lexical, vector = self.bm25(query), self.vectors @ qvec
        lex_top = np.argsort(-lexical)[:k]
        lex_top = lex_top[lexical[lex_top] > 0]
        vec_top = np.argsort(-vector)[:k]
        pool = list(dict.fromkeys([*lex_top.tolist(), *vec_top.tolist()]))

        def norm(values: np.ndarray, top: np.ndarray) -> dict[int, float]:
            if len(top) == 0:
                return {}
            lo, hi = values[top].min(), values[top].max()
            return {int(i): (values[i] - lo) / (hi - lo) if hi > lo else 1.0 for i in top}

        ln, vn = norm(lexical, lex_top), norm(vector, vec_top)
        fused = {i: (1 - alpha) * ln.get(i, 0.0) + alpha * vn.get(i, 0.0) for i in pool}
        out = []
        for i in sorted(pool, key=lambda i: -fused[i])[:k]:
            out.append(
                common_pb2.ScoredChunk(
                    chunk=common_pb2.Chunk(chunk_id=self.ids[i], text=self.texts[i], title=self.titles[i]),
                    score=fused[i],
                    hybrid_score=fused[i],
                    lexical_score=float(lexical[i]),
                    vector_score=float(vector[i]),
                )
            )
        return out


def graded(index: Index, encode, question: str) -> tuple[grading.Grade, bool]:
    plan = route(question)
    queries = [GradedQuery.of(question, plan.entities)]
    results = index.search(question, encode(question), ALPHA, CANDIDATES)
    result = grading.grade(results, queries, have_vector=True, thresholds=Thresholds())
    corrective = False
    if result.grade == grading.AMBIGUOUS:
        corrective = True
        keywords = grading.keyword_query(queries[0])
        extra = index.search(keywords, encode(keywords), 0.3, 60)
        seen = {r.chunk.chunk_id for r in results}
        pool = results + [r for r in extra if r.chunk.chunk_id not in seen]
        result = grading.grade(pool, queries, have_vector=True, thresholds=Thresholds())
    return result, corrective


def main(argv: list[str]) -> None:
    from sentence_transformers import SentenceTransformer

    from ragmesh_embedder.config import default_model_path

    sample = int(argv[argv.index("--sample") + 1]) if "--sample" in argv else 300
    args = [
        a
        for i, a in enumerate(argv)
        if not a.startswith("-") and (i == 0 or argv[i - 1] not in ("--sample", "--cache"))
    ]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[2] / "shared" / "data"
    squad = root / "squad_v1.1_dev"
    corpus = [json.loads(line) for line in (squad / "corpus.jsonl").read_text().splitlines() if line.strip()]
    lines = [line for line in (squad / "queries.jsonl").read_text().splitlines() if line.strip()]
    questions = [json.loads(lines[i * len(lines) // sample]) for i in range(sample)]
    gold: dict[str, str] = {}
    for line in (squad / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, doc, *_ = line.split("\t")
        gold[qid] = doc
    model = SentenceTransformer(default_model_path(), device="cpu")
    cache = Path(argv[argv.index("--cache") + 1]) if "--cache" in argv else None  # corpus vectors, .npy
    if cache is not None and cache.exists():
        vectors = np.load(cache)
    else:
        vectors = model.encode(
            [f"{d.get('title', '')}\n{d['text']}" for d in corpus],
            batch_size=64,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        if cache is not None:
            np.save(cache, vectors)
    index = Index(
        [d["_id"] for d in corpus],
        [d.get("title", "") for d in corpus],
        [d["text"] for d in corpus],
        np.asarray(vectors),
    )

    def encode(text: str) -> np.ndarray:
        return np.asarray(model.encode([text], normalize_embeddings=True, show_progress_bar=False)[0])

    answered = gold_kept = corrected = 0
    for q in questions:
        result, corrective = graded(index, encode, q["text"])
        corrected += corrective
        if result.grade == grading.CORRECT:
            answered += 1
            gold_kept += gold.get(q["_id"]) in {k.chunk.chunk_id for k in result.kept}
    print(
        f"answerable (SQuAD dev, {len(questions)}): answered {answered} = {answered / len(questions):.3f}; "
        f"gold paragraph kept {gold_kept} = {gold_kept / len(questions):.3f}; corrective searches {corrected}"
    )
    rejected, corrected = 0, 0
    for question in OFF_TOPIC:
        result, corrective = graded(index, encode, question)
        corrected += corrective
        rejected += result.grade != grading.CORRECT
        if result.grade == grading.CORRECT and "-v" in argv:
            print("   answered off-topic:", question, result.reasons)
    print(
        f"off-topic ({len(OFF_TOPIC)}): rejected {rejected} = {rejected / len(OFF_TOPIC):.3f}; "
        f"corrective searches {corrected}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
