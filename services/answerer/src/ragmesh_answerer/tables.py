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
find the row by, or an empty cell → None: the table does not settle it. A question without names finds its row
by a key term in the row's cells instead ("How many calories per portion do berries have?": the row "Berries",
the column "Calories per portion"), or by one of its numbers ("… in 2021?"), but only when the row, the column's
header and the source (a chart's caption) hold every key term; of a row's columns, the one whose header names
the most, and of those the one whose header says nothing the question does not ("Ducks" over "Freshwater Ducks").
A question that quotes a value a cell holds whole ("… the customer with email vmata@colon.com", "… customer
DD37Cf93aecA6Dc": a word with letters and an "@", a digit or "://") finds its row by that cell, and only that row
answers.
A form's "Key: value" lines (the parser writes Docling's key-value fields so) are read the same way: the value of
the field whose key names the most key terms ("Who was the server?" → "Server: Quack Quackling").
A question with a superlative ("Which year had the most saltwater ducks?") gets the row with the largest (or
smallest) number in the column its key terms name, by the row's label (`extreme`); rows that tie are named
together (`Tally`); tables whose rows differ disagree.
A how-many question that names a value whole cells of one column hold ("How many customers are from Chile?") is the
number of the table's rows with it, the rows cited (`count`); tables whose counts differ disagree.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence, Set
from dataclasses import dataclass

from ragmesh_answerer.prompting import Source
from ragmesh_answerer.relation import Sentence, Span
from ragmesh_common.text.names import acronym_in
from ragmesh_common.text.numbers import numbers
from ragmesh_common.text.questions import (
    HOW_MANY,
    LEAST_WORDS,
    MOST_WORDS,
    AnswerType,
    Question,
    asks_how_many,
    superlative,
)
from ragmesh_common.text.words import STOP_WORDS, family_in, stem, words

_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.MULTILINE)
_RULE = re.compile(r"^[\s|:-]+$")
NUMERIC = frozenset({AnswerType.DATE, AnswerType.NUMBER})
# A row answers only when it holds every word of the question with a digit ("… on 2024-01-07?", "… in 2021?"),
# in a cell or in its table's header (`_holds_figures`); off: any row that holds the names answers.
ROW_FIGURES = True
TABLE = "TABLE"  # the label of a span that is a table's cell
Rank = tuple[int, int]  # (key terms a column's header names, minus the header's words the question does not say)
Top = tuple[tuple[Span, Span], ...]  # the rows with a column's extreme value: (label cell, value cell) of each
# words for a table's own parts: "What foods are in the grain row?" names the row and the column; "row" need not
# be said anywhere in the source (a header that says it still matches)
_STRUCTURE = frozenset(stem(w) for w in ("row", "column", "table", "cell", "entry", "line", "list", "sheet"))
# what a quoted value may be wrapped in ("… email vmata@colon.com?", "(ID 4711)")
_AROUND = "\"'“”‘’()[]{}<>,;:?!."
_NAME = stem("name")  # a column headed as someone's name ("Name", "Customer Name")
_CODE = re.compile(r"[\d@]")  # what no name holds: a digit, an "@"
_DATED = frozenset(stem(w) for w in ("date", "year", "day", "time", "when", "month"))  # a column of dates
# which row: "Which year …", "In which quarter …", "What region …", "Who …"
_RUN = re.compile(r"[^\W_]+")  # a run of letters and digits
_WHICH = re.compile(r"^\s*(?:in\s+|during\s+)?(?:(?:which|what)\s+([^\W\d_]+)|who)\b", re.IGNORECASE)


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


@dataclass(frozen=True)
class Reading:
    """What the sources' tables and forms say to a question: the one cell that answers it, or, when sources give
    different cells for the same row and column (a spreadsheet says 100, a slide's chart 110), one cell per value
    in `disagreeing` (each from its own source), for the answer to show instead of an answer."""

    answer: Span | None
    disagreeing: tuple[Span, ...] = ()
    # an answer that rests on several rows (`Tally`): one, or one per table when tables give different counts
    tallies: tuple[Tally, ...] = ()


TIED_SHOWN = 5  # rows of a tie named and cited; a longer tie is said as "7 rows tie at 12", its first rows cited
COUNTED_SHOWN = 10  # rows a count cites; the answer says how many more it counted


@dataclass(frozen=True)
class Tally:
    """An answer that rests on several rows of one table: the rows that tie for a column's largest (or smallest)
    value (`extreme`), or the rows a how-many question counts (`count`). `short` is the short answer ("Widget B and
    Widget C", "3"), `statement` the sentence that says it, `cited` one cell of each row cited (the tied value, the
    counted value; at most `TIED_SHOWN` / `COUNTED_SHOWN` of `rows` in all), each holding `value`; `named` the
    labels the statement names, each a cell of a cited row."""

    short: str
    statement: str
    cited: tuple[Span, ...]
    rows: int
    value: str
    named: tuple[str, ...] = ()

    def holds(self, sources: Sequence[Source]) -> bool:
        """What makes the answer verified: each cited cell is its source's exact slice and holds `value` (the same
        number, or the same words whole), and each label named is a cell of a cited row."""
        for cell in self.cited:
            text = sources[cell.sentence.source_index].text if cell.sentence.source_index < len(sources) else ""
            if text[cell.source_start : cell.source_end] != cell.text or not _same_value(cell.text, self.value):
                return False
        labels = {c.text for cell in self.cited for c in cells(cell.sentence.text)}
        return bool(self.cited) and self.rows >= len(self.cited) and all(name in labels for name in self.named)


def lookup(question: Question, sources: Sequence[Source]) -> Span | None:
    """The one cell of the sources' tables that answers `question`, or None (module docstring)."""
    return read(question, sources).answer


def read(question: Question, sources: Sequence[Source]) -> Reading:
    """`lookup`'s cell, or the cells the sources disagree on (`Reading`)."""
    names = {*question.entities, *(a.lower() for a in question.acronyms)}
    quoted = identifiers(question.text)
    # the words a quoted value splits into ("vmata", "colon", "com") name no row and no column
    wanted = {stem(f) for f in question.focus} - {stem(w) for v in quoted for w in words(v)}
    if not wanted:
        return Reading(None)
    found: list[tuple[Rank, Span]] = []  # (how well its column's header names the question, the cell)
    rivals: list[tuple[Rank, Span]] = []
    figures = _figures(question.text)
    folded = f" {_folded(question.text)} "  # what `_names_whole` finds a row's names in
    whole: set[int] = set()  # which of `found` come from a row that says the question's names whole
    people: dict[str, Tally] = {}  # who holds a quoted value, by a first and a last name column (`_full_name`)
    asked_words = _asked_words(question)
    optional = _AGGREGATE if question.answer_type is AnswerType.NUMBER else frozenset()
    # the question's numbers and codes with digits, as a row's label may hold them ("2021", "Q3", "FY24")
    asked = set(re.findall(r"\d[\d,.]*\d|\d", question.text)) | {
        w.casefold() for w in re.findall(r"[^\W_]+", question.text) if any(c.isdigit() for c in w)
    }
    for i, source in enumerate(sources):
        said, caption = _said(source), _caption(source)
        for header, rows in tables(source.text):
            columns = cells(header)
            heads = _heads(columns)
            for offset, line in rows:
                row = cells(line)
                if len(row) != len(columns) or not _holds_figures(row, f"{header}\n{source.heading_text}", figures):
                    continue
                sentence = _row(i, offset, line, header)
                if quoted:  # "… the customer with email vmata@colon.com": only the row that holds the value
                    held = [k for k, c in enumerate(row) if c.text.casefold() in quoted]
                    answers = _by_value(row, heads, held, wanted, asked_words, question) if held else []
                    if held and not answers and question.answer_type is AnswerType.PERSON:
                        person = _full_name(row, columns, heads, held, sentence)
                        if person is not None:
                            people.setdefault(person.short.casefold(), person)
                elif names:
                    answers = [((0, 0), k) for k in _named(row, heads, names, wanted)]
                else:
                    labelled = [
                        (_rank(n, heads[k], asked_words), k, rest)
                        for n, k, rest in _labelled(row, heads, wanted, asked, caption)
                    ]
                    answers = _most([(n, k) for n, k, rest in labelled if _said_all(rest - optional, said)])
                    # a table whose row and column match, though its source leaves a term unsaid
                    rivals += [(n, _cell(sentence, row[k])) for n, k in _most([(n, k) for n, k, _ in labelled])]
                says_whole = bool(answers) and bool(names) and _names_whole(row, names, folded)
                for n, k in answers:
                    if question.answer_type in NUMERIC and not numbers(row[k].text):
                        continue
                    if question.answer_type is AnswerType.PERSON and _CODE.search(row[k].text):
                        continue  # a who-question is not answered by an email address or a phone number
                    if says_whole:
                        whole.add(len(found))
                    found.append((n, _cell(sentence, row[k])))
    if people and not found:  # copies that name one person agree; rows naming others disagree
        return Reading(None, tallies=tuple(people.values()))
    if whole:  # "Widget C" over the rows of "Widget A", which hold the name word "widget" as well
        found = [f for j, f in enumerate(found) if j in whole]
    top = max((n for n, _ in found), default=(0, 0))
    spans = [span for n, span in found if n == top] or _fields(question, sources)
    # one answer, though several copies of a table may state it (the same list exported twice); a table that
    # matches the row and a column naming as much with another cell: a question the documents disagree on
    values = {span.text.casefold() for span in spans}
    disagree = [span for n, span in rivals if n >= top and span.text.casefold() not in values]
    if len(values) == 1 and not disagree:
        return Reading(spans[0])
    return Reading(None, _disagreeing([*spans, *disagree]))


def extreme(question: Question, sources: Sequence[Source]) -> Reading:
    """ "Which year had the most saltwater ducks?": the label cell of the row whose value is the largest (most,
    highest, …: `superlative`) or the smallest in the column whose header names the question best (`_rank`;
    one column, every cell of it a number). The label is the cell under a header naming what the question asks
    which of ("year"), else the row's first. Two columns naming it as well settle nothing in that table. Rows that
    tie for the extreme are the answer together (`Tally`: "Widget B and Widget C tie for the largest quantity
    (12)", each row cited; more than `TIED_SHOWN`: "7 rows tie …", the first cited). Tables that give different
    rows disagree (`Reading.disagreeing`: each one's value cells, as "2022, Saltwater Ducks: 130", from its own
    source). The chunks of one document with the same header are one table (a sheet split into chunks: its largest
    row is the largest of all its rows given, not of each chunk)."""
    extremity = superlative(question.text)
    kind = _WHICH.match(question.text)
    if extremity is None or question.options or kind is None:
        return Reading(None)
    most = extremity == "most"
    asked = stem(kind.group(1).lower()) if kind.group(1) else ""
    wanted = question.key_stems() - {asked} - {stem(w) for w in MOST_WORDS | LEAST_WORDS}
    if not wanted:
        return Reading(None)
    asked_words = _asked_words(question)
    found: list[tuple[Rank, Top, str]] = []  # (the value column's rank, its top rows, its header)
    for (_, header), chunks in _by_document(sources).items():
        columns = cells(header)
        heads = _heads(columns)
        label = next((j for j, head in enumerate(heads) if asked and asked in head), 0)
        named = [(_rank(len(head & wanted), head, asked_words), j) for j, head in enumerate(heads) if j != label]
        value = _most([(n, j) for n, j in named if n[0] > 0])
        if len(value) != 1:
            continue
        rank, k = value[0]
        top = _top_rows(chunks, header, label, k, most)
        if top:
            found.append((rank, top, columns[k].text))
    best = max((n for n, _, _ in found), default=(0, 0))
    return _settled(question, [(top, head) for n, top, head in found if n == best])


def _top_rows(
    chunks: Sequence[tuple[int, Sequence[tuple[int, str]]]], header: str, label: int, k: int, most: bool
) -> Top:
    """The rows of one table (given in chunks) whose cell in column `k` is its largest (`most`) or smallest value;
    () when the column is no measure, the table has fewer than two rows, or such a row has no label."""
    scored = _merged_column(chunks, len(cells(header)), k)
    if scored is None or len(scored) < 2:
        return ()
    top = (max if most else min)(v for v, _, _ in scored.values())
    rows = []
    for line, (v, i, offset) in scored.items():
        if v != top:
            continue
        row = cells(line)
        if not row[label].text:
            return ()
        sentence = _row(i, offset, line, header)
        rows.append((_cell(sentence, row[label]), _cell(sentence, row[k])))
    return tuple(rows)


def _settled(question: Question, chosen: Sequence[tuple[Top, str]]) -> Reading:
    """The tables' top rows (each with its value column's header) as one answer when every table names the same
    labels: one row's label, or the tie (`_tie`); else each table's top values, from the first table that names
    those labels (the documents disagree)."""
    by_labels: dict[frozenset[str], tuple[Top, str]] = {}
    for top, head in chosen:
        by_labels.setdefault(frozenset(label.text.casefold() for label, _ in top), (top, head))
    if len(by_labels) > 1:
        return Reading(None, tuple(cell for top, _ in by_labels.values() for _, cell in top[:TIED_SHOWN]))
    if not by_labels:
        return Reading(None)
    top, head = chosen[0]
    if len(top) == 1:
        return Reading(top[0][0])
    return Reading(None, tallies=(_tie(question, head, top),))


def _tie(question: Question, head: str, top: Top) -> Tally:
    """ "Widget B and Widget C tie for the largest quantity (12)": the labels of the tied rows (of the first
    `TIED_SHOWN`), the question's own superlative, the column's header and the value."""
    word = next((w for w in words(question.text) if w in MOST_WORDS | LEAST_WORDS), "")
    what = " ".join(part for part in ("the", word, head if head.isupper() else head.lower()) if part)
    value = top[0][1].text
    shown = top[:TIED_SHOWN]
    names = tuple(dict.fromkeys(label.text for label, _ in shown))
    if len(top) > TIED_SHOWN:
        short = f"{len(top)} rows tie at {value}"
        statement = f"{len(top)} rows tie for {what} ({value}), among them {_joined(names)}."
    elif len(names) == 1:  # one label in several rows ("Widget C" sold 12 on two days)
        short = names[0]
        statement = f"{short} has {what} ({value}), in {len(top)} rows."
    else:
        short = _joined(names)
        statement = f"{short} tie for {what} ({value})."
    return Tally(short, statement, tuple(cell for _, cell in shown), len(top), value, names)


def _joined(names: Sequence[str]) -> str:
    """ "A", "A and B", "A, B and C"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _by_document(sources: Sequence[Source]) -> dict[tuple[str, str], list[tuple[int, list[tuple[int, str]]]]]:
    """The sources' tables, one per document and header: (document, header) → [(source index, rows)] (a sheet
    split into chunks is read whole, each chunk in the sources' order)."""
    parts: dict[tuple[str, str], list[tuple[int, list[tuple[int, str]]]]] = {}
    for i, source in enumerate(sources):
        for header, rows in tables(source.text):
            parts.setdefault((_document_of(source), header), []).append((i, rows))
    return parts


def count(question: Question, sources: Sequence[Source], *, partial: bool = False) -> Reading:
    """ "How many customers are from Chile?": the rows of a table whose cell in one column is, whole, a value the
    question names ("Chile": case and punctuation aside; not "Chile Norte"), counted over the whole table (its
    chunks of one document and header), the first `COUNTED_SHOWN` cited (`Tally`). Only when the question names
    the rows it counts right after "how many" (`_counted_noun`), a noun the table's source says (its sheet, header
    or cells: "customers" by "Customer Id") or a word for a table's rows ("rows", "entries"), and no column of
    numbers ("How many units did Widget B sell?" asks for a cell: `read`); when exactly one column holds one such
    value (a value with a letter: a number the question says is no row's value here). Tables whose counts differ
    disagree (one `Tally` each). `partial`: a table was read only in part (the gateway's table step), so the count
    is a lower bound ("at least 3")."""
    noun = _counted_noun(question) if asks_how_many(question.text) and not question.options else None
    if noun is None:
        return Reading(None)
    asked = f" {_folded(question.text)} "
    figures = _figures(question.text)
    counted: dict[int, Tally] = {}  # one tally per count, from the first table that gives it
    for (_, header), chunks in _by_document(sources).items():
        said = set().union(*(_said(sources[i]) for i, _ in chunks))
        rows = _merged_rows(sources, chunks, header)
        if not (family_in(noun, said) or noun in _COUNTABLE) or _measures(noun, header, rows):
            continue
        headings = "\n".join(sources[i].heading_text for i, _ in chunks)
        rows = [(sentence, row) for sentence, row in rows if _holds_figures(row, f"{header}\n{headings}", figures)]
        held = _held_value(asked, rows)
        if held is not None and not _asks_units_of(asked, held[1]):
            k, value = held
            matching = [_cell(sentence, row[k]) for sentence, row in rows if _folded(row[k].text) == value]
            counted.setdefault(len(matching), _counted(cells(header)[k].text, matching, partial))
    return Reading(None, tallies=tuple(counted.values()))


# what a count may count though the table never says it: its own rows ("How many entries …", "… records …")
_COUNTABLE = _STRUCTURE | {stem(w) for w in ("record", "item")}


def _counted_noun(question: Question) -> str | None:
    """The stem of the noun right after "how many" ("customers" → its stem), or None (no such noun: "How many are
    from Chile?", "How many of them …": nothing says what is counted, so nothing is)."""
    said = words(question.text)
    for first, second, noun in zip(said, said[1:], said[2:], strict=False):
        if (first, second) in HOW_MANY and noun not in STOP_WORDS:
            return stem(noun)
    return None


def _merged_rows(
    sources: Sequence[Source], chunks: Sequence[tuple[int, Sequence[tuple[int, str]]]], header: str
) -> list[tuple[Sentence, list[Cell]]]:
    """Each row of one table given in chunks, as a sentence of its source with its cells; rows of another width
    left out, a chunk given twice read once (two equal rows are two rows: counted twice)."""
    width = len(cells(header))
    seen: set[tuple[str, int]] = set()
    merged = []
    for i, rows in chunks:
        for offset, line in rows:
            row = cells(line)
            if len(row) == width and (sources[i].chunk_id, offset) not in seen:
                seen.add((sources[i].chunk_id, offset))
                merged.append((_row(i, offset, line, header), row))
    return merged


def _measures(noun: str, header: str, rows: Sequence[tuple[Sentence, list[Cell]]]) -> bool:
    """Does the counted noun name a column of numbers ("How many units …" over "Units")? Then the question asks for
    that column's cell, not for a count of rows."""
    for k, head in enumerate(_heads(cells(header))):
        if family_in(noun, head) and rows and all(_a_number(row[k].text) for _, row in rows):
            return True
    return False


def _a_number(text: str) -> bool:
    """A cell that is one number and no word ("12", "$5,000"; not "Gadget 05", a label with a number)."""
    return len(numbers(text, number_words=False)) == 1 and not words(text)


def _held_value(asked: str, rows: Sequence[tuple[Sentence, list[Cell]]]) -> tuple[int, str] | None:
    """The one column and value (folded: `_folded`) such that a cell of that column is, whole, words the question
    says (`asked`, folded and padded); a value inside another the question says as well ("Chile" in "Chile Norte")
    is that one's part. None when no cell or several columns or values are (the question does not say which)."""
    held: dict[tuple[int, str], None] = {}
    for _, row in rows:
        for k, cell in enumerate(row):
            value = _folded(cell.text)
            if value and f" {value} " in asked and _names_a_value(value):
                held[(k, value)] = None
    kept = [(k, v) for k, v in held if not any(v != w and f" {v} " in f" {w} " for _, w in held)]
    return kept[0] if len(kept) == 1 else None


def _asks_units_of(asked: str, value: str) -> bool:
    """The question counts the value itself, with nothing after it that names rows ("How many Widget B were sold
    …?": units of a product, a column's number, not rows; "How many Chile customers …?" counts customers): no
    count of rows answers it."""
    found = re.search(rf" (?:how many|how much) {re.escape(value)} (\w+)", asked)
    return found is not None and found.group(1) in STOP_WORDS


def _names_a_value(folded: str) -> bool:
    """A cell's folded words that may be a value a question names: a letter in them, and a word that is no stop
    word ("Chile", "Widget B"; not "12", not "a")."""
    return any(c.isalpha() for c in folded) and any(w not in STOP_WORDS for w in folded.split())


def _counted(head: str, matching: Sequence[Span], partial: bool) -> Tally:
    """ "3 rows have Country “Chile”.": the count, the column and the value; the first `COUNTED_SHOWN` rows cited
    (the rest said as "10 cited, 4 more"); "at least" when the table was read only in part."""
    n, value = len(matching), matching[0].text
    short = f"at least {n}" if partial else str(n)
    rows = "row has" if n == 1 else "rows have"
    statement = f"{short[:1].upper()}{short[1:]} {rows} {head} “{value}”"
    if n > COUNTED_SHOWN:
        statement += f" ({COUNTED_SHOWN} cited, {n - COUNTED_SHOWN} more)"
    if partial:
        statement += ", of the rows read (the table is longer than the part read)"
    return Tally(short, f"{statement}.", tuple(matching[:COUNTED_SHOWN]), n, value)


def _folded(text: str) -> str:
    """`text`'s letter and digit runs in lower case, one space apart: what a cell and a question are compared as
    ("Chile." = "chile", "Vega-Gentry" = "vega gentry")."""
    return " ".join(_RUN.findall(text.casefold()))


def _same_value(text: str, value: str) -> bool:
    """A cell holds `value`: the same folded words, or the same one number ("12" and "12.0")."""
    if _folded(text) == _folded(value):
        return True
    mine, theirs = numbers(text, number_words=False), numbers(value, number_words=False)
    return len(mine) == len(theirs) == 1 and mine[0].value == theirs[0].value


def _document_of(source: Source) -> str:
    """The document a source is a chunk of: its chunk id's part before the ordinal ("<document id>:<ordinal>")."""
    return source.chunk_id.rpartition(":")[0] or source.chunk_id


def _merged_column(
    chunks: Sequence[tuple[int, Sequence[tuple[int, str]]]], width: int, k: int
) -> dict[str, tuple[float, int, int]] | None:
    """Column `k` of one table given in chunks ((source index, rows) each): row line → (value, source, offset), a
    row two chunks both hold counted once; None when a cell there is no single number (the column is no measure)."""
    scored: dict[str, tuple[float, int, int]] = {}
    for i, rows in chunks:
        column = _column(rows, width, k)
        if rows and not column:
            return None
        for v, offset, line in column:
            scored.setdefault(line, (v, i, offset))
    return scored


def _column(rows: Sequence[tuple[int, str]], width: int, k: int) -> list[tuple[float, int, str]]:
    """(value, offset, line) of each row by its cell in column `k`; [] when a cell there is no single number."""
    scored = []
    for offset, line in rows:
        row = cells(line)
        if len(row) != width:
            continue
        stated = numbers(row[k].text, number_words=False)
        if len(stated) != 1:
            return []
        scored.append((stated[0].value, offset, line))
    return scored


def _said_all(rest: set[str], said: set[str]) -> bool:
    """Does the source say each key term that neither the row nor the column did, a word for the table's own
    parts aside ("row", "column": `_STRUCTURE`)?"""
    return all(family_in(f, said) or f in _STRUCTURE for f in rest)


def describe(span: Span) -> str:
    """What a cell says, for a reader: "2021, Saltwater Ducks: 110" (its row's other named cell, its column's
    header, the value); a form's line as it is ("Server: Quack Quackling")."""
    if "\n" not in span.sentence.context:
        return span.sentence.text
    pairs = _headed(span.sentence)
    k = next((j for j, (_, c) in enumerate(pairs or []) if c.start == span.start), None)
    if pairs is None or k is None:
        return span.text
    label = next((c.text for j, (_, c) in enumerate(pairs) if j != k and c.text), "")
    return ", ".join(part for part in (label, pairs[k][0].text) if part) + f": {span.text}"


def row_text(sentence: Sentence, answer_start: int | None = None, asked: str = "") -> str:
    """A table's row as a reader reads it, each cell after its column's header: "First Name: Sheryl · Last Name:
    Baxter · Company: Rasmussen Group" ("Q3 · 2026: 30" under an empty corner); with the answer's cell
    (`answer_start`, its offset in the row) and the question (`asked`), only the cells that name a word of the
    question and the answer's, when there are such (a 12-column customer row shows the name and the e-mail, not
    the phones and the website); a line that is no table row as it is."""
    headed = _headed(sentence)
    if headed is None:
        return sentence.text
    pairs = [(h, c) for h, c in headed if c.text]
    said, figures = set(words(asked)), _figures(asked)
    named = [
        (h, c)
        for h, c in pairs
        if c.start == answer_start or set(words(c.text)) & said or any(_writes(c.text, f) for f in figures)
    ]
    if answer_start is not None and len(named) > 1:
        pairs = named
    return " · ".join(f"{h.text}: {c.text}" if h.text else c.text for h, c in pairs)


def _headed(sentence: Sentence) -> list[tuple[Cell, Cell]] | None:
    """A table row's cells, each with its column's header cell (the row's context is the header, then the row);
    None for a line that is no such row (a form's field)."""
    header, _, line = sentence.context.partition("\n")
    row, columns = cells(line), cells(header)
    return list(zip(columns, row, strict=True)) if line and len(row) == len(columns) else None


def _heads(columns: Sequence[Cell]) -> list[set[str]]:
    """Each header cell's word stems (what a question's key terms are matched against)."""
    return [{stem(w) for w in words(c.text)} for c in columns]


def _row(source: int, offset: int, line: str, header: str) -> Sentence:
    """A table's row as a sentence of its source: the line, read in the context of its header."""
    return Sentence(source, offset, offset + len(line), line, f"{header}\n{line}")


def _cell(sentence: Sentence, cell: Cell) -> Span:
    return Span(sentence, cell.start, cell.end, TABLE, True, 1.0, 1.0)


def _disagreeing(spans: Sequence[Span]) -> tuple[Span, ...]:
    """One cell per value when each source gives one value and they differ (the documents disagree); () when a
    source gives several (the question does not say which column or row: unsettled, not a disagreement)."""
    by_source: dict[int, set[str]] = {}
    for span in spans:
        by_source.setdefault(span.sentence.source_index, set()).add(span.text.casefold())
    if len(by_source) < 2 or any(len(values) > 1 for values in by_source.values()):
        return ()
    first: dict[str, Span] = {}
    for span in spans:
        first.setdefault(span.text.casefold(), span)
    return tuple(first.values()) if len(first) > 1 else ()


# A form's field on a line of its own: "Telephone: (123) 456-7890", "Receipt date: 16/03/2026" (the parser writes
# a form's key-value items so); the key at most six words, no table row, no sentence before the colon.
_FIELD = re.compile(
    r"^[ \t]*(?P<key>[^\W\d_][^:|\n.!?]{0,60}?)[ \t]*:[ \t]+(?P<value>[^\s|][^\n|]{0,200}?)[ \t]*$", re.M
)


_ASKS_NUMBER = frozenset({stem("number"), stem("amount")})
# "What was the total number of ducks in 2024?": words that say a number is asked (and how it adds up); a column
# may name them, but the source need not say them
_AGGREGATE = _ASKS_NUMBER | {stem("total")}
# "Who was the server at the restaurant?": the role asked for is the copula's noun ("server"); the rest is context
# ("Who is the restaurant's server?": "server", not its possessor)
_ROLE = re.compile(
    r"who\s+(?:is|was|are|were)\s+(?:the\s+|a\s+|an\s+)?(?:[^\W\d_]+['’]s?\s+)?([^\W\d_]+)", re.IGNORECASE
)


def _said(source: Source) -> set[str]:
    """The stems a source says, its headings (title, section path: a sheet's name) included."""
    return {stem(w) for w in words(f"{source.heading_text}\n{source.text}")}


def _caption(source: Source) -> set[str]:
    """The stems of a source's headings (title, section path) and of its lines that are no table row: what names
    a table's values when its header does not (a chart's caption, the slide's title)."""
    lines = [line for line in source.text.splitlines() if not _ROW.match(line)]
    return {stem(w) for w in words("\n".join([source.heading_text, *lines]))}


def _fields(question: Question, sources: Sequence[Source]) -> list[Span]:
    """The values of the sources' "Key: value" lines whose key names the most of the question's key terms ("Who
    was the server?" → "Server: Quack Quackling"): of the asked type (a number for when and how many, none for
    who), every other key term and name of the question said elsewhere in the same source, not the question's own
    words again; a key naming the role a copular who-question asks for ("Who was the server at the restaurant?")
    first. All those that tie; the caller answers only when they agree."""
    wanted = {stem(f) for f in question.focus}
    if question.answer_type is AnswerType.NUMBER and len(wanted) > 1:
        wanted -= _ASKS_NUMBER  # "What is the telephone number …": "number" says what is asked, like "how many"
    if question.answer_type is AnswerType.PLACE:
        return []  # "Where is the restaurant?" is not its "Restaurant: Docling"
    own = {stem(e) for e in question.entities} | wanted  # a value that says only these repeats the question
    asked_role = _ROLE.match(question.text.strip())
    role = stem(asked_role.group(1)) if asked_role else None
    best: list[tuple[int, Span]] = []
    for i, source in enumerate(sources):
        said = _said(source)
        named = all(family_in(stem(e), said) for e in question.entities)
        if not named or not all(acronym_in(a, source.text) for a in question.acronyms):
            continue
        for match in _FIELD.finditer(source.text):
            key_words = words(match.group("key"))
            if len(key_words) > 6:
                continue
            key = {stem(w) for w in key_words}
            by_key = {f for f in wanted if family_in(f, key)}
            if not by_key or not all(family_in(f, said) for f in wanted - by_key):
                continue
            value = match.group("value")
            if question.answer_type in NUMERIC and not numbers(value):
                continue
            if question.answer_type is AnswerType.PERSON and any(c.isdigit() for c in value):
                continue  # a who-question is not answered by "Receipt date: 16/03/2026"
            said_by_value = {stem(w) for w in words(value)}
            if said_by_value and said_by_value <= own:
                continue  # "Restaurant: Docling" for "… at the Docling restaurant?": the question's own words
            line = match.group(0).strip()
            offset = source.text.index(line, match.start())
            sentence = Sentence(i, offset, offset + len(line), line, line)
            start = match.start("value") - offset
            # the role a copular who-question asks for ("Who was the server …?") outranks its other terms
            rank = len(by_key) + (len(wanted) if role is not None and family_in(role, key) else 0)
            best.append((rank, _cell(sentence, Cell(value, start, start + len(value)))))
    top = max((n for n, _ in best), default=0)
    return [span for n, span in best if n == top]


def identifiers(text: str) -> set[str]:
    """The values a question quotes that a table's cell may hold whole (casefolded): a word with letters and an
    "@", a digit or "://" in it ("vmata@colon.com", "DD37Cf93aecA6Dc", "INV-2024/17", "http://www.hobbs.com/"),
    its surrounding punctuation left out ("and/or" is none)."""
    found = set()
    for raw in text.split():
        token = raw.strip(_AROUND)
        coded = "@" in token or "://" in token or any(c.isdigit() for c in token)
        if len(token) >= 3 and coded and any(c.isalpha() for c in token):
            found.add(token.casefold())
    return found


def _by_value(
    row: list[Cell], heads: list[set[str]], held: list[int], wanted: set[str], asked: set[str], question: Question
) -> list[tuple[Rank, int]]:
    """The columns that answer a question about the row holding one of its values (`identifiers`; the cells
    `held`): those whose header names the most of its other key terms (`_rank`), not a column holding the value;
    for a when-question, of those the ones headed as a date ("Subscription Date"; any such column when none
    names more); for a who-question that names none, the row's one column headed as a name ("Name", "Customer
    Name"; a first and a last name are two columns: no one cell answers, `_full_name` reads both)."""
    ranked = [
        (_rank(len(named), heads[k], asked), k)
        for k in range(len(row))
        if k not in held and row[k].text and (named := {f for f in wanted if family_in(f, heads[k])})
    ]
    if question.answer_type is AnswerType.DATE:  # "When did … subscribe?": a column headed as a date
        dated = [(n, k) for n, k in ranked if heads[k] & _DATED]
        ranked = dated or [((1, 0), k) for k in range(len(row)) if k not in held and heads[k] & _DATED]
    if not ranked and question.answer_type is AnswerType.PERSON:
        ranked = [((0, 0), k) for k in range(len(row)) if k not in held and row[k].text and _whole_name(heads[k])]
        return ranked if len(ranked) == 1 else []
    return _most(ranked)


_FIRST = frozenset(stem(w) for w in ("first", "given", "fore"))  # with "name": the column of a first name
_LAST = frozenset(stem(w) for w in ("last", "family"))  # with "name": the column of a last name
_SURNAME = stem("surname")


def _whole_name(head: set[str]) -> bool:
    """A column headed as someone's whole name ("Name", "Customer Name"; not "First Name" or "Surname")."""
    return _NAME in head and not head & (_FIRST | _LAST)


def _full_name(
    row: list[Cell], columns: list[Cell], heads: list[set[str]], held: list[int], sentence: Sentence
) -> Tally | None:
    """ "Who has the email vmata@colon.com?" over a table that writes a name in two columns ("First Name", "Last
    Name"; "Given Name", "Surname"): the row's two cells as one name, said with the value the row holds, that value's
    cell cited and both name cells named (`Tally.holds` checks they are the cited row's); None when the row has not
    exactly one of each, or a name cell holds a digit or an "@" (`heads`: the header cells' stems, `_heads`)."""
    first = [j for j, head in enumerate(heads) if _NAME in head and head & _FIRST and row[j].text]
    last = [j for j, head in enumerate(heads) if ((_NAME in head and head & _LAST) or _SURNAME in head) and row[j].text]
    if len(first) != 1 or len(last) != 1 or any(_CODE.search(row[j].text) for j in (*first, *last)):
        return None
    given, family, value = row[first[0]], row[last[0]], _cell(sentence, row[held[0]])
    short = f"{given.text} {family.text}"
    statement = (
        f"{short} ({columns[first[0]].text} “{given.text}”, {columns[last[0]].text} “{family.text}”) has "
        f"{columns[held[0]].text} “{value.text}”."
    )
    return Tally(short, statement, (value,), 1, value.text, (given.text, family.text))


def _figures(question: str) -> set[str]:
    """The question's words with a digit, casefolded and without the punctuation around them ("2024-01-07",
    "2021", "q3"): values a row must hold to be the one asked about (`_holds_figures`)."""
    if not ROW_FIGURES:
        return set()
    tokens = (raw.strip(_AROUND).casefold() for raw in question.split())
    return {t for t in tokens if any(c.isdigit() for c in t)}


def _holds_figures(row: list[Cell], around: str, figures: set[str]) -> bool:
    """Every one of `figures` is written in one of the row's cells or `around` it (the table's header, its
    source's headings: "Sales 2021"), not inside a longer word or number ("2024-01-07" in "2024-01-07 00:00:00",
    "2021" in a "2021" column; not "7" in "07"): "What was the revenue of Widget C on 2024-01-07?" is about that
    day's row only, and a row of another year answers no question about 2021."""
    texts = [c.text for c in row] + [around]
    return all(any(_writes(t, f) for t in texts) for f in figures)


def _writes(text: str, figure: str) -> bool:
    """`text` writes `figure` (casefolded), not inside a longer word or number."""
    return re.search(rf"(?<![\w.,]){re.escape(figure)}(?![\w]|[.,]\d)", text.casefold()) is not None


def _names_whole(row: list[Cell], names: set[str], asked: str) -> bool:
    """Every cell of the row that holds one of the question's name words is said whole by the question (`asked`:
    folded and padded with spaces; "Widget C" for "… of Widget C on …"; not "Widget A", which holds "widget" as
    well)."""
    holding = [c for c in row if set(words(c.text)) & names]
    return bool(holding) and all(f" {_folded(c.text)} " in asked for c in holding)


def _named(row: list[Cell], heads: list[set[str]], names: set[str], wanted: set[str]) -> list[int]:
    """The columns that answer a question with names: the row holds every name, the column's header one of the
    other key terms (not a column that holds a name)."""
    said = [set(words(c.text)) for c in row]
    if not names <= set().union(*said):
        return []
    holding = {k for k, w in enumerate(said) if w & names}
    return [
        k
        for k, head in enumerate(heads)
        if k not in holding and row[k].text and any(family_in(f, head) for f in wanted)
    ]


def _labelled(
    row: list[Cell], heads: list[set[str]], wanted: set[str], asked: set[str], caption: Set[str] = frozenset()
) -> list[tuple[int, int, set[str]]]:
    """The columns that may answer a question without names ("How many calories per portion do berries have?",
    "How many saltwater ducks were observed in 2021?"): the row's other cells hold some of its key terms
    ("Berries") or one of its numbers ("2021"), the column's header others ("Calories per portion", "Saltwater
    Ducks"). Each as (key terms its header holds, column, the key terms neither says): `lookup` answers from those
    whose source says the rest (the table's caption: "Wild Duck Observations by Year"), the header holding the
    most ("Saltwater Ducks" over "Freshwater Ducks"), and counts the others as rivals. A table of labels and one
    column of values (a chart of one series: "| Q3 | 30 |" under "| | 2026 |") has its values named by its
    caption or heading ("Quarterly revenue"), `caption`."""
    cells_said = [{stem(w) for w in words(c.text)} for c in row]
    found: list[tuple[int, int, set[str]]] = []
    for k, head in enumerate(heads):
        if not row[k].text:
            continue
        others = [j for j in range(len(row)) if j != k]
        by_column = {f for f in wanted if family_in(f, head)}
        if not by_column and len(row) == 2:  # a header that names nothing asked ("2026"): the caption names it
            by_column = {f for f in wanted if family_in(f, caption)}
        by_row = {f for f in wanted if any(family_in(f, cells_said[j]) for j in others)} - by_column
        numbered = any(row[j].text.strip().casefold() in asked for j in others)
        if by_column and (by_row or numbered):
            found.append((len(by_column), k, wanted - by_column - by_row))
    return found


def _most(columns: list[tuple[Rank, int]]) -> list[tuple[Rank, int]]:
    """The (rank, column) pairs whose header names the question best (`_rank`)."""
    top = max((n for n, _ in columns), default=(0, 0))
    return [(n, k) for n, k in columns if n == top]


def _rank(named: int, head: set[str], asked: set[str]) -> Rank:
    """How well a column's header names a question: the key terms it holds, then the fewer words the question
    does not say ("Ducks" over "Freshwater Ducks" for "How many ducks were observed in 2024?": the column that
    says exactly what is asked, not a part of it)."""
    return (named, -len(head - asked))


def _asked_words(question: Question) -> set[str]:
    """The stems of every word of the question (what a header may say without narrowing it)."""
    return {stem(w.lower()) for w in words(question.text)}
