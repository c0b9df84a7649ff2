"""bench/replay.py: the answerer's extractive decision, rerun offline on the sources a live run recorded
(bench/answer.py --sources-out), is scored as the live bench scores an answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench

answer = load_bench("answer")
replay = load_bench("replay")

IBM = {
    "text": "IBM was founded in 1911 in Endicott, New York. It was renamed in 1924.",
    "title": "IBM",
    "section_path": ["History"],
}


def _line(dataset: str, question: str, golds: list[str], answered: bool, *sources: dict[str, Any]) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "id": question,
        "half": "tuning",
        "mode": "auto",
        "question": question,
        "golds": golds,
        "answered": answered,
        "sources": list(sources),
    }


@pytest.fixture(scope="module")
def reader() -> Any:
    return replay.relation.Reader(replay.relation.load_model(replay.Settings.model_fields["spacy_model"].default))


def test_a_replayed_answer_is_scored_like_a_live_one(reader: Any) -> None:
    right = replay.replay(reader, _line("squad", "When was IBM founded?", ["1911"], True, IBM))
    assert right["answered"] and right["em"] == 1.0 and not right["false_grounded"]
    wrong = replay.replay(reader, _line("squad", "When was IBM founded?", ["1896"], True, IBM))
    assert wrong["answered"] and wrong["false_grounded"]  # the evidence sentence does not hold the gold either
    # an off-topic question has no answer in the index: any answer is wrong
    off = replay.replay(reader, _line("offtopic", "When was IBM founded?", [], False, IBM))
    assert off["false_grounded"] and not off["live_answered"]
    none = replay.replay(reader, _line("squad", "Who painted the Mona Lisa?", ["Leonardo"], False, IBM))
    assert not none["answered"] and not none["false_grounded"] and none["f1"] == 0.0
    summary = replay.summarise([right, wrong, none])
    assert summary["answered"] == 2 and summary["false_grounded_over_answered"] == 0.5
    assert summary["agrees_with_live"] == 1.0


def test_a_multi_step_answer_is_replayed_on_its_resolved_question(reader: Any) -> None:
    flint = {"text": "IBM was founded in 1911 by Charles Flint in Endicott.", "title": "IBM", "section_path": []}
    line = _line(
        "hotpotqa", "Who founded the company whose first plant was in Endicott?", ["Charles Flint"], True, flint
    )
    line["steps"] = [
        {"tool": "search", "sub_question": "the company whose first plant was in Endicott", "query": "…",
         "decision": "found", "bridge": "IBM"},
        {"tool": "search", "sub_question": "Who founded #1?", "query": "Who founded IBM?",
         "queries": ["Who founded IBM?"], "decision": "found"},
    ]  # fmt: skip
    assert replay.resolved_question(line["steps"]) == "Who founded IBM?"
    row = replay.replay(reader, line)
    assert row["answered"] and row["short_answer"] == "Charles Flint" and row["em"] == 1.0


def test_a_multi_step_answer_is_never_a_bridge_the_walk_searched_with(reader: Any) -> None:
    player = {"text": "Ada Brill is a retired Harbor Town basketball player.", "title": "Ada Brill"}
    show = {"text": "Ada Brill hosts the television show Court Nights.", "title": "Ada Brill"}
    question = "What show does a retired Harbor Town player host?"
    line = _line("hotpotqa", question, ["Court Nights"], True, player, show)
    line["steps"] = [
        {"tool": "search", "sub_question": question, "query": question, "decision": "found", "bridge": "Ada Brill"},
        {"tool": "search", "sub_question": "#1 retired Harbor Town player host",
         "queries": ["Ada Brill retired Harbor Town player host"], "decision": "found"},
    ]  # fmt: skip
    kept = replay.replay(reader, line, skip_bridges=False)
    assert kept["short_answer"] == "Ada Brill" and kept["false_grounded"]  # before: the bridge answered
    assert replay.replay(reader, line).get("short_answer") != "Ada Brill"


def test_constants_are_overridden_by_name_and_only_numbers_or_booleans() -> None:
    before = replay.relation.ANSWER_MIN_COVERAGE
    try:
        assert replay.override(["ANSWER_MIN_COVERAGE=0.9"]) == {"ANSWER_MIN_COVERAGE": 0.9}
        assert replay.relation.ANSWER_MIN_COVERAGE == 0.9
    finally:
        replay.relation.ANSWER_MIN_COVERAGE = before
    for bad in ("NO_SUCH_CONSTANT=1", "ANSWER_MIN_COVERAGE", "logger=1"):
        with pytest.raises(SystemExit):
            replay.override([bad])


def test_the_live_bench_writes_every_source_in_full() -> None:
    row = {"dataset": "squad", "id": "q1", "half": "tuning", "mode": "auto", "question": "Q?", "golds": ["a"]}
    row |= {"answered": True, "false_grounded": False, "em": 1.0, "f1": 1.0, "short_answer": "a"}
    final = {
        "sources": [{"chunk_id": "c1", "snippet": "cut…"}, {"chunk_id": "c2", "snippet": "only this", "title": "T"}],
        "steps": [{"tool": "search", "sub_question": "Who?", "query": "Who?", "decision": "found"}],
    }
    line = json.loads(answer.replay_line(row, final, {"c1": IBM}))
    assert line["sources"][0] == IBM  # the chunk's full text, title and section path from the database
    assert line["sources"][1] == {"text": "only this", "title": "T", "section_path": []}  # not found: the snippet
    assert line["short_answer"] == "a" and line["golds"] == ["a"]
    assert line["steps"] == final["steps"]  # what the resolved question is taken from


def test_a_slip_in_the_question_is_read_as_live_and_can_be_put_in(reader: Any) -> None:
    """The replay reads the question's slips with the sources' spelling as the answerer does; `--typos` puts one
    slip (seeded, into a key word) in each question first, `--no-respell` reads it as written."""
    line = _line("squad", "When was IBM fonded?", ["1911"], False, IBM)
    read = replay.replay(reader, line)
    assert read["answered"] and read["em"] == 1.0 and read["read_as"] == [("fonded", "founded")]
    assert not replay.replay(reader, line, respell=False)["answered"]
    question = "When was the company founded in New York?"
    slipped = replay.with_typo(question, "1:q")
    assert slipped == replay.with_typo(question, "1:q")  # seeded
    written = question.split(" ")
    changed = [i for i, word in enumerate(slipped.split(" ")) if word != written[i]]
    assert len(changed) == 1 and written[changed[0]] in ("company", "founded")  # a key word of 5 letters or more
    assert replay.with_typo("Who is he?", "1:q") == "Who is he?"  # no key word of 5 letters: unchanged
