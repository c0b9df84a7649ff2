"""What the span reader's own best span would add where the extractive decision withholds, on a live run's sources.

    python bench/answer.py --hotpot 0 --sources-out S            # once: a live run that keeps its sources
    python bench/reader_rescue.py S --output O.json                # every part: fit, validate, reporting
    python bench/reader_rescue.py S --parts validate --set READING_MIN_CONFIDENCE=0.75   # with another threshold

The answerer's candidates are the parse's spans of the asked type in sentences that say what the question asks
about (`relation.Reader.candidates`); the reader only scores them. Where no candidate is confident enough, the
reader's own best span over all the sources (`span_reader.Reading.best_span`, at most `MAX_ANSWER_TOKENS` tokens: "Kenya",
"friendly and supportive", "white flight") may still be right. This measures that rescue without building it: per
question withheld, the reader's best span, its reading score, and whether the verifier's check
(`Reader.check`, as for any given answer) accepts it; then, per threshold on the score, how many answers the
rescue would add, how many of them are wrong (span F1 below 0.5) and false-grounded (wrong, and the sentence that
states it holds no gold answer), and F1 over all with them. Parts: the tuning half's fit and validate thirds (the
reader was fitted on the fit third's questions: choose on validate) and the reporting half.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling scripts (the .venv has the sources)

from answer import F1_WRONG, contains_gold, token_f1
from replay import override
from widen_sweep import third

from ragmesh_answerer import relation
from ragmesh_answerer.config import Settings
from ragmesh_answerer.prompting import Source
from ragmesh_answerer.span_reader import SpanReader
from ragmesh_common.text.questions import Question


def main() -> None:
    parser = argparse.ArgumentParser(description="the reader's own best span where the answer is withheld")
    parser.add_argument("sources", help="the --sources-out file of a bench/answer.py run")
    parser.add_argument("--dataset", default="squad")
    parser.add_argument("--thresholds", default="0,2,4,6,8,10", help="reading scores the rescue needs")
    parser.add_argument("--parts", default="fit,validate,reporting", help="which parts to read")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE: override a relation constant")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    applied = override(args.set)
    parts = set(args.parts.split(","))
    thresholds = [float(t) for t in args.thresholds.split(",")]
    reader = relation.Reader(relation.load_model(Settings.model_fields["spacy_model"].default))
    spans = SpanReader.load()
    base: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    f1_base: dict[str, float] = collections.defaultdict(float)
    rescued: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for raw in Path(args.sources).read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        if line["dataset"] != args.dataset:
            continue
        part = third(line["id"]) if line["half"] == "tuning" else line["half"]
        if part not in parts:
            continue
        base[part]["questions"] += 1
        sources = [
            Source("", str(s.get("title") or ""), tuple(s.get("section_path") or ()), str(s.get("text") or ""))
            for s in line["sources"]
        ]
        sentences = reader.sentences([(s.text, s.heading_text) for s in sources])
        if not sentences:
            continue
        golds = list(line.get("golds") or [])
        question = Question.parse(line["question"])
        reading = spans.read(line["question"], [s.text for s in sources])
        span = reader.extract(question, sentences, reading)
        if span is not None:
            f1 = max((token_f1(span.text, g) for g in golds), default=0.0)
            base[part]["answered"] += 1
            base[part]["false_grounded"] += f1 < F1_WRONG and not contains_gold(span.sentence.text, golds)
            f1_base[part] += f1
            continue
        top = reading.best_span
        if top is None:
            continue
        score, source, start, end = top
        text = sources[source].text[start:end]
        if not reader.check(question, text, sentences, reading).accepted:
            continue
        f1 = max((token_f1(text, g) for g in golds), default=0.0)
        stated = next((s.text for s in sentences if s.source_index == source and s.start <= start < s.end), text)
        rescued[part].append(
            {
                "id": line["id"],
                "question": line["question"],
                "golds": golds[:2],
                "rescued": text,
                "score": round(score, 2),
                "f1": f1,
                "false_grounded": f1 < F1_WRONG and not contains_gold(stated, golds),
            }
        )
    rows = []
    for part in sorted(base):
        n = base[part]["questions"]
        for t in [None, *thresholds]:
            added = [r for r in rescued[part] if t is not None and r["score"] >= t]
            answered = base[part]["answered"] + len(added)
            fg = base[part]["false_grounded"] + sum(r["false_grounded"] for r in added)
            row = {
                "part": part,
                "threshold": "off" if t is None else t,
                "questions": n,
                "rescued": len(added),
                "rescued_wrong": sum(r["f1"] < F1_WRONG for r in added),
                "answered": answered,
                "false_grounded": fg,
                "false_grounded_over_answered": round(fg / answered, 4) if answered else None,
                "f1": round((f1_base[part] + sum(r["f1"] for r in added)) / n, 4),
            }
            rows.append(row)
            print(json.dumps(row))
    if args.output:
        report = {"command": " ".join(sys.argv), "set": applied, "rows": rows, "rescued": rescued}
        Path(args.output).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
