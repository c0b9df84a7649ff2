"""Citation markers of the answer: parsed, and dropped when out of range."""

from __future__ import annotations

from ragmesh_answerer.grounding import drop_out_of_range, markers


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
