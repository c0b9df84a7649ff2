"""Parse coverage: does the parser keep every word Docling reads? Each shared sample document with Docling's own
Markdown beside it (`../shared/data/documents/<format>/groundtruth/<file>.md`) is parsed in this process
(`DocumentParser.parse`, the parser service's code) and its blocks' words are compared with the Markdown's.

Words are letter/digit runs, lower-cased, counted with repeats. From the Markdown are left out what is markup or
not text a reader asks about: HTML comments (`<!-- image -->`), link targets (`](…)`), list numbers and bullets,
table rule lines. A word Docling's Markdown has more often than the parser's blocks is missing.

    .venv/bin/python bench/parse_coverage.py                      # every format; bench/results/parse-coverage.json
    .venv/bin/python bench/parse_coverage.py --formats html,xlsx --out /tmp/coverage.json

Per file: words, missing, coverage and up to 12 missing words; per format and overall: micro-averaged coverage
and the files below 0.98. Headings: the Markdown's `#` lines against the parser's heading blocks, both normalised
(lower case, runs of non-word characters as one space) and compared as sets; precision, recall and F1 per format
and overall (micro), the misses and extras per file. Added stop 59 for the PDF native pipeline's heading rules. Found stop 48: form fields, sheet names and chart data were dropped (see the README's
"Formats and scanned documents").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
FORMATS = ("md", "html", "csv", "docx", "pptx", "xlsx", "pdf")

_WORD = re.compile(r"[^\W_]+")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+", re.MULTILINE)
_MD_HEADING = re.compile(r"^#{1,6}\s+(.*)$", re.MULTILINE)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(?:\|\s*:?-{1,}:?\s*)*\|?\s*$", re.MULTILINE)


def markdown_words(text: str) -> Counter[str]:
    """The words of Docling's Markdown, without its markup (module docstring)."""
    for pattern in (_COMMENT, _LINK_TARGET, _LIST_MARK, _TABLE_RULE):
        text = pattern.sub(" ", text)
    return Counter(w.lower() for w in _WORD.findall(text))


def _heading_key(text: str) -> str:
    return " ".join(w.lower() for w in _WORD.findall(text))


def markdown_headings(text: str) -> set[str]:
    return {_heading_key(m.group(1)) for m in _MD_HEADING.finditer(text)} - {""}


def block_headings(blocks: list[Any]) -> set[str]:
    return {_heading_key(block.text) for block in blocks if block.kind == "heading"} - {""}


def heading_scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    found = sum(r["headings"]["found"] for r in rows)
    gold = sum(r["headings"]["expected"] for r in rows)
    given = sum(r["headings"]["given"] for r in rows)
    precision = found / given if given else 1.0
    recall = found / gold if gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "expected": gold,
        "given": given,
        "found": found,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
    }


def block_words(blocks: list[Any]) -> Counter[str]:
    return Counter(w.lower() for block in blocks for w in _WORD.findall(block.text))


def measure(data: Path, formats: list[str], limit: int) -> dict[str, Any]:
    from ragmesh_common.errors import InvalidArgument
    from ragmesh_common.formats import FORMATS as REGISTRY
    from ragmesh_parser.converter import DocumentParser

    by_extension = {ext: f.name for f in REGISTRY for ext in f.extensions}
    parser = DocumentParser(timeout_seconds=120)
    files: list[dict[str, Any]] = []
    began = time.monotonic()
    for fmt in formats:
        folder = data / "documents" / fmt
        if not (folder / "sources").is_dir():
            continue
        sources = sorted((folder / "sources").iterdir())
        if fmt == "pdf":  # the PDF ground truth is named by the file's stem
            pairs = [(s, folder / "groundtruth" / f"{s.stem}.md") for s in sources]
        else:
            pairs = [(s, folder / "groundtruth" / f"{s.name}.md") for s in sources]
        pairs = [(s, g) for s, g in pairs if g.is_file()][: limit or None]
        for source, truth in pairs:
            markdown = truth.read_text(encoding="utf-8")
            expected = markdown_words(markdown)
            gold_headings = markdown_headings(markdown)
            headings: set[str] = set()
            row: dict[str, Any] = {"file": f"{fmt}/{source.name}", "format": fmt, "words": sum(expected.values())}
            try:
                parsed = parser.parse(
                    source.name, source.read_bytes(), by_extension.get(source.suffix[1:].lower(), fmt)
                )
                missing = expected - block_words(parsed.blocks)
                headings = block_headings(parsed.blocks)
            except InvalidArgument as exc:  # a file the parser refuses: every word is missing, the reason kept
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                missing = expected
            row["missing"] = sum(missing.values())
            row["coverage"] = round(1 - row["missing"] / row["words"], 4) if row["words"] else 1.0
            row["missing_words"] = [w for w, _ in missing.most_common(12)]
            row["headings"] = {
                "expected": len(gold_headings),
                "given": len(headings),
                "found": len(headings & gold_headings),
                "missed": sorted(gold_headings - headings)[:12],
                "extra": sorted(headings - gold_headings)[:12],
            }
            files.append(row)
            print(f"{row['file']}: {row['coverage']:.3f} ({row['missing']} of {row['words']} missing)", file=sys.stderr)
    per_format: dict[str, Any] = {}
    for fmt in formats:
        rows = [r for r in files if r["format"] == fmt]
        if rows:
            words = sum(r["words"] for r in rows)
            per_format[fmt] = {
                "files": len(rows),
                "coverage": round(1 - sum(r["missing"] for r in rows) / words, 4) if words else 1.0,
                "below_0.98": [r["file"] for r in rows if r["coverage"] < 0.98],
                "headings": heading_scores(rows),
            }
    words = sum(r["words"] for r in files)
    return {
        "command": "bench/parse_coverage.py " + " ".join(sys.argv[1:]),
        "seconds": round(time.monotonic() - began, 1),
        "files": len(files),
        "coverage": round(1 - sum(r["missing"] for r in files) / words, 4) if words else 1.0,
        "headings": heading_scores(files),
        "formats": per_format,
        "per_file": files,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated folders of documents/")
    parser.add_argument("--limit", type=int, default=0, help="at most this many files per format (0: all)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "parse-coverage.json"))
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "documents").is_dir():
        parser.error(f"no shared documents at {data / 'documents'}")
    report = measure(data, [f for f in args.formats.split(",") if f], args.limit)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("files", "coverage", "headings", "formats")}, indent=2))


if __name__ == "__main__":
    main()
