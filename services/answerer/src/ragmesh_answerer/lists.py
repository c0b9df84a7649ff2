"""lists: a question answered by the list under a heading that names it, or by the boxes a checklist ticks.

"What are the next steps?" on a deck whose slide "Next Steps" is a numbered list was withheld: no span of one
sentence answers it (the answer is the list), and "what the documents say" showed the list's first two items only.
When extraction and the tables find nothing, `listed` looks for a source (a chunk) that is a list of at least
`MIN_ITEMS` items and nothing else, whose own heading (the last of its section path) says one of the question's key
terms and whose headings together (title and path) say all of them: "Q3 Revenue Summary › Next Steps" for "What are
the next steps?". Its items are the answer, each an exact slice of the source without its bullet or number, shown
in order and cited; the model is not asked. The first such source (the caller's ranking) answers alone. Only
what-and-which questions of no other asked type (not who, when, where or how many), with no choice offered.
Without such a heading, a lead-in line that says every key term and ends with a colon ("Global CoE engagements
cover topics including:") answers with the lines after it (`led_in`).

A checklist (the parser writes each checkbox with its state: "[x] Design", "[ ] Documentation") answers a question
that asks which were ticked ("Which tasks are done before release?", "Which breakfast options were chosen?":
`CHECKED_WORDS`) or which were not ("not", `UNCHECKED_WORDS`): `checked` gives the ticked (or unticked) items of the
first source with checkboxes that says the question's other key terms, each an exact slice, in order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragmesh_answerer.evidence import EvidenceQuote
from ragmesh_answerer.prompting import Source
from ragmesh_common.text.questions import AnswerType, Question
from ragmesh_common.text.words import family_in, stem, words

MIN_ITEMS = 2
MAX_ITEM_WORDS = 20  # a line longer than this after a lead-in is prose, not an item
# a lead-in: a line that ends with a colon ("Global CoE engagements cover topics including:")
_LEAD_IN = re.compile(r"^[^\n:]{3,200}:[ \t]*$", re.MULTILINE)
_LINE = re.compile(r"\n([^\n]*)")
_GLYPH = re.compile(r"^[^\W\d_] \S")  # one letter and a space: a bullet glyph a PDF font drew as a letter
# a list item's line: a bullet or a number ("1.", "2)", "a."), then its text
_ITEM = re.compile(r"^[ \t]*(?:[-*•‣◦▪]|\d{1,3}[.)]|[a-z][.)])[ \t]+(?P<text>[^\n]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Listed:
    source_index: int
    items: list[EvidenceQuote]  # each an exact slice of the source's text, in order

    @property
    def text(self) -> str:
        return "\n".join(f"- {q.text} [{self.source_index + 1}]" for q in self.items)

    @property
    def short(self) -> str:
        return "; ".join(q.text for q in self.items)


def listed(question: Question, sources: Sequence[Source]) -> Listed | None:
    """The items of the first source that is a list under a heading naming the question (module docstring)."""
    keys = _list_keys(question)
    if keys is None:
        return None
    for i, source in enumerate(sources):
        if not source.section_path:
            continue
        own = {stem(w) for w in words(source.section_path[-1])}
        heads = {stem(w) for w in words(source.heading_text)}
        if not any(family_in(k, own) for k in keys) or not all(family_in(k, heads) for k in keys):
            continue
        items = _items(source)
        if len(items) >= MIN_ITEMS:
            quotes = [EvidenceQuote(i, source.chunk_id, text, s, e, source.heading_text, 1.0) for text, s, e in items]
            return Listed(i, quotes)
    return None


# a question asking for a heading's own words ("What is the title of the second slide?") is not answered by the
# items under that heading (stop 59: it got the slide's bullet list, verified)
_NAMING_NOUNS = frozenset(stem(w) for w in ("title", "name", "heading", "caption", "label", "subject"))


def _list_keys(question: Question) -> set[str] | None:
    """The key terms a list must be named by, for a what-or-which question of no other type and no choice that
    does not ask for a title or name; None for any other question."""
    if question.answer_type is not AnswerType.OTHER or question.options:
        return None
    keys = question.key_stems()
    if keys & _NAMING_NOUNS:
        return None
    return keys or None


def led_in(question: Question, sources: Sequence[Source]) -> Listed | None:
    """The items a lead-in line introduces, when that line names the question: "Global CoE engagements cover topics
    including:" then a line per topic, for "What topics do Global CoE engagements cover?" (a PDF's list whose
    bullets were glyphs, not marks the parser knows). The lead-in ends with a colon and says every key term of
    the question; the items are the lines right after it (at least `MIN_ITEMS`, each at most `MAX_ITEM_WORDS`
    words, up to a blank line or the next lead-in; when the first has a bullet, as far as the bullets go), without
    a bullet; a one-character glyph that opens every item ("r Database performance …") is a bullet too. Same
    questions as `listed`; the first such source answers."""
    keys = _list_keys(question)
    if keys is None:
        return None
    for i, source in enumerate(sources):
        for lead in _LEAD_IN.finditer(source.text):
            said = {stem(w) for w in words(f"{source.heading_text}\n{lead.group(0)}")}
            if not all(family_in(k, said) for k in keys):
                continue
            items = _lines_after(source.text, lead.end())
            if len(items) >= MIN_ITEMS:
                quotes = [EvidenceQuote(i, source.chunk_id, t, a, b, source.heading_text, 1.0) for t, a, b in items]
                return Listed(i, quotes)
    return None


def _lines_after(text: str, at: int) -> list[tuple[str, int, int]]:
    """The item lines that follow a lead-in ending at `at`: (text, start, end), bullets and a common glyph off."""
    found: list[tuple[str, int, int]] = []
    bulleted = False  # the first item has a bullet: so must the rest
    for line in _LINE.finditer(text, at):
        body, where = line.group(1), line.start(1)
        if not body.strip() or body.rstrip().endswith(":") or len(words(body)) > MAX_ITEM_WORDS:
            break
        item = _ITEM.match(body)
        if found and bulleted and item is None:
            break  # "- Use sun cream", then "Hmm, what else…": the list's bullets ended
        bulleted = bulleted or (not found and item is not None)
        start = where + (item.start("text") if item else len(body) - len(body.lstrip()))
        end = where + len(body.rstrip())
        found.append((text[start:end], start, end))
    glyphs = {t[:2] for t, _, _ in found}
    if len(found) >= MIN_ITEMS and len(glyphs) == 1 and _GLYPH.match(found[0][0]):
        found = [(t[2:], a + 2, b) for t, a, b in found]  # "r Database …": every item opens with one glyph
    return found


# a question asking which boxes are ticked, or which are not (its words, lower-cased)
CHECKED_WORDS = frozenset(
    {"choose", "chose", "chosen", "select", "selected", "check", "checked", "tick", "ticked", "done", "complete"}
    | {"completed", "finished", "marked", "picked"}
)
UNCHECKED_WORDS = frozenset({"not", "unchecked", "unticked", "open", "remaining", "pending", "left", "undone"})
_ASKING = frozenset(stem(w) for w in CHECKED_WORDS | UNCHECKED_WORDS)  # not key terms a checklist must say
# a checkbox and its text: up to the next checkbox, a table cell's end or the line's
_CHECKBOX = re.compile(r"\[(?P<mark>[x ])\] (?P<text>[^\[|\n]+)")


def checked(question: Question, sources: Sequence[Source]) -> Listed | None:
    """The ticked items (or, asked which are not, the unticked ones) of the first source with checkboxes that says
    the question's key terms besides the asking words (module docstring)."""
    if question.answer_type is not AnswerType.OTHER or question.options:
        return None
    asked = {w.casefold() for w in words(question.text)}
    if not asked & CHECKED_WORDS:
        return None
    mark = " " if asked & UNCHECKED_WORDS else "x"
    keys = question.key_stems() - _ASKING
    for i, source in enumerate(sources):
        boxes = list(_CHECKBOX.finditer(source.text))
        if not boxes:
            continue
        said = {stem(w) for w in words(f"{source.heading_text}\n{source.text}")}
        if not all(family_in(k, said) for k in keys):
            continue
        found = []
        for m in boxes:
            text = m.group("text").rstrip()
            if m.group("mark") == mark and text:
                start = m.start("text")
                found.append(
                    EvidenceQuote(i, source.chunk_id, text, start, start + len(text), source.heading_text, 1.0)
                )
        if found:
            return Listed(i, found)
    return None


def _items(source: Source) -> list[tuple[str, int, int]]:
    """The list items of the source's text (text, start, end) when every other non-blank line is one of its
    headings (a chunk may open with its section's), else []."""
    headings = {h.strip().casefold() for h in (source.title, *source.section_path)}
    lines = [line for line in source.text.splitlines() if line.strip() and line.strip().casefold() not in headings]
    found = []
    for m in _ITEM.finditer(source.text):
        item = m.group("text").rstrip()
        if item:
            found.append((item, m.start("text"), m.start("text") + len(item)))
    return found if len(found) == len(lines) else []
