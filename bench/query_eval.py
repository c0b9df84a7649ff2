"""Measure the gateway's multi-hop detector (`ragmesh_gateway.query.route`) on the shared question sets.

    make bench-query                          # or: python bench/query_eval.py [--data-dir DIR] [-v]

HotpotQA (all multi-hop by construction) gives recall; SciFact claims and SQuAD questions (mostly
single-hop) give the rate of questions flagged multi-hop. Samples are deterministic: SciFact's first 300
claims, and 300 SQuAD questions spread evenly over the file (its first 300 cover only a few articles).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from ragmesh_gateway.query.router import route

SAMPLE = 300


@dataclass(frozen=True)
class DetectorStats:
    name: str
    total: int
    flagged: int

    @property
    def rate(self) -> float:
        return self.flagged / self.total if self.total else 0.0


def load_questions(path: Path, sample: int | None = None, spread: bool = False) -> list[str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if sample is not None and spread:
        lines = [lines[i * len(lines) // sample] for i in range(min(sample, len(lines)))]
    elif sample is not None:
        lines = lines[:sample]
    return [json.loads(line)["text"] for line in lines]


def datasets(root: Path) -> dict[str, list[str]]:
    return {
        "hotpotqa": load_questions(root / "hotpotqa_train100" / "queries.jsonl"),
        "scifact": load_questions(root / "beir_scifact" / "queries.jsonl", SAMPLE),
        "squad": load_questions(root / "squad_v1.1_dev" / "queries.jsonl", SAMPLE, spread=True),
    }


def measure(questions: list[str], name: str) -> DetectorStats:
    return DetectorStats(name, len(questions), sum(route(q).multi_hop for q in questions))


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
    parser.add_argument("-v", "--verbose", action="store_true", help="print every misclassified question")
    args = parser.parse_args()
    verbose = args.verbose
    for name, questions in datasets(Path(args.data_dir)).items():
        stats = measure(questions, name)
        label = "recall" if name == "hotpotqa" else "flagged (false-positive rate)"
        print(f"{name:9s} {label}: {stats.flagged}/{stats.total} = {stats.rate:.3f}")
        if verbose:
            for q in questions:
                r = route(q)
                if r.multi_hop != (name == "hotpotqa"):
                    print("   ", [x for x in r.reasons if x.startswith("multi_hop")], q)


if __name__ == "__main__":
    main()
