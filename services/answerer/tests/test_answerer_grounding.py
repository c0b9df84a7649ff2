"""Citation attribution and grounding math on hand-made answers and sources."""
from __future__ import annotations

import pytest

from ragmesh_answerer.grounding import attribute, content_words, markers, split_sentences

VACATION = "[1] Employee Handbook › Leave\nFull-time employees receive 25 days of paid vacation per calendar year."
PASSWORDS = "[2] IT Security Policy › Accounts\nPasswords must be rotated every 90 days and have 12 characters."
SOURCES = [VACATION, PASSWORDS]


def test_content_words_drop_stop_words_and_keep_numbers() -> None:
    assert content_words("The answer is: employees get 25 days!") == {"employees", "get", "25", "days"}


def test_sentences_split_at_punctuation_and_line_breaks() -> None:
    assert split_sentences("One thing. Two things!\nThree") == ["One thing.", "Two things!", "Three"]


def test_markers_parse_single_grouped_and_repeated() -> None:
    assert markers("see [2], [1, 3] and [4][5]") == [2, 1, 3, 4, 5]


def test_copied_sentence_is_attributed_to_its_source_only() -> None:
    result = attribute("Employees receive 25 days of paid vacation per calendar year.", SOURCES, 0.5)
    assert [c.source_index for c in result.citations] == [0]
    assert result.citations[0].support == 1.0
    assert result.grounding_score == 1.0
    assert result.warnings == []


def test_each_sentence_credits_the_source_it_draws_on() -> None:
    answer = "Employees receive 25 paid vacation days. Passwords are rotated every 90 days."
    result = attribute(answer, SOURCES, 0.5)
    assert sorted(c.source_index for c in result.citations) == [0, 1]
    assert result.grounding_score == 1.0


def test_grounding_is_the_share_of_supported_content_sentences() -> None:
    # 1 supported, 1 invented, 1 boilerplate ("Sure!" carries no content and is not counted).
    answer = "Sure! Employees receive 25 days of paid vacation. The cafeteria serves lasagna on Fridays."
    result = attribute(answer, SOURCES, 0.5)
    assert result.content_sentences == 2
    assert result.grounding_score == 0.5
    assert [c.source_index for c in result.citations] == [0]


def test_invented_answer_has_no_citations_and_zero_grounding() -> None:
    result = attribute("The cafeteria serves lasagna on Fridays.", SOURCES, 0.5)
    assert result.citations == [] and result.grounding_score == 0.0


def test_support_is_the_share_of_sentence_words_in_the_source() -> None:
    # content words: employees, receive, 25, days, free, lunch -> 4 of 6 are in the vacation source
    result = attribute("Employees receive 25 days free lunch.", SOURCES, 0.5)
    assert result.sentences[0].best_support == pytest.approx(4 / 6)
    assert result.citations[0].support == pytest.approx(round(4 / 6, 4))
    assert attribute("Employees receive 25 days free lunch.", SOURCES, 0.7).citations == []


def test_out_of_range_marker_is_dropped_with_a_warning() -> None:
    result = attribute("Employees receive 25 days of paid vacation [7].", SOURCES, 0.5)
    assert "[7]" not in result.answer
    assert result.answer == "Employees receive 25 days of paid vacation."
    assert any("[7]" in w and "only 2 sources" in w for w in result.warnings)
    assert [c.source_index for c in result.citations] == [0]


def test_grouped_marker_keeps_the_valid_numbers() -> None:
    result = attribute("Employees receive 25 days of paid vacation [1, 9].", SOURCES, 0.5)
    assert "[1]" in result.answer and "9" not in result.answer


def test_marker_for_an_unsupporting_source_is_dropped_with_a_warning() -> None:
    result = attribute("Employees receive 25 days of paid vacation [2].", SOURCES, 0.5)
    assert [c.source_index for c in result.citations] == [0]
    assert any("[2]" in w and "does not support" in w for w in result.warnings)


def test_valid_marker_adds_a_supporting_source_below_the_best() -> None:
    sources = [VACATION, "[2] Benefits\nEmployees receive paid days off for 25 public holidays and vacation."]
    answer = "Full-time employees receive 25 days of paid vacation per calendar year [2]."
    unmarked = attribute(answer.replace(" [2]", ""), sources, 0.5)
    assert [c.source_index for c in unmarked.citations] == [0]
    marked = attribute(answer, sources, 0.5)
    assert sorted(c.source_index for c in marked.citations) == [0, 1]


def test_empty_answer_scores_zero() -> None:
    result = attribute("", SOURCES, 0.5)
    assert result.sentences == [] and result.citations == [] and result.grounding_score == 0.0
