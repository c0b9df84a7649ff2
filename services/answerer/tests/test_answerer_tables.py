"""A question answered by one cell of a table: the row that names the question's names, the column whose header
names its other key terms; nothing when the table does not settle it."""

from __future__ import annotations

import dataclasses

from ragmesh_answerer.prompting import Source
from ragmesh_answerer.tables import (
    COUNTED_SHOWN,
    TIED_SHOWN,
    cells,
    count,
    describe,
    extreme,
    identifiers,
    lookup,
    read,
    row_text,
    tables,
)
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


def answer(question: str, sources: list[Source] = SOURCES) -> str | None:
    span = lookup(Question.parse(question), sources)
    return span.text if span else None


def test_the_cell_of_the_named_row_in_the_asked_column() -> None:
    assert answer("Which company does Sheryl Baxter work for?") == "Rasmussen Group"
    assert answer("In which country does Preston Lozano live?") == "Djibouti"
    assert answer("What is the subscription date of Roy Berry?") == "2020-03-25"
    assert answer("When did Sheryl Baxter subscribe?") == "2020-08-24"  # the verb names the -ion noun's column
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


FOODS = (
    "Here are some interesting things a respectful duck could eat:\n\n"
    "|  | Food | Calories per portion |\n"
    "| Leaves | Ash, Elm, Maple | 50 |\n"
    "| Berries | Blueberry, Strawberry, Cranberry | 150 |\n"
    "| Grain | Corn, Buckwheat, Barley | 200 |\n"
)


def test_a_question_without_names_finds_its_row_by_a_key_term_when_row_and_header_hold_them_all() -> None:
    """Found with word_sample.docx: "How many calories per portion do berries have?" was withheld with the table
    quoted (no capitalised name, so no row). Docling's table here has no |---| rule and an empty corner cell."""
    sources = [Source("c1", "Swimming in the lake", (), FOODS)]

    assert answer("How many calories per portion do berries have?", sources) == "150"
    assert answer("What is the calories per portion of grain?", sources) == "200"
    assert answer("What food are berries?", sources) == "Blueberry, Strawberry, Cranberry"
    # the table's own parts named in the question need not be said in the source ("… in the grain row?" was
    # withheld: no source says "row")
    assert answer("What foods are in the grain row?", sources) == "Corn, Buckwheat, Barley"
    assert answer("What food does the berries row list?", sources) == "Blueberry, Strawberry, Cranberry"
    assert answer("How many calories are in the leaves row of the table?", sources) == "50"
    assert answer("What foods are in the grain aisle?", sources) is None  # any other word must still be said
    assert answer("Which grains could a duck eat?", sources) is None  # "duck" and "eat" are in no row nor header
    assert answer("How many portions?", sources) is None  # no row term
    assert answer("How many calories do apples have?", sources) is None  # no row says apples
    # a row term alone or a column term alone settles nothing
    assert lookup(Question.parse("How many berries?"), sources) is None


def test_a_chart_row_found_by_its_year_in_the_column_that_names_the_most() -> None:
    chart = (
        "Wild Duck Observations by Year\n"
        "|  | Freshwater Ducks | Saltwater Ducks |\n"
        "| 2019 | 120 | 80 |\n"
        "| 2021 | 150 | 110 |\n"
    )
    sources = [Source("c1", "Quarterly Duck Survey", (), chart)]

    assert (
        answer("How many saltwater ducks were observed in 2021?", sources) == "110"
    )  # "observed": the caption says it
    assert answer("How many freshwater ducks were there in 2019?", sources) == "120"
    assert answer("How many ducks were observed in 2021?", sources) is None  # both columns name ducks
    assert answer("How many saltwater ducks were observed in 2023?", sources) is None  # no such row
    assert answer("How many saltwater ducks were counted in 2021?", sources) is None  # nothing says "counted"
    # a sheet's name (the chunk's heading) says it as well as a caption does
    sheet = "| Year | Freshwater Ducks | Saltwater Ducks | Ducks |\n| 2019 | 120 | 80 | 200 |\n"
    question = Question.parse("How many saltwater ducks were observed in 2019?")
    found = lookup(question, [Source("c2", "ducks.xlsx", ("Duck Observations",), sheet)])
    assert found is not None and found.text == "80"
    assert lookup(question, [Source("c2", "ducks.xlsx", ("Sheet1",), sheet)]) is None
    # another table with the row and the column but another cell: the documents disagree, nothing is answered
    # (found with the shared XLSX and PPTX duck charts: 2021's saltwater ducks are 100 in one, 110 in the other)
    other = "|  | Freshwater Ducks | Saltwater Ducks |\n| 2019 | 120 | 85 |\n"
    observed = Source("c2", "ducks.xlsx", ("Duck Observations",), sheet)
    assert lookup(question, [observed, Source("c3", "Quarterly Duck Survey", (), other)]) is None
    same = "|  | Freshwater Ducks | Saltwater Ducks |\n| 2019 | 120 | 80 |\n"
    agreeing = lookup(question, [observed, Source("c3", "Quarterly Duck Survey", (), same)])
    assert agreeing is not None and agreeing.text == "80"
    fresh = "| Year | Freshwater Ducks |\n| 2019 | 120 |\n"  # no saltwater column: no rival
    beside = lookup(question, [observed, Source("c4", "ducks.xlsx", (), fresh)])
    assert beside is not None and beside.text == "80"


def test_a_one_series_chart_is_named_by_its_heading_and_its_rows_by_codes() -> None:
    """Found asking the shared PPTX: "What was the Q3 revenue?" was withheld though the slide "Quarterly revenue"
    charts Q1..Q3 of 2026 (its only value column is headed "2026"; its rows "Q3", which is no number)."""
    chart = "|  | 2026 |\n| Q1 | 10 |\n| Q2 | 20 |\n| Q3 | 30 |"
    sources = [Source("c1", "Quarterly Duck Survey", ("Quarterly revenue",), chart)]
    assert answer("What was the Q3 revenue?", sources) == "30"
    assert answer("How much revenue was there in Q2?", sources) == "20"
    assert answer("What was the Q4 revenue?", sources) is None  # no such row
    assert answer("What were the Q3 costs?", sources) is None  # nothing names costs
    # with two value columns the header must name what is asked: the heading names both
    two = "|  | 2025 | 2026 |\n| Q3 | 25 | 30 |"
    assert answer("What was the Q3 revenue?", [Source("c2", "Survey", ("Quarterly revenue",), two)]) is None


RECEIPT = (
    "Receipt documentation for table service:\n"
    "Restaurant: Docling\n"
    "Telephone: (123) 456-7890\n"
    "Server: Quack Quackling\n"
    "Order Number: 12345\n"
    "Number of guests: 5\n"
    "Receipt date: 16/03/2026\n"
)


def test_a_form_field_answers_when_its_key_names_the_question() -> None:
    sources = [Source("c1", "HEADER", (), RECEIPT)]

    assert answer("Who was the server?", sources) == "Quack Quackling"
    assert (
        answer("What is the telephone number of the restaurant?", sources) == "(123) 456-7890"
    )  # the one with a number
    assert answer("What is the order number?", sources) == "12345"
    assert answer("How many guests were there?", sources) == "5"
    assert answer("What was the receipt date?", sources) == "16/03/2026"
    span = lookup(Question.parse("Who was the server?"), sources)
    assert span is not None and span.sentence.text == "Server: Quack Quackling"
    assert RECEIPT[span.source_start : span.source_end] == "Quack Quackling"
    assert answer("Who was the server at IBM?", sources) is None  # the receipt never names IBM
    assert answer("Who was the server at the Docling restaurant?", sources) == "Quack Quackling"  # not "Docling" again
    assert answer("Where is the restaurant?", sources) is None  # "Restaurant: Docling" names it, it does not place it
    assert answer("When was the receipt issued?", sources) is None  # nothing says "issued"
    assert answer("What is the dining type?", sources) is None  # no such field
    # found in a chat: "Who was the server on the receipt?" was withheld ("Receipt date" named "receipt" as much);
    # a who-question is no date, and the role it asks for ("server") outranks its context ("restaurant")
    assert answer("Who was the server on the receipt?", sources) == "Quack Quackling"
    assert answer("Who was the server at the restaurant?", sources) == "Quack Quackling"
    assert answer("Who is the restaurant's server?", sources) == "Quack Quackling"


CHART = "Wild Duck Observations by Year\n|  | Freshwater Ducks | Saltwater Ducks |\n| 2019 | 120 | 70 |\n| 2022 | 175 | 140 |\n"
DUCKS = (
    "## Duck Observations\n\n"
    "| Year | Freshwater Ducks | Saltwater Ducks | Ducks |\n"
    "| - | - | - | - |\n"
    "| 2019 | 120 | 80 | 200 |\n"
    "| 2020 | 135 | 95 | 230 |\n"
    "| 2022 | 170 | 110 | 280 |\n"
    "| 2023 | 160 | 120 | 280 |\n"
    "| 2024 | 180 | 130 | 310 |\n"
)


def test_a_superlative_gets_the_row_with_the_largest_or_smallest_value_of_the_named_column() -> None:
    """Found asking the shared spreadsheet: "Which year had the most saltwater ducks?" was withheld."""
    sources = [Source("d1", "Duck Observations", ("Duck Observations",), DUCKS)]

    def ask(question: str, among: list[Source] = sources) -> str | None:
        span = extreme(Question.parse(question), among).answer
        return span.text if span else None

    assert ask("Which year had the most saltwater ducks?") == "2024"
    assert ask("In which year were the fewest freshwater ducks observed?") == "2019"
    assert ask("What year had the lowest number of saltwater ducks?") == "2019"
    span = extreme(Question.parse("Which year had the most saltwater ducks?"), sources).answer
    assert span is not None and DUCKS[span.source_start : span.source_end] == "2024"  # an exact slice, cited
    assert span.sentence.text == "| 2024 | 180 | 130 | 310 |"
    # three columns name ducks; "Ducks" says exactly what is asked, the others a part of it
    assert ask("Which year had the most ducks?") == "2024"
    assert ask("Which year had the most ducks?", [Source("d1", "Survey", (), CHART)]) is None  # two parts: a tie
    tied = [Source("d1", "Duck Observations", (), DUCKS.replace("| 180 | 130 |", "| 180 | 120 |"))]
    assert ask("Which year had the most saltwater ducks?", tied) is None  # 2023 and 2024: 120, the two together
    both = extreme(Question.parse("Which year had the most saltwater ducks?"), tied).tallies
    assert [t.short for t in both] == ["2023 and 2024"]
    assert ask("Which year had saltwater ducks?") is None  # no superlative
    copy = Source("d2", "copy", (), DUCKS)
    assert ask("Which year had the most saltwater ducks?", [*sources, copy]) == "2024"  # copies agree


def test_tables_whose_extremes_differ_disagree_each_with_its_own_row() -> None:
    """Found asking the shared documents: the spreadsheet's saltwater ducks peak in 2024 (130), the slide's chart
    (other numbers, 2019-2022) in 2022; the answer was withheld with no word of why."""
    sheet = Source("d1", "Duck Observations", ("Duck Observations",), DUCKS)
    slide = Source("d2", "Quarterly Duck Survey", (), CHART)
    reading = extreme(Question.parse("Which year had the most saltwater ducks?"), [sheet, slide])
    assert reading.answer is None
    assert [(describe(cell), cell.sentence.source_index) for cell in reading.disagreeing] == [
        ("2024, Saltwater Ducks: 130", 0),
        ("2022, Saltwater Ducks: 140", 1),
    ]
    # both tables agree on the fewest: one answer
    fewest = extreme(Question.parse("Which year had the fewest saltwater ducks?"), [sheet, slide])
    assert fewest.answer is not None and fewest.answer.text == "2019" and not fewest.disagreeing


def test_the_column_that_says_exactly_what_is_asked_answers_it() -> None:
    """Found asking the shared spreadsheet: "What was the total number of ducks in 2024?" was withheld (three
    columns say ducks; the source never says "total"), and "How many ducks were observed in 2024?" gave 180, the
    freshwater ducks of a one-column table captioned "Duck Observations" (the caption counted as its header)."""
    sheet = Source("d1", "Duck Observations", ("Duck Observations",), DUCKS)
    fresh = Source("d2", "Duck Observations", ("Duck Observations",), "| Year | Freshwater Ducks |\n| 2024 | 180 |\n")
    assert answer("What was the total number of ducks in 2024?", [sheet]) == "310"
    assert answer("How many ducks were observed in 2024?", [fresh, sheet]) == "310"
    assert answer("How many freshwater ducks were observed in 2024?", [fresh, sheet]) == "180"
    # the only column names a part of what is asked: still its value (nothing names the whole better)
    assert answer("How many ducks were observed in 2024?", [fresh]) == "180"
    # "total" need not be said, but a column that says it is read so
    totals = "| Year | Freshwater | Saltwater | Total |\n| 2024 | 180 | 130 | 310 |\n"
    assert answer("What was the total number of ducks in 2024?", [Source("d3", "Ducks", (), totals)]) == "310"


CONTACTS = (
    "| Customer Id | Name | Company | Email | Phone 1 | Phone 2 | Subscription Date |\n"
    "|---|---|---|---|---|---|---|\n"
    "| DD37Cf93aecA6Dc | Sheryl Baxter | Rasmussen Group | zunigavanessa@smith.info | 229.077.5154 | 397.884 | 2020-08-24 |\n"
    "| 1Ef7b82A4CAAD10 | Preston Lozano | Vega-Gentry | vmata@colon.com | 5153435776 | 686-620 | 2021-04-23 |\n"
    "| 6F94879bDAfE5a6 | Roy Berry | Murillo-Perry | beckycarr@hogan.com | +1-539-402 | 001-808 | 2020-03-25 |\n"
)


def test_a_row_found_by_a_value_the_question_quotes() -> None:
    """ "… the customer with email vmata@colon.com": the row holding that whole value, the column its other
    key terms name; a when-question the dated column; a who-question the row's name."""
    sources = [Source("c2", "contacts", (), CONTACTS)]
    assert answer("Which company does the customer with email vmata@colon.com work for?", sources) == "Vega-Gentry"
    assert answer("When did the customer with email vmata@colon.com subscribe?", sources) == "2021-04-23"
    assert answer("Who has the email beckycarr@hogan.com?", sources) == "Roy Berry"
    assert answer("What is the email of customer DD37Cf93aecA6Dc?", sources) == "zunigavanessa@smith.info"
    assert answer("Which company does 6f94879bdafe5a6 belong to?", sources) == "Murillo-Perry"  # any case
    assert identifiers("Which and/or what company has vmata@colon.com?") == {"vmata@colon.com"}
    # two phone columns name it alike: no one cell; a value no row holds, or only part of a cell: no row
    assert answer("What is the phone number of customer DD37Cf93aecA6Dc?", sources) is None
    assert answer("Which company does the customer with email nobody@colon.com work for?", sources) is None
    assert answer("Which company does the customer with email colon.com work for?", sources) is None
    # first and last name in two columns: no one cell names the person, the two together do (`Tally`)
    split = "| First Name | Last Name | Email |\n|---|---|---|\n| Preston | Lozano | vmata@colon.com |\n"
    assert answer("Who has the email vmata@colon.com?", [Source("c3", "t", (), split)]) is None
    assert answer("What is the last name of vmata@colon.com?", [Source("c3", "t", (), split)]) == "Lozano"
    # a chunk without the value's row: the value's words ("colon", "com") find no other row, no column
    other = "| First Name | Email | Website |\n|---|---|---|\n| Sheryl | zunigavanessa@smith.info | http://a.com/ |\n"
    assert answer("Who has the email vmata@colon.com?", [Source("c4", "t", (), other)]) is None
    assert answer("What is the email of vmata@colon.com?", [Source("c4", "t", (), other)]) is None


SALES_HEADER = "| Product | Date | Quantity | Revenue |\n| - | - | - | - |\n"


def test_the_chunks_of_one_sheet_are_one_table_for_a_superlative() -> None:
    """Found asking the shared workbook: "Which product had the highest revenue?" answered that the documents
    disagree (Widget B 12500, Widget C 15000): two chunks of the one sheet, each with its own largest row."""
    first = Source(
        "s1:3",
        "SalesData",
        ("SalesData",),
        SALES_HEADER + "| Widget B | 2024-01-02 | 10 | 12000 |\n"
        "| Widget C | 2024-01-03 | 3 | 3000 |\n| Widget B | 2024-01-18 | 12 | 12500 |\n",
    )
    second = Source(
        "s1:1",
        "SalesData",
        ("SalesData",),
        SALES_HEADER + "| Widget A | 2024-01-01 | 5 | 5000 |\n"
        "| Widget C | 2024-01-07 | 12 | 15000 |\n| Widget B | 2024-01-02 | 10 | 12000 |\n",
    )
    reading = extreme(Question.parse("Which product had the highest revenue?"), [first, second])
    assert reading.answer is not None and not reading.disagreeing
    assert reading.answer.text == "Widget C" and reading.answer.sentence.source_index == 1  # cited in its chunk
    least = extreme(Question.parse("Which product had the lowest revenue?"), [first, second]).answer
    assert least is not None and least.text == "Widget C" and "3000" in least.sentence.text
    # another document's copy of the sheet agrees; another document whose largest row differs disagrees
    copy = dataclasses.replace(second, chunk_id="s2:1")
    assert extreme(Question.parse("Which product had the highest revenue?"), [first, second, copy]).answer
    other = dataclasses.replace(first, chunk_id="s3:1")
    split = extreme(Question.parse("Which product had the highest revenue?"), [other, second])
    assert split.answer is None and [c.text for c in split.disagreeing] == ["12500", "15000"]


def _sales(chunk_id: str, *rows: tuple[str, int]) -> Source:
    """A chunk of the sales sheet: (product, quantity) per row, its revenue 1000 per unit."""
    lines = "".join(f"| {p} | 2024-01-{n + 1:02d} | {q} | {q * 1000} |\n" for n, (p, q) in enumerate(rows))
    return Source(chunk_id, "SalesData", ("SalesData",), SALES_HEADER + lines)


def test_who_holds_a_quoted_value_is_a_first_and_a_last_name_column_together() -> None:
    """Found asking the shared customers CSV "Who has the email vmata@colon.com?": its name is two columns, so no
    cell answered and the row was only quoted. The two cells are the name, the value's cell cited; a copy that
    names another person disagrees; a what-question still reads one column."""
    split = "| First Name | Last Name | Email |\n|---|---|---|\n| Preston | Lozano | vmata@colon.com |\n"
    sources = [Source("c3:1", "t", (), split), Source("c4:1", "copy", (), split)]  # two copies agree
    reading = read(Question.parse("Who has the email vmata@colon.com?"), sources)
    assert reading.answer is None and [t.short for t in reading.tallies] == ["Preston Lozano"]
    person = reading.tallies[0]
    assert person.statement == "Preston Lozano (First Name “Preston”, Last Name “Lozano”) has Email “vmata@colon.com”."
    assert [c.text for c in person.cited] == ["vmata@colon.com"] and person.holds(sources)
    given = "| Given Name | Surname | Email |\n|---|---|---|\n| Ana | Ruiz | vmata@colon.com |\n"
    other = read(Question.parse("Who has the email vmata@colon.com?"), [sources[0], Source("c5:1", "hr", (), given)])
    assert [t.short for t in other.tallies] == ["Preston Lozano", "Ana Ruiz"]  # two people: the documents disagree
    assert not read(Question.parse("What is the email of vmata@colon.com?"), sources).tallies
    coded = "| First Name | Last Name | Email |\n|---|---|---|\n| P1 | Lozano | vmata@colon.com |\n"
    assert not read(Question.parse("Who has the email vmata@colon.com?"), [Source("c6:1", "t", (), coded)]).tallies


def test_rows_that_tie_for_the_extreme_are_the_answer_together() -> None:
    """Found asking the shared workbook "Which product sold the largest quantity?": Widget B and Widget C both sold
    12, the table was skipped as unsettled and the user saw only a quote. Each tied row is named and cited."""
    first = _sales("s1:1", ("Widget A", 12), ("Widget C", 3))
    second = _sales("s1:2", ("Widget B", 4), ("Widget D", 12))
    reading = extreme(Question.parse("Which product sold the largest quantity?"), [first, second])
    assert reading.answer is None and not reading.disagreeing and len(reading.tallies) == 1
    tie = reading.tallies[0]
    assert tie.short == "Widget A and Widget D"
    assert tie.statement == "Widget A and Widget D tie for the largest quantity (12)."
    assert [(c.text, c.sentence.source_index) for c in tie.cited] == [("12", 0), ("12", 1)]  # each row in its chunk
    assert tie.holds([first, second])
    # a tally whose cited row does not hold the value, or does not name a label it says, is not verified
    assert not dataclasses.replace(tie, value="13").holds([first, second])
    assert not dataclasses.replace(tie, named=("Widget A", "Widget C")).holds([first, second])
    # the smallest: one row, as before
    least = extreme(Question.parse("Which product sold the smallest quantity?"), [first, second])
    assert least.answer is not None and least.answer.text == "Widget C" and not least.tallies
    # one product on two rows at the top: that product, both rows cited
    twice = _sales("s2:1", ("Widget C", 12), ("Widget A", 5), ("Widget C", 12))
    again = extreme(Question.parse("Which product sold the largest quantity?"), [twice]).tallies
    assert [(t.short, t.statement, len(t.cited)) for t in again] == [
        ("Widget C", "Widget C has the largest quantity (12), in 2 rows.", 2)
    ]
    # more rows than are named: how many, and the first ones cited
    many = _sales("s3:1", *((f"Widget {n}", 7) for n in range(TIED_SHOWN + 2)), ("Widget Z", 1))
    most = extreme(Question.parse("Which product sold the largest quantity?"), [many]).tallies[0]
    assert most.short == f"{TIED_SHOWN + 2} rows tie at 7" and len(most.cited) == TIED_SHOWN
    assert most.statement.startswith(f"{TIED_SHOWN + 2} rows tie for the largest quantity (7), among them Widget 0")


def test_documents_whose_ties_differ_disagree() -> None:
    """Another document's copy with the same tie agrees; one whose top rows differ disagrees, each table's rows
    shown with its own source."""
    first = _sales("s1:1", ("Widget A", 12), ("Widget D", 12), ("Widget C", 3))
    copy = dataclasses.replace(first, chunk_id="s2:1")
    question = Question.parse("Which product sold the largest quantity?")
    assert [t.short for t in extreme(question, [first, copy]).tallies] == ["Widget A and Widget D"]
    other = _sales("s3:1", ("Widget A", 12), ("Widget B", 9))
    split = extreme(question, [first, other])
    assert split.answer is None and not split.tallies
    assert [(describe(c), c.sentence.source_index) for c in split.disagreeing] == [
        ("Widget A, Quantity: 12", 0),
        ("Widget D, Quantity: 12", 0),
        ("Widget A, Quantity: 12", 1),
    ]


COUNTRY_HEADER = "| Index | Customer Id | First Name | Country |\n|---|---|---|---|\n"


def _customers(chunk_id: str, *countries: str, start: int = 1) -> Source:
    rows = "".join(f"| {start + n} | C{start + n:04d}x | Name{start + n} | {c} |\n" for n, c in enumerate(countries))
    return Source(chunk_id, "customers-100.csv", (), COUNTRY_HEADER + rows)


def test_a_how_many_question_counts_the_rows_that_hold_the_value_it_names() -> None:
    """ "How many customers are from Chile?" over a sheet in chunks: the rows of the whole table whose Country cell
    is "Chile", whole and in any case; "Chile Norte" is another value."""
    first = _customers("c1:1", "Chile", "Djibouti", "Chile Norte")
    second = _customers("c1:2", "chile", "CHILE", "Peru", start=4)
    reading = count(Question.parse("How many customers are from Chile?"), [first, second])
    assert reading.answer is None and len(reading.tallies) == 1
    tally = reading.tallies[0]
    assert (tally.short, tally.statement) == ("3", "3 rows have Country “Chile”.")
    assert [(c.text, c.sentence.source_index) for c in tally.cited] == [("Chile", 0), ("chile", 1), ("CHILE", 1)]
    assert tally.holds([first, second])
    assert count(Question.parse("How many customers are from CHILE?"), [first, second]).tallies[0].rows == 3
    norte = count(Question.parse("How many customers live in Chile Norte?"), [first, second]).tallies
    assert [(t.short, [c.text for c in t.cited]) for t in norte] == [("1", ["Chile Norte"])]
    # read in part: a lower bound
    partial = count(Question.parse("How many customers are from Chile?"), [first, second], partial=True).tallies[0]
    assert partial.short == "at least 3" and partial.statement.startswith("At least 3 rows have Country “Chile”")
    # more rows than are cited: the count, the first cited, how many more
    many = _customers("c2:1", *(["Chile"] * (COUNTED_SHOWN + 4)))
    big = count(Question.parse("How many customers are from Chile?"), [many]).tallies[0]
    assert big.rows == COUNTED_SHOWN + 4 and len(big.cited) == COUNTED_SHOWN
    assert f"({COUNTED_SHOWN} cited, 4 more)" in big.statement


def test_a_count_falls_through_when_no_column_holds_the_value_whole() -> None:
    """No cell is the named value, the question names no rows, or the noun names a column of numbers (a cell
    answers: `read`): no count, the answerer reads the tables as before."""
    sheet = [_customers("c1:1", "Chile Norte", "Djibouti")]
    assert count(Question.parse("How many customers are from Chile?"), sheet).tallies == ()
    assert count(Question.parse("How many customers are from Peru?"), sheet).tallies == ()
    assert count(Question.parse("How many are from Djibouti?"), sheet).tallies == ()  # what is counted?
    assert count(Question.parse("Which customers are from Djibouti?"), sheet).tallies == ()  # no how-many
    assert count(Question.parse("How many planets are from Djibouti?"), sheet).tallies == ()  # not the sheet's
    assert count(Question.parse("How many entries are from Djibouti?"), sheet).tallies[0].short == "1"
    units = Source("u1:1", "Sales", (), "| Product | Units |\n|---|---|\n| Widget Beta | 7 |\n| Widget Gamma | 3 |\n")
    assert count(Question.parse("How many units did Widget Beta sell?"), [units]).tallies == ()
    # a column of labels with numbers ("Gadget 05") is no measure: its noun counts rows
    gadgets = "| Gadget | Region | Units |\n|---|---|---|\n| Gadget 05 | South | 3 |\n| Gadget 06 | North | 2 |\n"
    south = count(Question.parse("How many gadgets are in the South region?"), [Source("g1:1", "g", (), gadgets)])
    assert [t.short for t in south.tallies] == ["1"]
    assert answer("How many units did Widget Beta sell?", [units]) == "7"


def test_tables_whose_counts_differ_disagree() -> None:
    """Two documents' customer sheets: the same count agrees (one answer); different counts are one tally each."""
    mine = _customers("c1:1", "Chile", "Peru", "Chile")
    copy = dataclasses.replace(mine, chunk_id="c2:1")
    question = Question.parse("How many customers are from Chile?")
    assert [t.short for t in count(question, [mine, copy]).tallies] == ["2"]
    theirs = _customers("c3:1", "Chile", "Peru", "Peru")
    assert [(t.short, t.cited[0].sentence.source_index) for t in count(question, [mine, theirs]).tallies] == [
        ("2", 0),
        ("1", 1),
    ]


SALES = Source(
    "s1:1",
    "SalesData",
    (),
    "| Product | Date | Quantity | Revenue |\n| - | - | - | - |\n"
    "| Widget A | 2024-01-01 00:00:00 | 5 | 5000 |\n"
    "| Widget B | 2024-01-02 00:00:00 | 10 | 12000 |\n"
    "| Widget C | 2024-01-03 00:00:00 | 3 | 3000 |\n"
    "| Widget A | 2024-01-05 00:00:00 | 7 | 7000 |\n"
    "| Widget B | 2024-01-06 00:00:00 | 6 | 6000 |\n"
    "| Widget C | 2024-01-07 00:00:00 | 12 | 15000 |\n",
)


def test_the_row_is_the_one_that_says_the_questions_name_whole_and_its_dates() -> None:
    """ "Widget C" is not every row whose product holds the name word "widget", and "on 2024-01-07" is that day's
    row: one cell answers. A row of another day, or a day no row has, answers nothing."""
    question = "What was the revenue of Widget C on 2024-01-07?"
    span = lookup(Question.parse(question), [SALES])
    assert span is not None and span.text == "15000"
    # the row as the answer states it: the cells the question names or dates, and the answer's
    said = row_text(span.sentence, span.start, question)
    assert said == "Product: Widget C · Date: 2024-01-07 00:00:00 · Revenue: 15000"
    assert answer("What was the quantity of Widget A on 2024-01-05?", [SALES]) == "7"
    assert answer("What was the revenue of Widget C?", [SALES]) is None  # two rows of Widget C: not settled
    assert answer("What was the revenue of Widget C on 2024-01-09?", [SALES]) is None  # no such day
    assert answer("What was the revenue of Widget C on 2024-01-0?", [SALES]) is None  # a part of a date is none
    # a year the source's heading writes holds for its rows ("Sales 2021 › Q3")
    sheet = Source("y1:1", "Sales 2021", ("Q3",), "| Product | Revenue |\n|---|---|\n| Widget C | 900 |\n")
    assert answer("What was the revenue of Widget C in 2021?", [sheet]) == "900"
    assert answer("What was the revenue of Widget C in 2022?", [sheet]) is None


def test_a_count_of_rows_does_not_answer_how_many_of_a_product_were_sold() -> None:
    """ "How many Widget B were sold on 2024-01-02?" asks for units, not for the rows that name Widget B (it was
    answered "5 rows have Product Widget B", verified); "How many … rows …" still counts, on the day it names."""
    question = Question.parse("How many Widget B were sold on 2024-01-02?")
    assert count(question, [SALES]).tallies == ()
    rows = count(Question.parse("How many rows have Widget B?"), [SALES]).tallies
    assert [t.short for t in rows] == ["2"]
    day = count(Question.parse("How many rows have Widget B on 2024-01-06?"), [SALES]).tallies
    assert [t.short for t in day] == ["1"]


def test_may_beside_a_year_is_the_month_that_finds_the_row() -> None:
    """Stop 59, a held-out question on the shared HTML pivot table: "What was the cost in May 2025?" was withheld —
    "May" was read as the stop word "may", and every row of 2025 matched."""
    pivot = (
        "| Year | Month | Revenue | Cost |\n"
        "| 2025 | January | $134 | $162 |\n"
        "| 2025 | April | $210 | $150 |\n"
        "| 2025 | May | $280 | $120 |\n"
    )
    sources = [Source("p1", "Pivot table", (), pivot)]
    assert answer("What was the cost in May 2025?", sources) == "$120"
    assert answer("What was the revenue in April 2025?", sources) == "$210"
    assert Question.parse("What may happen in 2025?").entities == ()
