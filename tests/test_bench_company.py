"""bench/company.py: how a chat's final event is scored, and that every question names a shared sample file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench

company = load_bench("company")
DOCUMENTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "documents"


def test_a_verified_wrong_answer_is_false_grounded_and_a_withheld_one_is_not_answered() -> None:
    question = {"id": "q", "question": "When was the typewriter patented?", "answers": ["1868"]}
    right = company.score(
        question, {"outcome": "answer", "grounded": True, "verified": True, "short_answer": "1868", "answer": "…"}
    )
    wrong = company.score(
        question,
        {"outcome": "answer", "grounded": True, "verified": True, "short_answer": "1935", "answer": "In 1935."},
    )
    shown = company.score(
        question, {"outcome": "answer", "grounded": True, "verified": True, "short_answer": "1935", "answer": "1868"}
    )
    withheld = company.score(question, {"outcome": "answer", "withheld": True, "short_answer": "I could not …"})
    assert (right["em"], right["false_grounded"]) == (1.0, False)
    assert wrong["false_grounded"] and not shown["false_grounded"]  # the sentence shown holds the gold
    assert not withheld["answered"] and withheld["short_answer"] == ""
    none = {"id": "n", "question": "Who invented it?", "answers": []}
    assert company.score(
        none, {"outcome": "answer", "grounded": True, "verified": True, "short_answer": "Bob", "answer": "Bob"}
    )["false_grounded"]
    totals = company.totals([right, wrong, shown, withheld])
    assert (totals["answered"], totals["false_grounded"], totals["wrong_short_answers"]) == (3, 1, 2)
    assert totals["answered_over_answerable"] == 0.75 and totals["exact_match_over_answerable"] == 0.25


def test_every_question_names_a_sample_file_and_has_a_unique_id() -> None:
    rows = [json.loads(line) for line in company.QUESTIONS.read_text().splitlines() if line.strip()]
    assert len({r["id"] for r in rows}) == len(rows) == 30
    if not DOCUMENTS.is_dir():
        pytest.skip("the shared sample documents are not here")
    assert all((DOCUMENTS / r["document"]).is_file() for r in rows)
