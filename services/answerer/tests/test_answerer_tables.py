"""A question answered by one cell of a table: the row that names the question's names, the column whose header
names its other key terms; nothing when the table does not settle it."""

from __future__ import annotations

from ragmesh_answerer.prompting import Source
from ragmesh_answerer.tables import cells, lookup, tables
from ragmesh_common.text.questions import Question

CUSTOMERS = (
    "Customers of the quarter.\n"
    "| Index | First Name | Last Name | Company | Country | Subscription Date |\n"
    "|---|---|---|---|---|---|\n"
    "| 1 | Sheryl | Baxter | Rasmussen Group | Chile | 2020-08-24 |\n"
    "| 2 | Preston | Lozano | Vega-Gentry | Djibouti | 2021-04-23 |\n"
    "| 3 | Roy | Berry | Murillo-Perry | Chile | 2020-03-25 |\n"
)
SOURCES = [Source("c1", "customers", (), CUSTOMERS)]


def answer(question: str) -> str | None:
    span = lookup(Question.parse(question), SOURCES)
    return span.text if span else None


def test_the_cell_of_the_named_row_in_the_asked_column() -> None:
    assert answer("Which company does Sheryl Baxter work for?") == "Rasmussen Group"
    assert answer("In which country does Preston Lozano live?") == "Djibouti"
    assert answer("What is the subscription date of Roy Berry?") == "2020-03-25"
    span = lookup(Question.parse("Which company does Sheryl Baxter work for?"), SOURCES)
    assert span is not None and span.label == "TABLE"
    # the span is an exact slice of its source; its sentence is the row, its context the header and the row
    assert CUSTOMERS[span.source_start : span.source_end] == "Rasmussen Group"
    assert span.sentence.text == "| 1 | Sheryl | Baxter | Rasmussen Group | Chile | 2020-08-24 |"
    assert span.sentence.context.startswith("| Index | First Name")


def test_nothing_when_the_table_does_not_settle_it() -> None:
    assert answer("Which company is in Chile?") is None  # two rows name Chile
    assert answer("Which company does Jane Doe work for?") is None  # no row names her
    assert answer("What is the company?") is None  # no name to find the row by
    assert answer("What is the phone number of Sheryl Baxter?") is None  # no such column
    assert answer("When was Sheryl Baxter's company founded?") is None  # no dated column for it: not the Company
    assert (
        lookup(Question.parse("Which company does Sheryl Baxter work for?"), [Source("c", "t", (), "No table.")])
        is None
    )


def test_tables_and_cells_keep_their_offsets() -> None:
    [(header, rows)] = tables(CUSTOMERS)
    assert header.startswith("| Index") and len(rows) == 3  # the |---| rule is no row
    offset, line = rows[1]
    assert CUSTOMERS[offset : offset + len(line)] == line
    assert [(c.text, line[c.start : c.end]) for c in cells(line)][3] == ("Vega-Gentry", "Vega-Gentry")
    two = "| a | b |\n| 1 | 2 |\n\nText between.\n| c | d |\n| 3 | 4 |\n"
    assert [h for h, _ in tables(two)] == ["| a | b |", "| c | d |"]


def test_copies_of_a_table_agree_and_a_conflicting_copy_settles_nothing() -> None:
    question = Question.parse("Which company does Sheryl Baxter work for?")
    copy = Source("c2", "customers (copy)", (), CUSTOMERS)
    span = lookup(question, [*SOURCES, copy])
    assert span is not None and span.text == "Rasmussen Group" and span.sentence.source_index == 0
    other = Source("c3", "customers 2019", (), CUSTOMERS.replace("Rasmussen Group", "Orion Holdings"))
    assert lookup(question, [*SOURCES, other]) is None
