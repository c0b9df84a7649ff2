"""The parsed document model and its extraction from a DoclingDocument (blocks, headings, section paths)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import re2
from docling_core.types.doc import (
    CodeItem,
    ContentLayer,
    CoordOrigin,
    DocItemLabel,
    DoclingDocument,
    FieldItem,
    GroupItem,
    GroupLabel,
    ListItem,
    NodeItem,
    PictureItem,
    SectionHeaderItem,
    TableItem,
    TextItem,
    TitleItem,
)

_WS = re.compile(r"\s+")

_PARAGRAPH_LABELS = {
    DocItemLabel.TEXT,
    DocItemLabel.PARAGRAPH,
    DocItemLabel.REFERENCE,
    DocItemLabel.FOOTNOTE,
    DocItemLabel.FORMULA,
    DocItemLabel.CHECKBOX_SELECTED,
    DocItemLabel.CHECKBOX_UNSELECTED,
    # a form's parts outside a field item (a field item is one "key: value" paragraph, `_field_text`)
    DocItemLabel.FIELD_HEADING,
    DocItemLabel.FIELD_KEY,
    DocItemLabel.FIELD_VALUE,
    DocItemLabel.FIELD_HINT,
}
_KIND_BY_LABEL = {DocItemLabel.LIST_ITEM: "list_item", DocItemLabel.CODE: "code", DocItemLabel.CAPTION: "caption"}


@dataclass
class BBox:
    left: float
    top: float
    right: float
    bottom: float
    unit: str  # "pt" (PDF, top-left origin), "emu" (PPTX)


@dataclass
class Block:
    kind: str  # heading, paragraph, table, list_item, code, caption
    text: str
    section_path: list[str] = field(default_factory=list)
    page: int = 0  # 1-based; 0 when unknown
    bbox: BBox | None = None
    rows: list[list[str]] | None = None  # set when kind == "table"
    heading_level: int = 0  # set when kind == "heading" (1 = top)
    ocr_confidence: float | None = None  # set when the block was read by OCR (0..1)


@dataclass
class Heading:
    text: str
    level: int
    page: int


@dataclass
class ParsedDocument:
    title: str
    format: str
    page_count: int
    blocks: list[Block]
    pipeline: str
    warnings: list[str] = field(default_factory=list)  # what could not be read well (OCR: pages, confidence)
    ocr_pages: int = 0  # pages read by OCR

    @property
    def headings(self) -> list[Heading]:
        return [Heading(b.text, b.heading_level, b.page) for b in self.blocks if b.kind == "heading"]


def mean_confidence(parts: list[tuple[float | None, int]]) -> float | None:
    """The character-weighted mean OCR confidence of (confidence, characters) parts; None when none was OCR'd.
    Text-layer parts count as certain (1.0) beside OCR'd ones."""
    if all(conf is None for conf, _ in parts):
        return None
    chars = sum(n for _, n in parts)
    if not chars:
        return None
    return sum((1.0 if conf is None else conf) * n for conf, n in parts) / chars


def clean_text(text: str) -> str:
    return _WS.sub(" ", text).strip()


def table_text(rows: list[list[str]]) -> str:
    """Markdown-ish rows: `| a | b |`, one line per row."""
    return "\n".join("| " + " | ".join(cell.replace("\n", " ").strip() for cell in row) + " |" for row in rows)


# a checkbox's state written before its text, as Docling's Markdown does ("[x] Coffee", "[ ] Tea"): the text alone
# lost which options were chosen and which tasks were done
_CHECKBOX_MARK = {DocItemLabel.CHECKBOX_SELECTED: "[x]", DocItemLabel.CHECKBOX_UNSELECTED: "[ ]"}


def marked(item: TextItem) -> str:
    """A text item's text, a checkbox's with its state ("[x] Design")."""
    mark = _CHECKBOX_MARK.get(item.label)
    return f"{mark} {item.text}" if mark else item.text


def _table_rows(item: TableItem, doc: DoclingDocument) -> list[list[str]]:
    rows = [[clean_text(_cell_text(cell, doc)) for cell in row] for row in item.data.grid]
    return [row for row in rows if any(row)]


def _cell_text(cell: Any, doc: DoclingDocument) -> str:
    """A cell's text; a rich cell (its own items: "Choose as many as you like:" and checkboxes) from its items, so
    that each checkbox keeps its state."""
    ref = getattr(cell, "ref", None)
    if ref is None:
        return str(cell.text)
    node = ref.resolve(doc)
    items = [node] if isinstance(node, TextItem) else _inline_texts(node, doc, every_child=True)
    if not any(t.label in _CHECKBOX_MARK for t in items):
        return str(cell.text)
    return " ".join(marked(t) for t in items if t.text.strip())


def _bbox(item: TextItem | TableItem | PictureItem, doc: DoclingDocument, fmt: str) -> tuple[int, BBox | None]:
    if not item.prov:
        return 0, None
    prov = item.prov[0]
    page = prov.page_no or 0
    if fmt == "pdf":
        size = doc.pages[page].size if page in doc.pages else None
        if size is None:
            return page, None
        box = prov.bbox.to_top_left_origin(size.height)
        return page, BBox(box.l, box.t, box.r, box.b, "pt")
    if fmt == "pptx" and prov.bbox.coord_origin == CoordOrigin.TOPLEFT:
        box = prov.bbox
        return page, BBox(box.l, box.t, box.r, box.b, "emu")
    return page, None


# RE2 (linear): a backtracking `\s+(x)` is quadratic over a long whitespace run without x (document text)
_NO_SPACE_BEFORE = re2.compile(r"\s+([,.;:!?)\]}])")
_NO_SPACE_AFTER = re2.compile(r"([(\[{])\s+")


def _inline_texts(node: NodeItem, doc: DoclingDocument, every_child: bool = False) -> list[TextItem]:
    """The text items under an inline group, in order (inline groups may nest); with `every_child`, every text
    item under the node (a rich table cell's)."""
    found: list[TextItem] = []
    for ref in node.children:
        child = ref.resolve(doc)
        if isinstance(child, TextItem):
            found.append(child)
        if every_child or isinstance(child, GroupItem):
            found.extend(_inline_texts(child, doc, every_child))
    return found


def join_inline(parts: list[str]) -> str:
    """Joins the runs of an inline group (text, `code`, links) into one sentence-like string."""
    text = " ".join(p for p in parts if p)
    return str(_NO_SPACE_AFTER.sub(r"\1", _NO_SPACE_BEFORE.sub(r"\1", text)))


def _chart_rows(item: PictureItem) -> list[list[str]]:
    """The data table of a chart picture (`meta.tabular_chart`: a PPTX or XLSX chart's series by category), as
    rows; [] for any other picture. Docling's Markdown prints it under the image; we dropped it with the image."""
    chart = getattr(item.meta, "tabular_chart", None) if item.meta is not None else None
    data = getattr(chart, "chart_data", None)
    if data is None:
        return []
    rows = [[clean_text(cell.text) for cell in row] for row in data.grid]
    return [row for row in rows if any(row)]


# Docling's HTML backend: a <dl> is a list group named so, each <dt> a list item, its <dd>s a list group under it
_DESCRIPTION_LIST, _DESCRIPTIONS = "description list", "descriptions"
_ENDS_SENTENCE = (".", "!", "?", ";", ":")


def _descriptions(item: ListItem, doc: DoclingDocument) -> list[GroupItem] | None:
    """The groups of <dd>s under a description list's term (a <dt>); None for any other list item."""
    parent = item.parent.resolve(doc) if item.parent is not None else None
    if not (isinstance(parent, GroupItem) and parent.name == _DESCRIPTION_LIST):
        return None
    children = [ref.resolve(doc) for ref in item.children]
    return [c for c in children if isinstance(c, GroupItem) and c.name == _DESCRIPTIONS]


def _description_texts(groups: list[GroupItem], doc: DoclingDocument) -> str:
    """What a term's <dd>s say, as one line ("A high-level programming language; Known for its simplicity"): each
    <dd>'s text, or its inline runs joined; a <dd> that ends a sentence is followed by a space only."""
    said: list[str] = []
    for group in groups:
        for ref in group.children:
            child = ref.resolve(doc)
            runs = _inline_texts(child, doc) if not clean_text(getattr(child, "text", "")) else [child]
            text = clean_text(join_inline([r.text for r in runs if isinstance(r, TextItem)]))
            if text:
                said.append(text)
    line = said[0] if said else ""
    for text in said[1:]:
        line += (" " if line.endswith(_ENDS_SENTENCE) else "; ") + text
    return line


def _field_text(runs: list[TextItem]) -> str:
    """A form field (Docling's key-value items: an HTML receipt's "Telephone" / "(123) 456-7890") as one line,
    "Telephone: (123) 456-7890", so that search and answers read the key with its value; its marker ("3") is
    left out. Before, the whole field region was dropped: not one of its labels was a paragraph's."""
    key = " ".join(clean_text(r.text) for r in runs if r.label in (DocItemLabel.FIELD_HEADING, DocItemLabel.FIELD_KEY))
    value = " ".join(clean_text(r.text) for r in runs if r.label in (DocItemLabel.FIELD_VALUE, DocItemLabel.FIELD_HINT))
    if key and value:
        return f"{key.rstrip(':')}: {value}"
    return key or value or " ".join(clean_text(r.text) for r in runs if r.label != DocItemLabel.MARKER).strip()


def declared_title(doc: DoclingDocument) -> str:
    """The title the file declares: an HTML page's `<title>` (Docling keeps it as a furniture title: "Restaurant
    Receipt Form", where the body's first heading is "HEADER"), else the body's first title item (a DOCX Title
    paragraph, an HTML `<h1>`, a slide's title; a Wikipedia page's "Duck", not its "Contents" box before it);
    "" when it declares none (its first heading, else its file name, is then the title)."""
    titles = [t for t in doc.texts if isinstance(t, TitleItem) and clean_text(t.text)]
    furniture = [t for t in titles if t.content_layer == ContentLayer.FURNITURE]
    chosen = furniture or titles
    return clean_text(chosen[0].text) if chosen else ""


MAX_TITLE_WORDS = 12


def bold_opening(doc: DoclingDocument) -> str:
    """A document without a title or a heading that opens with a short paragraph set whole in bold is titled by
    it: "Changes to the DOCLANG Core Spec" (a DOCX whose title is a bold line in the Normal style), where the file
    name, "docx_rich_tables_01", said nothing a question asks about. "" otherwise (a long line, one that ends a
    sentence, or one not bold)."""
    for item, _ in doc.iterate_items():
        if not isinstance(item, TextItem):
            continue
        text = clean_text(item.text)
        if not text:
            continue
        formatting = getattr(item, "formatting", None)
        bold = formatting is not None and bool(formatting.bold)
        if bold and len(text.split()) <= MAX_TITLE_WORDS and not text.endswith((".", ",", ";", ":")):
            return text
        return ""
    return ""


def blocks_from_docling(doc: DoclingDocument, fmt: str) -> list[Block]:
    """Body items in reading order as blocks; heading levels compressed to 1..n, section paths attached.

    An inline group (a paragraph with `code`, links or emphasis in Markdown/HTML/DOCX) is one paragraph,
    not one block per run; items inside tables belong to the table, not to the body.
    """
    raw: list[tuple[Block, int]] = []  # block and its raw heading level (-1 for non-headings)
    consumed: set[str] = set()  # items already represented by an enclosing inline group or table
    for item, _depth in doc.iterate_items(with_groups=True):
        parent_ref = item.parent.cref if item.parent is not None else None
        if parent_ref in consumed:
            consumed.add(item.self_ref)
            continue
        if isinstance(item, GroupItem):
            if item.label == GroupLabel.SHEET and clean_text(item.name):
                # a workbook's sheet name heads its tables ("Duck Observations"), as in Docling's own Markdown
                raw.append((Block("heading", clean_text(item.name)), 1))
                continue
            if item.label == GroupLabel.INLINE:
                consumed.add(item.self_ref)
                runs = _inline_texts(item, doc)
                text = clean_text(join_inline([r.text for r in runs]))
                if not text:
                    continue
                parent = item.parent.resolve(doc) if item.parent is not None else None
                kind = "list_item" if isinstance(parent, ListItem) else "paragraph"
                page, box = _bbox(runs[0], doc, fmt)
                raw.append((Block(kind, text, page=page, bbox=box), -1))
            continue
        if isinstance(item, FieldItem):
            consumed.add(item.self_ref)
            runs = _inline_texts(item, doc)
            text = _field_text(runs)
            if text:
                page, box = _bbox(runs[0], doc, fmt)
                raw.append((Block("paragraph", text, page=page, bbox=box), -1))
            continue
        if isinstance(item, PictureItem):
            rows = _chart_rows(item)  # a chart's own data (PPTX, XLSX): its numbers, read as a table
            if rows:
                page, box = _bbox(item, doc, fmt)
                raw.append((Block("table", table_text(rows), page=page, bbox=box, rows=rows), -1))
            continue
        if isinstance(item, TableItem):
            consumed.add(item.self_ref)
            rows = _table_rows(item, doc)
            if not rows:
                continue
            page, box = _bbox(item, doc, fmt)
            raw.append((Block("table", table_text(rows), page=page, bbox=box, rows=rows), -1))
            continue
        if not isinstance(item, TextItem):
            continue
        text = clean_text(marked(item))
        if not text or not clean_text(item.text):
            continue
        page, box = _bbox(item, doc, fmt)
        descriptions = _descriptions(item, doc) if isinstance(item, ListItem) else None
        if descriptions is not None:  # a description list's term with what its <dd>s say: "CSS: Cascading …"
            consumed.update(group.self_ref for group in descriptions)
            said = _description_texts(descriptions, doc)
            raw.append((Block("list_item", f"{text}: {said}" if said else text, page=page, bbox=box), -1))
            continue
        if isinstance(item, TitleItem):
            raw.append((Block("heading", text, page=page, bbox=box), 0))
        elif isinstance(item, SectionHeaderItem):
            raw.append((Block("heading", text, page=page, bbox=box), max(1, item.level)))
        elif item.label in _KIND_BY_LABEL:
            raw.append(
                (
                    Block(
                        _KIND_BY_LABEL[item.label],
                        item.text.strip() if isinstance(item, CodeItem) else text,
                        page=page,
                        bbox=box,
                    ),
                    -1,
                )
            )
        elif item.label in _PARAGRAPH_LABELS:
            raw.append((Block("paragraph", text, page=page, bbox=box), -1))
    return assign_sections(raw)


def assign_sections(raw: list[tuple[Block, int]]) -> list[Block]:
    """Compresses the raw heading levels present into 1..n and fills every block's section path."""
    levels = sorted({level for _, level in raw if level >= 0})
    level_map = {level: i + 1 for i, level in enumerate(levels)}
    stack: list[tuple[int, str]] = []
    blocks: list[Block] = []
    for block, level in raw:
        if level >= 0:
            block.heading_level = level_map[level]
            while stack and stack[-1][0] >= block.heading_level:
                stack.pop()
            stack.append((block.heading_level, block.text))
        block.section_path = [text for _, text in stack]
        blocks.append(block)
    return blocks


def paragraphs_from_text(text: str) -> list[Block]:
    """Plain text: paragraphs are separated by blank lines; lines inside a paragraph are joined."""
    parts = re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    return [Block("paragraph", clean_text(part)) for part in parts if part.strip()]
