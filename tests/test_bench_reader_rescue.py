"""bench/reader_rescue.py: the span reader's own best span where the extractive decision withholds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench

rescue = load_bench("reader_rescue")

VALLEY = {
    "text": "Over the decade the farms drew 12 to 15 thousand people to the valley, most of them from the coast. "
    "The first settlers came from Ohio, and the mill opened in 1851 beside the river.",
    "title": "Valley",
    "section_path": [],
}


def test_a_rescue_only_adds_to_what_the_decision_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [
        {"dataset": "squad", "id": f"q{i}", "half": "reporting", "mode": "auto", "sources": [VALLEY],
         "question": question, "golds": [gold], "answered": True}
        for i, (question, gold) in enumerate(
            [
                ("How many people moved to the valley?", "12 to 15 thousand"),
                ("Where did the first settlers come from?", "Ohio"),
                ("When did the mill open?", "1851"),
                ("What did the valley's people grow?", "wheat"),
            ]
        )
    ] + [{"dataset": "hotpotqa", "id": "h", "half": "reporting", "sources": [VALLEY], "question": "Who?", "golds": []}]  # fmt: skip
    capture, output = tmp_path / "sources.jsonl", tmp_path / "rescue.json"
    capture.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["reader_rescue.py", str(capture), "--thresholds=-100,0,100", "--output", str(output)]
    monkeypatch.setattr(sys, "argv", argv)
    rescue.main()
    report = json.loads(output.read_text())
    rows = {row["threshold"]: row for row in report["rows"]}
    assert set(rows) == {"off", -100.0, 0.0, 100.0} and {row["part"] for row in rows.values()} == {"reporting"}
    assert all(row["questions"] == 4 for row in rows.values())  # the other dataset is not read
    base = rows["off"]
    assert base["rescued"] == 0 and 0 < base["answered"] < 4
    for t in (-100.0, 0.0, 100.0):
        assert rows[t]["answered"] == base["answered"] + rows[t]["rescued"]
        assert rows[t]["f1"] >= base["f1"] - 1e-9 or rows[t]["rescued_wrong"] > 0
    assert rows[-100.0]["rescued"] >= rows[0.0]["rescued"] >= rows[100.0]["rescued"] == 0
    # the question whose answer the source does not hold ("wheat") is withheld, and a rescue answers it wrongly
    assert rows[-100.0]["rescued"] == rows[-100.0]["rescued_wrong"] == 1
    assert rows[-100.0]["false_grounded"] == base["false_grounded"] + 1
    for found in report["rescued"].get("reporting", []):
        assert found["rescued"] in VALLEY["text"]  # an exact slice of a source, never generated text
