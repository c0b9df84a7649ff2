"""Sweep the answer's bounds (`relation.WIDEN_GAIN`, `WIDEN_WORDS`) on a live run's sources, side by side.

    python bench/answer.py --hotpot 0 --sources-out S      # once: a live run that keeps its sources
    python bench/widen_sweep.py S --half tuning             # the choice: the tuning half, by the span ranker's thirds
    python bench/widen_sweep.py S --half reporting --gains off,0   # then the reporting half, once

Each question's sources are read once by the span reader; then the extractive decision (`Reader.extract`, as
`bench/replay.py` runs it) is taken for every gain and word bound. Per part (the tuning half's fit and validate
thirds, as `bench/span_ranker.py` splits them: the reader was fitted on the fit third, so choose on validate; or
the reporting half): answered, false-grounded, F1 and EM over all, and how many answers changed against the
bounds off, better and worse by F1. The widening comes after the answer-or-withhold decision: answered never
changes. Writes the table as JSON with `--output`.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for src in (ROOT / "libs").glob("*/src"):
    sys.path.insert(0, str(src))
for src in (ROOT / "services").glob("*/src"):
    sys.path.insert(0, str(src))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from answer import F1_WRONG, contains_gold, exact_match, token_f1  # noqa: E402

from ragmesh_answerer import relation  # noqa: E402
from ragmesh_answerer.config import Settings  # noqa: E402
from ragmesh_answerer.prompting import Source  # noqa: E402
from ragmesh_answerer.span_reader import SpanReader  # noqa: E402
from ragmesh_common.text.questions import Question  # noqa: E402


def third(qid: str) -> str:
    """The span ranker's split of the tuning half (bench/span_ranker.py `_side`): two thirds fit, one validates."""
    return "validate" if hashlib.sha256(f"ranker:{qid}".encode()).digest()[0] % 3 == 0 else "fit"


def gain(raw: str) -> float | None:
    return None if raw == "off" else float(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description="sweep the answer's bounds on a live run's sources")
    parser.add_argument("sources", help="the --sources-out file of a bench/answer.py run")
    parser.add_argument("--half", choices=("tuning", "reporting"), default="tuning")
    parser.add_argument("--dataset", default="squad")
    parser.add_argument("--gains", default="off,2,1,0.5,0,-0.5,-1", help="WIDEN_GAIN values; off = None")
    parser.add_argument("--words", default="6", help="WIDEN_WORDS values")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    gains = [gain(g) for g in args.gains.split(",")]
    if gains[0] is not None:
        gains.insert(0, None)  # the baseline every change is counted against
    bounds = [int(w) for w in args.words.split(",")]
    reader = relation.Reader(relation.load_model(Settings.model_fields["spacy_model"].default))
    spans = SpanReader.load()
    stats: dict[tuple[str, int, float | None], dict[str, float]] = collections.defaultdict(
        lambda: collections.defaultdict(float)
    )
    for raw in Path(args.sources).read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        if line["dataset"] != args.dataset or line["half"] != args.half:
            continue
        sources = [
            Source("", str(s.get("title") or ""), tuple(s.get("section_path") or ()), str(s.get("text") or ""))
            for s in line["sources"]
        ]
        sentences = reader.sentences([(s.text, s.heading_text) for s in sources])
        golds = list(line.get("golds") or [])
        part = third(line["id"]) if args.half == "tuning" else "reporting"
        reading = spans.read(line["question"], [s.text for s in sources]) if sentences else None
        question = Question.parse(line["question"])
        for words in bounds:
            relation.WIDEN_WORDS = words
            base: tuple[str, float] | None = None
            for value in gains:
                relation.WIDEN_GAIN = value
                st = stats[(part, words, value)]
                st["questions"] += 1
                span = reader.extract(question, sentences, reading) if sentences else None
                if span is None:
                    continue
                f1 = max((token_f1(span.text, g) for g in golds), default=0.0)
                st["answered"] += 1
                st["f1_sum"] += f1
                st["em_sum"] += max((exact_match(span.text, g) for g in golds), default=0.0)
                st["false_grounded"] += f1 < F1_WRONG and not contains_gold(span.sentence.text, golds)
                if value is None:
                    base = (span.text, f1)
                elif base is not None and span.text != base[0]:
                    st["changed"] += 1
                    st["better"] += f1 > base[1]
                    st["worse"] += f1 < base[1]
    rows: list[dict[str, Any]] = []
    for (part, words, value), st in sorted(stats.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or -1e9)):
        n = st["questions"]
        row = {"part": part, "words": words, "gain": "off" if value is None else value, "questions": n}
        row.update({k: int(st[k]) for k in ("answered", "false_grounded", "changed", "better", "worse")})
        row.update(f1=round(st["f1_sum"] / n, 4), em=round(st["em_sum"] / n, 4))
        rows.append(row)
        print(json.dumps(row))
    if args.output:
        Path(args.output).write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
