"""bench/widen_sweep.py: the answer's bounds swept on a live run's recorded sources, each question read once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench

sweep = load_bench("widen_sweep")

VALLEY = {
    "text": "Over the decade the farms drew 12 to 15 thousand people to the valley, most of them from the coast.",
    "title": "Valley",
    "section_path": [],
}


def test_the_sweep_counts_the_answers_the_bounds_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [
        {"dataset": "squad", "id": "q1", "half": "reporting", "mode": "auto", "sources": [VALLEY],
         "question": "How many people moved to the valley?", "golds": ["12 to 15 thousand"], "answered": True},
        {"dataset": "squad", "id": "q2", "half": "tuning", "mode": "auto", "sources": [VALLEY],
         "question": "How many people moved to the valley?", "golds": ["12 to 15 thousand"], "answered": True},
    ]  # fmt: skip
    capture, output = tmp_path / "sources.jsonl", tmp_path / "sweep.json"
    capture.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["widen_sweep.py", str(capture), "--half", "reporting", "--gains", "0", "--output", str(output)]
    monkeypatch.setattr(sys, "argv", argv)
    sweep.main()
    rows = {row["gain"]: row for row in json.loads(output.read_text())["rows"]}
    assert set(rows) == {"off", 0.0}  # the baseline is always swept
    assert all(row["questions"] == 1 and row["answered"] == 1 and row["part"] == "reporting" for row in rows.values())
    assert rows["off"]["em"] == 0.0 and rows["off"]["f1"] < 1.0  # "15 thousand"
    assert rows[0.0]["em"] == 1.0 and rows[0.0]["changed"] == 1 and rows[0.0]["better"] == 1
    assert sweep.third("q1") in ("fit", "validate")
