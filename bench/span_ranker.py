"""Train the answerer's learned span ranking (`ragmesh_answerer.span_model`) on SQuAD's tuning half.

    python bench/span_ranker.py                       # build the candidates, fit, report, write span_model.py
    python bench/span_ranker.py --questions 1500 --dry-run

The extractive short answer is a span of the sources (`relation.Reader.candidates`); which span, and whether to
answer at all, was decided by hand-set weights. This fits them instead, in the way the SQuAD paper's logistic
regression reader did, on questions of SQuAD v1.1 dev's tuning half only (the split of bench/answer.py: sha256
of the id, even first byte); the reporting half's questions are never read.

For each question, sources are retrieved as a chat would get them: the top `--sources` paragraphs of the whole
SQuAD corpus by BM25 (title + text); for a share of questions (`--unanswerable`) the paragraph that answers is
left out of the corpus first, so the sources are near-topic and nothing in them is right (SQuAD 2.0-style). The
reader's candidates of the asked type are featurised (`relation.span_features`) and labelled against the gold
answers.
- **Ranking**: a softmax over each question's candidates (a listwise logistic regression, L2), fitted on the
  questions that have an exact-match candidate.
- **Answer or withhold**: a logistic regression on the top candidate (its logit, softmax share, margin over the
  best different answer, its coverage) predicting that the answer is right (token F1 >= 0.5) or at least its
  sentence states a gold answer (not false-grounded); the threshold `--max-false-grounded` picks the lowest
  confidence whose false-grounded share over answered stays at or below that target on the validation third.
The tuning half is split by id again: two thirds fit, one third validates (reported); the written model is
refitted on all of it with the chosen L2 and threshold.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/answer.py's scoring

from answer import F1_WRONG, contains_gold, exact_match, half, token_f1  # noqa: E402

from ragmesh_answerer import relation  # noqa: E402
from ragmesh_answerer.config import Settings  # noqa: E402
from ragmesh_common.text.questions import AnswerType, Question  # noqa: E402
from ragmesh_common.text.words import STOP_WORDS, words  # noqa: E402

MODEL_FILE = ROOT / "services" / "answerer" / "src" / "ragmesh_answerer" / "span_model.py"


# ---------------------------------------------------------------------- data


def load_squad(data: Path) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    corpus = {}
    for raw in (data / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(raw)
        corpus[row["_id"]] = row
    queries = [json.loads(raw) for raw in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    qrels = {}
    for line in (data / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, pid, _ = line.split("\t")
        qrels[qid] = pid
    return corpus, queries, qrels


class BM25:
    """Plain BM25 (k1 0.9, b 0.4) over title + text: retrieval as a chat's sources, without the mesh."""

    def __init__(self, corpus: dict[str, dict[str, Any]]) -> None:
        self.ids = list(corpus)
        self.postings: dict[str, dict[int, int]] = collections.defaultdict(dict)
        self.lengths = []
        for n, pid in enumerate(self.ids):
            terms = _terms(f"{corpus[pid]['title']} {corpus[pid]['text']}")
            self.lengths.append(len(terms))
            for term, tf in collections.Counter(terms).items():
                self.postings[term][n] = tf
        self.avgdl = sum(self.lengths) / len(self.lengths)

    def top(self, query: str, k: int, exclude: str | None = None) -> list[str]:
        scores: dict[int, float] = collections.defaultdict(float)
        n_docs = len(self.ids)
        for term in set(_terms(query)):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (n_docs - len(posting) + 0.5) / (len(posting) + 0.5))
            for doc, tf in posting.items():
                scores[doc] += idf * tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * self.lengths[doc] / self.avgdl))
        ranked = sorted(scores, key=lambda d: -scores[d])
        return [self.ids[d] for d in ranked if self.ids[d] != exclude][:k]


def _terms(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOP_WORDS]


def _side(qid: str) -> str:
    """Within the tuning half: two thirds fit, one third validates."""
    return "validate" if hashlib.sha256(f"ranker:{qid}".encode()).digest()[0] % 3 == 0 else "fit"


def build(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per question: its candidates' features and labels."""
    corpus, queries, qrels = load_squad(Path(args.eval_dir) / "squad_v1.1_dev")
    tuning = [q for q in queries if half(q["_id"]) == "tuning" and q["_id"] in qrels]
    random.Random(args.seed).shuffle(tuning)
    index = BM25(corpus)
    relation.CACHE_SENTENCES = 1_000_000
    reader = relation.Reader(relation.load_model(args.spacy_model))
    rng = random.Random(args.seed + 1)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for q in tuning:
        if len(rows) >= args.questions:
            break
        question = Question.parse(q["text"])
        if question.options or question.answer_type is AnswerType.YES_NO:
            continue  # decided by `choose` / never extracted
        golds = list(q["answers"])
        unanswerable = rng.random() < args.unanswerable
        pids = index.top(q["text"], args.sources, exclude=qrels[q["_id"]] if unanswerable else None)
        sources = [(corpus[p]["text"], corpus[p]["title"]) for p in pids]
        sentences = reader.sentences(sources)
        spans = [c for c in reader.candidates(question, sentences, learned=True) if c.typed]
        pool = relation.Pool.of(spans)
        cands = []
        for span in spans:
            em = 0.0 if unanswerable else max(exact_match(span.text, g) for g in golds)
            f1 = 0.0 if unanswerable else max(token_f1(span.text, g) for g in golds)
            grounded = not unanswerable and (f1 >= F1_WRONG or contains_gold(span.sentence.text, golds))
            cands.append(
                {
                    "features": pool.features(question, span),
                    "em": em,
                    "f1": f1,
                    "grounded": grounded,
                    "norm": relation._norm(span.text),
                    "sentence": span.sentence.text,
                    "legacy": [-span.score],
                }
            )
        rows.append(
            {
                "id": q["_id"],
                "side": _side(q["_id"]),
                "unanswerable": unanswerable,
                "kind": question.answer_type.value,
                "candidates": cands,
                "by_score": _index_of(reader.extract_by_score(question, sentences), spans),
            }
        )
        if len(rows) % 250 == 0:
            print(f"  {len(rows)} questions, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return rows


def _index_of(chosen: relation.Span | None, spans: list[relation.Span]) -> int | None:
    """Where the hand-set decision's span is among the candidates (None: it withheld)."""
    if chosen is None:
        return None
    where = (chosen.sentence, chosen.start, chosen.end)
    found = next((i for i, s in enumerate(spans) if (s.sentence, s.start, s.end) == where), None)
    if found is None:
        raise RuntimeError(f"the hand-set answer {chosen.text!r} is no candidate of the learned ranking")
    return found


# ---------------------------------------------------------------------- fitting


def design(rows: list[dict[str, Any]]) -> tuple[list[str], list[np.ndarray]]:
    names = sorted({name for row in rows for c in row["candidates"] for name in c["features"]})
    position = {n: i for i, n in enumerate(names)}
    matrices = []
    for row in rows:
        x = np.zeros((len(row["candidates"]), len(names)))
        for i, c in enumerate(row["candidates"]):
            for name, value in c["features"].items():
                x[i, position[name]] = value
        matrices.append(x)
    return names, matrices


def fit_ranking(xs: list[np.ndarray], ys: list[np.ndarray], l2: float, steps: int = 400) -> np.ndarray:
    """Listwise softmax regression: maximise the log of the probability mass on each question's right spans."""
    dim = xs[0].shape[1]
    w = np.zeros(dim)
    m, v = np.zeros(dim), np.zeros(dim)
    x_all = np.vstack(xs)
    y_all = np.concatenate(ys)
    bounds = np.cumsum([0] + [len(x) for x in xs])
    group = np.repeat(np.arange(len(xs)), [len(x) for x in xs])
    for t in range(1, steps + 1):
        logits = x_all @ w
        top = np.maximum.reduceat(logits, bounds[:-1])
        e = np.exp(logits - top[group])
        z = np.add.reduceat(e, bounds[:-1])
        p = e / z[group]
        ez = np.add.reduceat(e * y_all, bounds[:-1])
        q = e * y_all / ez[group]  # the posterior over the right spans
        grad = x_all.T @ (p - q) / len(xs) + l2 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 2000) -> np.ndarray:
    x1 = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x1.shape[1])
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, steps + 1):
        p = 1 / (1 + np.exp(-(x1 @ w)))
        grad = x1.T @ (p - y) / len(y) + l2 * np.r_[w[:-1], 0.0]
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w


def top_of(row: dict[str, Any], logits: np.ndarray) -> tuple[int, dict[str, float]]:
    """The chosen candidate and the features the answer-or-withhold model reads (`relation.abstain_features`)."""
    best = int(np.argmax(logits))
    return best, relation.abstain_features(
        AnswerType(row["kind"]),
        [float(v) for v in logits],
        [c["norm"] for c in row["candidates"]],
        best,
        row["candidates"][best]["features"],
    )


def evaluate(rows: list[dict[str, Any]], decisions: list[tuple[int, bool] | None]) -> dict[str, Any]:
    """Answered, false-grounded over answered, EM / F1 over the answerable questions."""
    answered = wrong = 0
    em = f1 = 0.0
    answerable = sum(not r["unanswerable"] for r in rows)
    for row, decision in zip(rows, decisions, strict=True):
        if decision is None or not decision[1]:
            continue
        c = row["candidates"][decision[0]]
        answered += 1
        wrong += not c["grounded"]
        em += c["em"]
        f1 += c["f1"]
    return {
        "questions": len(rows),
        "answered_rate": round(answered / len(rows), 4),
        "false_grounded_over_answered": round(wrong / answered, 4) if answered else None,
        "exact_match_over_answerable": round(em / answerable, 4),
        "f1_over_answerable": round(f1 / answerable, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="fit the answerer's span ranking on SQuAD's tuning half")
    parser.add_argument("--questions", type=int, default=3000, help="tuning-half questions to build")
    parser.add_argument("--sources", type=int, default=5, help="paragraphs per question (a chat's top_k)")
    parser.add_argument("--unanswerable", type=float, default=0.2, help="share with the answering paragraph left out")
    parser.add_argument("--max-false-grounded", type=float, default=0.08, help="validation target for the threshold")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--eval-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache", default=None, help="keep the built candidates here (JSON) and reuse them")
    parser.add_argument("--dry-run", action="store_true", help="report only; do not write span_model.py")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "span-ranker.json"), help="the report")
    parser.add_argument(
        "--spacy-model", default=Settings.model_fields["spacy_model"].default, help="the answerer's default"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    cache = Path(args.cache) if args.cache else None
    if cache is not None and cache.exists():
        rows = json.loads(cache.read_text(encoding="utf-8"))
    else:
        rows = build(args)
        if cache is not None:
            cache.write_text(json.dumps(rows), encoding="utf-8")
    with_candidates = [r for r in rows if r["candidates"]]
    names, xs = design(with_candidates)
    by_id = {r["id"]: i for i, r in enumerate(with_candidates)}
    report: dict[str, Any] = {"questions": len(rows), "built_seconds": round(time.perf_counter() - started, 1)}

    def ranking_set(side: str | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        picked = [
            (xs[by_id[r["id"]]], np.array([c["em"] for c in r["candidates"]]))
            for r in with_candidates
            if (side is None or r["side"] == side) and any(c["em"] for c in r["candidates"])
        ]
        return [p[0] for p in picked], [p[1] for p in picked]

    def decide(w: np.ndarray, subset: list[dict[str, Any]]) -> list[tuple[int, dict[str, float]] | None]:
        out: list[tuple[int, dict[str, float]] | None] = []
        for r in subset:
            if not r["candidates"]:
                out.append(None)
                continue
            out.append(top_of(r, xs[by_id[r["id"]]] @ w))
        return out

    validate = [r for r in rows if r["side"] == "validate"]
    fit_rows = [r for r in rows if r["side"] == "fit"]
    legacy = [
        (int(np.argmin([c["legacy"][0] for c in r["candidates"]])), True) if r["candidates"] else None for r in validate
    ]
    report["validate_legacy_order_always_answer"] = evaluate(validate, legacy)
    report["validate_legacy_extract"] = evaluate(
        validate, [(r["by_score"], True) if r["by_score"] is not None else None for r in validate]
    )
    best_l2, best_top1 = 0.0, -1.0
    for l2 in (1e-4, 1e-3, 1e-2):
        w = fit_ranking(*ranking_set("fit"), l2=l2)
        chosen = decide(w, validate)
        top1 = evaluate(validate, [(c[0], True) if c else None for c in chosen])
        report[f"validate_ranking_l2={l2}_always_answer"] = top1
        if top1["exact_match_over_answerable"] > best_top1:
            best_l2, best_top1 = l2, top1["exact_match_over_answerable"]
    w = fit_ranking(*ranking_set("fit"), l2=best_l2)

    abstain_names: list[str] = []

    def abstain_set(subset: list[dict[str, Any]], w: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
        feats, labels, chosen = [], [], []
        decided = decide(w, subset)
        if not abstain_names:
            abstain_names.extend(sorted({n for d in decided if d is not None for n in d[1]}))
        for r, d in zip(subset, decided, strict=True):
            if d is None:
                continue
            feats.append([d[1].get(n, 0.0) for n in abstain_names])
            labels.append(float(r["candidates"][d[0]]["grounded"]))
            chosen.append(d[0])
        return np.array(feats), np.array(labels), chosen

    xa, ya, _ = abstain_set(fit_rows, w)
    wa = fit_logistic(xa, ya, l2=1e-3)
    xv, _, chosen_v = abstain_set(validate, w)
    confidence = 1 / (1 + np.exp(-(np.hstack([xv, np.ones((len(xv), 1))]) @ wa)))
    curve = {}
    for t in np.round(np.arange(0.3, 0.96, 0.05), 2):
        decisions: list[tuple[int, bool] | None] = []
        k = 0
        for r in validate:
            if not r["candidates"]:
                decisions.append(None)
                continue
            decisions.append((chosen_v[k], bool(confidence[k] >= t)))
            k += 1
        result = evaluate(validate, decisions)
        curve[str(t)] = result
    # the lowest threshold meeting the target (the most answers), else 0.5
    meeting = [
        float(t) for t, r in curve.items() if (r["false_grounded_over_answered"] or 1) <= args.max_false_grounded
    ]
    threshold = min(meeting) if meeting else 0.5
    report["validate_curve"] = curve
    report["chosen"] = {"l2": best_l2, "threshold": threshold}
    report["command"] = " ".join(sys.argv)
    print(json.dumps(report, indent=1))
    Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.dry_run:
        return
    # refit on the whole tuning half with the chosen settings
    w = fit_ranking(*ranking_set(None), l2=best_l2)
    xa, ya, _ = abstain_set(rows, w)
    wa = fit_logistic(xa, ya, l2=1e-3)
    write_model(names, w, abstain_names, wa, threshold, args, len(rows))


def write_model(
    names: list[str],
    w: np.ndarray,
    abstain_names: list[str],
    wa: np.ndarray,
    threshold: float,
    args: Any,
    n: int,
) -> None:
    ranking = {name: round(float(v), 5) for name, v in zip(names, w, strict=True) if abs(v) >= 1e-5}
    abstain = {name: round(float(v), 5) for name, v in zip((*abstain_names, "bias"), wa, strict=True) if abs(v) >= 1e-5}
    lines = [
        '"""The learned span ranking of `relation` (written by bench/span_ranker.py; do not edit by hand).',
        "",
        f"Fitted on {n} questions of SQuAD v1.1 dev's tuning half (sources: the top {args.sources} paragraphs by BM25;",
        f"{args.unanswerable:.0%} with the answering paragraph left out), seed {args.seed}.",
        '"""',
        "",
        "# the logit of a candidate: the sum of weight x feature (`relation.span_features`)",
        "RANKING: dict[str, float] = {",
        *(f'    "{k}": {v!r},' for k, v in sorted(ranking.items())),
        "}",
        "# the answer-or-withhold model on the top candidate (`relation.abstain_features`; logistic, with its bias)",
        "ABSTAIN: dict[str, float] = {",
        *(f'    "{k}": {v!r},' for k, v in abstain.items()),
        "}",
        f"# answer when the model's confidence is at least this (false-grounded over answered <= {args.max_false_grounded}",
        "# on the validation third of the tuning half)",
        f"MIN_CONFIDENCE = {threshold!r}",
        "",
    ]
    MODEL_FILE.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {MODEL_FILE.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
