"""tables: a question answered by one cell of a table among the sources.

The parser writes a table as Markdown lines (`| Index | First Name | Last Name | Company |`, then a line per row;
a `|---|` rule may follow the header). A row is no sentence and its header is lines away, so the sentence path
finds no answer in it: "Which company does Sheryl Baxter work for?" was withheld with the very row quoted. When
extraction finds no span, `lookup` reads the sources' tables: the rows whose cells hold every name word and
acronym of the question, the columns whose header names one of its other key terms (by stem and word family:
"company" → "Company"; not a column that holds the names themselves). Exactly one row and one column → that
cell, a `Span` (label `TABLE`) of the row's line, whose context is the header and the row (what coverage and the
evidence read); a when-question needs a cell with a number, a how-many question a number. Copies of a table
that state the same cell count once. Rows or columns that give different cells, a question without a name to
find the row by, or an empty cell → None: the table does not settle it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragmesh_answerer.prompting import Source
from ragmesh_answerer.relation import Sentence, Span
from ragmesh_common.text.numbers import numbers
from ragmesh_common.text.questions import AnswerType, Question
from ragmesh_common.text.words import family_in, stem, words

_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.MULTILINE)
_RULE = re.compile(r"^[\s|:-]+$")
NUMERIC = frozenset({AnswerType.DATE, AnswerType.NUMBER})
TABLE = "TABLE"  # the label of a span that is a table's cell


@dataclass(frozen=True)
class Cell:
    text: str
    start: int  # offsets in the row's line
    end: int


def cells(line: str) -> list[Cell]:
    """The cells of a Markdown table line, each with its offsets in the line (stripped of spaces)."""
    bars = [m.start() for m in re.finditer(r"(?<!\\)\|", line)]
    found = []
    for left, right in itertools.pairwise(bars):
        raw = line[left + 1 : right]
        text = raw.strip()
        start = left + 1 + (raw.index(text) if text else 0)
        found.append(Cell(text, start, start + len(text)))
    return found


def tables(text: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """The Markdown tables of `text`: (header line, [(offset, row line)]) for each run of table lines."""
    found: list[tuple[str, list[tuple[int, str]]]] = []
    header: str | None = None
    rows: list[tuple[int, str]] = []
    last_end = -2
    for match in _ROW.finditer(text):
        line = match.group(0)
        if match.start() != last_end + 1:  # not the next line: a new table
            if header is not None:
                found.append((header, rows))
            header, rows = line, []
        elif not _RULE.match(line):
            rows.append((match.start(), line))
        last_end = match.end()
    if header is not None:
        found.append((header, rows))
    return found


def lookup(question: Question, sources: Sequence[Source]) -> Span | None:
    """The one cell of the sources' tables that answers `question`, or None (module docstring)."""
    names = {*question.entities, *(a.lower() for a in question.acronyms)}
    wanted = {stem(f) for f in question.focus}
    if not names or not wanted:
        return None
    found: list[Span] = []
    for i, source in enumerate(sources):
        for header, rows in tables(source.text):
            columns = cells(header)
            heads = [{stem(w) for w in words(c.text)} for c in columns]
            for offset, line in rows:
                row = cells(line)
                if len(row) != len(columns):
                    continue
                said = [set(words(c.text)) for c in row]
                if not names <= set().union(*said):
                    continue
                holding = {k for k, w in enumerate(said) if w & names}
                answers = [
                    k
                    for k, head in enumerate(heads)
                    if k not in holding and row[k].text and any(family_in(f, head) for f in wanted)
                ]
                for k in answers:
                    if question.answer_type in NUMERIC and not numbers(row[k].text):
                        continue
                    sentence = Sentence(i, offset, offset + len(line), line, f"{header}\n{line}")
                    found.append(Span(sentence, row[k].start, row[k].end, TABLE, True, 1.0, 1.0))
    # one answer, though several copies of a table may state it (the same list exported twice)
    return found[0] if len({span.text.casefold() for span in found}) == 1 else None
