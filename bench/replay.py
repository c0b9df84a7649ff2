"""Replay the answerer's extractive decision, offline, on the sources a live run retrieved. No model, no mesh.

    python bench/answer.py --hotpot 0 --sources-out /tmp/sources.jsonl   # once: a live run that keeps its sources
    python bench/replay.py /tmp/sources.jsonl                              # then, in seconds, after each change
    python bench/replay.py /tmp/sources.jsonl --set ANSWER_MIN_COVERAGE=0.7
    python bench/replay.py /tmp/sources.jsonl --typos 1 [--no-respell]     # one slip per question, read or not

Whether a chat is answered, and with which sentence, is decided by `Reader.extract` over the sources the
retriever gave (`ragmesh_answerer.answering`: no span → the answer is withheld; a span → its evidence sentence
is what the user is shown when the model does not state it). A live run of `bench/answer.py` takes minutes; this
reruns only that decision on the same sources, so a change to `ragmesh_answerer.relation` or to the text
library is measured in seconds. `--set NAME=VALUE` overrides one of `relation`'s constants for the run
(`--set READING=0`: without the span reader, as `ANSWERER_SPAN_READER=false`). The question's slips are read
with the sources' spelling, as the answerer does (`ragmesh_common.text.spelling`; `--no-respell`: as written).
`--typos SEED` first puts one slip into a key word of each question (`with_typo`: a letter dropped, doubled,
changed or swapped, the first letter not spared): how much of the answerer's decision survives users' typing.
The sources stay those the live run retrieved for the question as written, so what retrieval itself loses to the
slip is not counted.

Per set (and chat mode, when the live run asked in several) and half (the same split by question id as the live
bench):
- answered rate;
- false-grounded over answered: span F1 below 0.5 and an evidence sentence without a gold answer (the live
  bench's rule with the evidence sentence standing for the shown answer; a lower bound, as the model's own
  sentence, when it verifies, is shown instead and may not hold the gold);
- `wrong_span_over_answered`: the span itself wrong (the upper bound);
- exact match and F1 of the span over all questions;
- `agrees_with_live`: how often the replay answers exactly when the live run did (below 1.0: the live run's model
  or gate decided differently, or the code changed since the sources were recorded).
Off- and near-topic questions have no answer in the index: every answer is wrong.

A multi-step answer (a row with agentic `steps`) is checked, as live, on its last step's question with the
bridge filled in (`ragmesh_gateway.pipeline.agentic.resolved_question` over the recorded steps), and no span
naming a bridge the walk searched with is its answer (`used_bridges`; `--keep-bridges` replays without that
rule); rows of an older file without `steps` from an agentic run are left out. Tune on the tuning half only; the reporting half is
reported.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for src in (ROOT / "libs").glob("*/src"):
    sys.path.insert(0, str(src))
for src in (ROOT / "services").glob("*/src"):
    sys.path.insert(0, str(src))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from answer import F1_WRONG, contains_gold, exact_match, token_f1, with_typo  # noqa: E402

from ragmesh_answerer import relation  # noqa: E402
from ragmesh_answerer.answering import read_as_sources  # noqa: E402
from ragmesh_answerer.config import Settings  # noqa: E402
from ragmesh_answerer.prompting import Source  # noqa: E402
from ragmesh_answerer.span_reader import SpanReader  # noqa: E402
from ragmesh_common.text import questions  # noqa: E402
from ragmesh_common.text.questions import Question  # noqa: E402
from ragmesh_gateway.pipeline.agentic import resolved_question, used_bridges  # noqa: E402

UNANSWERABLE = frozenset({"offtopic", "neartopic"})


def override(assignments: list[str]) -> dict[str, float | bool]:
    """Applies `NAME=VALUE` to the module constants (numbers and booleans only) of `relation`, else of the
    question parser (`SYNONYM_SENSES`); returns what was set."""
    applied: dict[str, float | bool] = {}
    for item in assignments:
        name, sep, raw = item.partition("=")
        module = relation if hasattr(relation, name) else questions
        current = getattr(module, name, None)
        if not sep or not name.isupper() or isinstance(current, str) or not isinstance(current, int | float):
            raise SystemExit(f"--set {item!r}: not a numeric or boolean constant of relation or text.questions")
        value: float | bool = raw.lower() in ("1", "true", "yes") if isinstance(current, bool) else float(raw)
        if isinstance(current, int) and not isinstance(current, bool):
            value = int(value)
        setattr(module, name, value)
        applied[name] = value
    return applied


def replay(
    reader: relation.Reader,
    line: dict[str, Any],
    spans: SpanReader | None = None,
    skip_bridges: bool = True,
    respell: bool = True,
    typos: int | None = None,
) -> dict[str, Any]:
    """The extractive decision on one recorded question, scored as the live bench scores an answer (with the
    span reader's reading of the sources when `spans` is given, as the answerer does; spans naming a bridge the
    walk searched with left out, as live, unless `skip_bridges` is off; the question's slips read with the
    sources' spelling, as live, unless `respell` is off). `typos` (a seed): one slip put in each question first
    (`with_typo`); the sources stay those the live run retrieved for the question as written."""
    sources = [
        Source("", str(s.get("title") or ""), tuple(s.get("section_path") or ()), str(s.get("text") or ""))
        for s in line["sources"]
    ]
    sentences = reader.sentences([(s.text, s.heading_text) for s in sources])
    asked = resolved_question(line["steps"]) if line.get("steps") else ""
    text = asked or line["question"]
    if typos is not None:
        text = with_typo(text, f"{typos}:{line['id']}")
    read_as: list[tuple[str, str]] = []
    if respell:  # as the answerer does (ANSWERER_RESPELL_QUESTIONS)
        text, read_as = read_as_sources(text, sources)
    reading = spans.read(text, [s.text for s in sources]) if spans is not None and sentences else None
    bridges = used_bridges(line["steps"]) if line.get("steps") and skip_bridges else []
    span = reader.extract(Question.parse(text), sentences, reading, bridges) if sentences else None
    row: dict[str, Any] = {"answered": span is not None, "live_answered": bool(line.get("answered"))}
    if typos is not None or read_as:
        row.update(asked=text, read_as=read_as)
    golds = list(line.get("golds") or [])
    if line["dataset"] in UNANSWERABLE:
        row.update(false_grounded=span is not None, wrong_span=span is not None, em=0.0, f1=0.0)
        return row
    prediction = span.text if span is not None else ""
    em = max((exact_match(prediction, g) for g in golds), default=0.0) if span is not None else 0.0
    f1 = max((token_f1(prediction, g) for g in golds), default=0.0) if span is not None else 0.0
    shown = span.sentence.text if span is not None else ""
    row.update(
        em=em,
        f1=f1,
        false_grounded=span is not None and f1 < F1_WRONG and not contains_gold(shown, golds),
        wrong_span=span is not None and f1 < F1_WRONG and not contains_gold(prediction, golds),
        short_answer=prediction,
    )
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    answered = sum(r["answered"] for r in rows)
    wrong = sum(r["false_grounded"] for r in rows)
    spans = sum(r["wrong_span"] for r in rows)
    return {
        "questions": n,
        "answered": answered,
        "answered_rate": round(answered / n, 4) if n else None,
        "false_grounded": wrong,
        "false_grounded_over_answered": round(wrong / answered, 4) if answered else None,
        "wrong_span_over_answered": round(spans / answered, 4) if answered else None,
        "exact_match": round(sum(r["em"] for r in rows) / n, 4) if n else None,
        "f1": round(sum(r["f1"] for r in rows) / n, 4) if n else None,
        "agrees_with_live": round(sum(r["answered"] == r["live_answered"] for r in rows) / n, 4) if n else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="replay the extractive decision on a live run's sources")
    parser.add_argument("sources", help="the --sources-out file of a bench/answer.py run")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE: override a relation constant")
    parser.add_argument("--output", default=None, help="write the report (JSON) here")
    parser.add_argument("--details", default=None, help="also write one JSON line per question here")
    parser.add_argument(
        "--keep-bridges", action="store_true", help="let a multi-step answer be a bridge it searched with (before)"
    )
    parser.add_argument(
        "--no-respell", action="store_true", help="read the question as written (ANSWERER_RESPELL_QUESTIONS=false)"
    )
    parser.add_argument(
        "--typos", type=int, default=None, help="SEED: put one slip in each question's key words first (with_typo)"
    )
    parser.add_argument(
        "--spacy-model", default=Settings.model_fields["spacy_model"].default, help="the answerer's default"
    )
    args = parser.parse_args()
    applied = override(args.set)
    lines = [json.loads(raw) for raw in Path(args.sources).read_text(encoding="utf-8").splitlines() if raw.strip()]
    lines = [line for line in lines if line.get("mode") != "agentic" or "steps" in line]
    reader = relation.Reader(relation.load_model(args.spacy_model))
    spans = SpanReader.load() if relation.READING else None
    started = time.perf_counter()
    rows = []
    for line in lines:
        row = replay(
            reader, line, spans, skip_bridges=not args.keep_bridges, respell=not args.no_respell, typos=args.typos
        )
        row.update({k: line.get(k) for k in ("dataset", "id", "half", "mode", "question", "golds")})
        rows.append(row)
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        name = row["dataset"] if row["mode"] in ("auto", None) else f"{row['dataset']}/{row['mode']}"
        groups[name].append(row)
        groups[f"{name}/{row['half']}"].append(row)
    report: dict[str, Any] = {name: summarise(group) for name, group in sorted(groups.items())}
    report["meta"] = {
        "sources": args.sources,
        "questions": len(rows),
        "set": applied,
        "bridges": "kept" if args.keep_bridges else "left out",
        "respell": not args.no_respell,
        "typos": args.typos,
        "respelled": sum(bool(r.get("read_as")) for r in rows),
        "seconds": round(time.perf_counter() - started, 1),
        "command": " ".join(sys.argv),
    }
    for name, summary in report.items():
        if name != "meta":
            print(name.ljust(22), json.dumps(summary))
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.details:
        with Path(args.details).open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
