"""bench/parse_coverage.py: Docling's Markdown words, without markup, against the parser's blocks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench

coverage = load_bench("parse_coverage")
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def test_markup_is_no_word() -> None:
    text = (
        "# Title\n\n1. First [link](https://example.com/x)\n- item\n\n| a | b |\n| - | - |\n| 1 | 2 |\n<!-- image -->"
    )
    assert coverage.markdown_words(text) == {
        "title": 1,
        "first": 1,
        "link": 1,
        "item": 1,
        "a": 1,
        "b": 1,
        "1": 1,
        "2": 1,
    }


def test_the_receipts_fields_and_the_charts_data_are_covered() -> None:
    if not (DATA / "documents" / "html" / "groundtruth" / "kvp_data_example.html.md").is_file():
        pytest.skip(f"the shared documents are not at {DATA}")
    report = coverage.measure(DATA, ["html", "pptx"], 0)
    rows = {r["file"]: r for r in report["per_file"]}
    # before stop 48 the receipt lost its fields, the chart its data; what the receipt still leaves out is its
    # fields' markers ("1" … "8"), as list numbers
    receipt = rows["html/kvp_data_example.html"]
    assert receipt["coverage"] >= 0.85 and set(receipt["missing_words"]) <= {str(n) for n in range(1, 9)}
    assert rows["pptx/pptx_chart.pptx"]["coverage"] >= 0.85
    assert (
        rows["pptx/powerpoint_bad_text.pptx"]["coverage"] == 1.0
        and "error" not in rows["pptx/powerpoint_bad_text.pptx"]
    )


def test_headings_are_compared_as_normalised_sets() -> None:
    assert coverage.markdown_headings("# A Title\n\ntext\n## 1.2 Second-Part\n#not heading?\n") == {
        "a title",
        "1 2 second part",
    }
    rows = [
        {"headings": {"expected": 4, "given": 2, "found": 2}},
        {"headings": {"expected": 0, "given": 2, "found": 0}},
    ]
    assert coverage.heading_scores(rows) == {
        "expected": 4,
        "given": 4,
        "found": 2,
        "precision": 0.5,
        "recall": 0.5,
        "f1": 0.5,
    }


def test_the_pdf_headings_set_in_italic_and_tex_bold_are_found() -> None:
    if not (DATA / "documents" / "pdf" / "groundtruth" / "amt_handbook_sample.md").is_file():
        pytest.skip(f"the shared documents are not at {DATA}")
    report = coverage.measure(DATA, ["pdf"], 0)
    rows = {r["file"]: r["headings"] for r in report["per_file"]}
    # stop 59: none of these three files' headings was found before (italic at body size; TeX's SFBX font)
    assert rows["pdf/amt_handbook_sample.pdf"]["found"] == rows["pdf/amt_handbook_sample.pdf"]["expected"] == 3
    assert rows["pdf/2305.03393v1-pg9.pdf"]["found"] == 2
    assert report["formats"]["pdf"]["headings"]["f1"] >= 0.7  # 0.489 before stop 59
