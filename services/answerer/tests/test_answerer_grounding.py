"""The word-level helpers of the output checks: content words, sentences, markers, out-of-range markers."""

from __future__ import annotations

from ragmesh_answerer.grounding import content_words, drop_out_of_range, markers, split_sentences


def test_content_words_drop_stop_words_and_keep_numbers() -> None:
    assert content_words("The answer is: employees get 25 days!") == {"employees", "get", "25", "days"}


def test_sentences_split_at_punctuation_and_line_breaks() -> None:
    assert split_sentences("One thing. Two things!\nThree") == ["One thing.", "Two things!", "Three"]


def test_markers_parse_single_grouped_and_repeated() -> None:
    assert markers("see [2], [1, 3] and [4][5]") == [2, 1, 3, 4, 5]


def test_out_of_range_marker_is_dropped_with_a_warning() -> None:
    warnings: list[str] = []
    assert (
        drop_out_of_range("Employees receive 25 days of paid vacation [7].", 2, warnings)
        == "Employees receive 25 days of paid vacation."
    )
    assert len(warnings) == 1 and "[7]" in warnings[0] and "only 2" in warnings[0]


def test_grouped_marker_keeps_the_valid_numbers() -> None:
    warnings: list[str] = []
    cleaned = drop_out_of_range("Employees receive 25 days of paid vacation [1, 9].", 2, warnings)
    assert "[1]" in cleaned and "9" not in cleaned


def test_in_range_markers_are_left_alone() -> None:
    warnings: list[str] = []
    assert drop_out_of_range("Yes [2].", 2, warnings) == "Yes [2]." and warnings == []
