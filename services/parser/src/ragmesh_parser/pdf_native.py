"""Structure for text-layer PDFs without layout weights.

Docling's model-free `NativePdfPipeline` yields one text line per cell (page, box, font) but no
headings, paragraphs or reading structure. This module rebuilds them:

1. running headers/footers (lines repeated in the page margins across pages) and page numbers go;
2. heading candidates are lines matching a PDF bookmark, set larger than the body text, or set whole in an
   emphasised font where the body is not (heavier, or italic and standing alone: `emphasised`); a line that
   starts with a lower-case word or reads as a caption is not one; adjacent candidate lines of one style form
   one heading. A line's style is read from its words' fonts, so a paragraph that opens with a bold name is
   not a bold line;
3. the remaining lines merge into paragraphs (and bullet list items) by spacing, size and indentation;
4. Docling's `HeadingHierarchyModel` assigns the heading levels (bookmarks > numbering > style).

The result is an ordinary `DoclingDocument`, so every format shares one block extraction.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache

import pypdfium2 as pdfium
from docling.datamodel.document import ConversionResult
from docling.datamodel.pipeline_options import HeadingHierarchyOptions
from docling.models.stages.heading_hierarchy.heading_hierarchy_model import HeadingHierarchyModel
from docling.utils.font_style import parse_font_style, weight_class
from docling.utils.pdf_outline import _PdfOutlineItem, extract_outline_from_pdfium
from docling_core.types.doc import BoundingBox, CoordOrigin, DocItemLabel, DoclingDocument, ProvenanceItem, Size
from docling_core.types.doc.page import SegmentedPdfPage

from ragmesh_parser.ocr import OcrPage

logger = logging.getLogger(__name__)

MARGIN_RATIO = 0.12  # share of the page height, top and bottom, where running furniture lives
REPEAT_RATIO = 0.2  # a margin line on this share of the pages (at least 2-3) is a running header/footer
HEADING_SIZE_RATIO = 1.15  # larger than the body text by this factor -> heading candidate
MAX_HEADING_WORDS = 20
_BULLET = re.compile(r"^\s*([•∞▪◦●○■□➢►\-–*·]|\(?\d{1,2}[.)]\s|\(?[a-z][.)]\s)")
_BULLET_CHARS = "•∞▪◦●○■□➢►–*·-"
_PAGE_NUMBER = re.compile(r"^\W*(page\s*)?(\d+|[ivxlcdm]+)(\s*(of|/)\s*\d+)?\W*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?:;\"”')\]]$")
# a heading does not open with a lower-case word ("global businesses of all sizes. The …" is a paragraph's line
# set in a taller box); "iPhone" and "a." (an enumeration) do
_LOWER_START = re.compile(r"^[a-z]{2,}\b(?:[^.)]|$)")
# a caption: "Figure 3-1 …", "Table 2. …", "[표 1] …" (a bracketed label with its number)
_CAPTION = re.compile(
    r"^(?:(?:figure|fig\.|table|listing|chart|exhibit|source|note)\s*[\dIVX]|\[[^\]]{1,12}\d+\])", re.IGNORECASE
)
HEAVIER = 200  # a font this much heavier than the body's (Medium over Light, Semibold over Regular) stands out
# TeX's font names (CMBX10, SFTI1000, …) say the style in two letters after the family, which Docling's
# parser does not read
_TEX_FONT = re.compile(r"^(?:CM|SF|EC|TC|LM)(BX|B|TI|IT|SL|BXSL|BXTI|BI)\d+$")
EMPHASIS_SHARE = 0.9  # a line is set in a style when this share of its characters is


@dataclass
class Line:
    page: int
    left: float
    top: float
    right: float
    bottom: float
    text: str
    size: float
    bold: bool
    heading: bool = False
    # characters per font (the name without its subset prefix), from the line's words; empty for OCR
    fonts: Counter[str] = field(default_factory=Counter)
    confidence: float | None = None  # OCR's, for a line read from a page image; None for a text-layer line
    # OCR: the box on the page as given (left, top, right, bottom), for provenance; `left`..`bottom` are the line
    # on the page read upright and deskewed, for layout
    page_box: tuple[float, float, float, float] | None = None

    @property
    def height(self) -> float:
        return self.bottom - self.top


@dataclass
class Segment:
    """A heading or a paragraph/list item assembled from lines."""

    kind: str  # heading, paragraph, list_item
    lines: list[Line] = field(default_factory=list)

    @property
    def text(self) -> str:
        out = ""
        for line in self.lines:
            piece = line.text.strip()
            if not out:
                out = piece
            elif out.endswith("-") and piece[:1].islower():
                out = out[:-1] + piece  # de-hyphenate a word broken across lines
            else:
                out += " " + piece
        return out


def read_outline(content: bytes) -> list[_PdfOutlineItem]:
    """The PDF bookmarks (flat, document order), or [] when there are none or they cannot be read."""
    try:
        pdf = pdfium.PdfDocument(content)
    except Exception as exc:  # noqa: BLE001 - an unreadable outline only loses one signal
        logger.debug("no outline: %s", exc)
        return []
    try:
        return extract_outline_from_pdfium(pdf)
    finally:
        pdf.close()


@lru_cache(maxsize=1024)
def _font(name: str) -> str:
    return re.sub(r"^/?[A-Z]{6}\+", "", name.lstrip("/"))


@dataclass(frozen=True)
class FontStyle:
    """A font's weight and slant as its name says them."""

    weight: int  # 400 regular, 700 bold; 400 when the name does not say
    italic: bool


@lru_cache(maxsize=1024)
def font_style(name: str) -> FontStyle:
    """Weight and slant from a PDF font name: Docling's reading, and TeX's two-letter codes it does not know."""
    style = parse_font_style(name)
    if style.known:
        return FontStyle(style.weight, style.italic)
    tex = _TEX_FONT.match(_font(name))
    if tex:
        code = tex.group(1)
        return FontStyle(700 if "B" in code else 400, any(c in code for c in ("TI", "IT", "SL", "BI")))
    return FontStyle(400, False)


def _word_fonts(parsed: SegmentedPdfPage, height: float) -> list[tuple[float, float, str, int]]:
    """(x, y) of each word's centre (top-left origin), its font and its length."""
    words = []
    for word in parsed.word_cells:
        text = word.text.strip() if word.text else ""
        name = getattr(word, "font_name", "") or ""
        if text and name:
            rect = word.rect  # its centre, read from the corners (a box object per word costs 5x the parse)
            cx = (rect.r_x0 + rect.r_x1 + rect.r_x2 + rect.r_x3) / 4
            cy = (rect.r_y0 + rect.r_y1 + rect.r_y2 + rect.r_y3) / 4
            if rect.coord_origin is CoordOrigin.BOTTOMLEFT:
                cy = height - cy
            words.append((cx, cy, _font(name), len(text)))
    return words


def _lines(pages: dict[int, SegmentedPdfPage]) -> list[Line]:
    lines: list[Line] = []
    for page_no in sorted(pages):
        parsed = pages[page_no]
        height = parsed.dimension.height
        page_lines: list[Line] = []
        cell_fonts: list[str] = []
        for cell in parsed.textline_cells:
            text = cell.text.strip() if cell.text else ""
            if not text:
                continue
            box = cell.rect.to_bounding_box().to_top_left_origin(height)
            page_lines.append(Line(page_no, box.l, box.t, box.r, box.b, text, round(cell.rect.height, 1), False))
            cell_fonts.append(_font(getattr(cell, "font_name", "") or ""))
        _read_fonts(page_lines, cell_fonts, _word_fonts(parsed, height))
        lines.extend(page_lines)
    return lines


def _read_fonts(lines: list[Line], cell_fonts: list[str], words: list[tuple[float, float, str, int]]) -> None:
    """Each line's characters per font, from the words whose centre lies in it (the line's cell carries one font
    name only: its first run's). A line's `bold` is then whether nearly all of its characters are bold; a line no
    word falls in keeps its cell's font."""
    ordered = sorted(lines, key=lambda ln: ln.top)
    tops = [ln.top for ln in ordered]
    tallest = max((ln.height for ln in lines), default=0.0)
    for cx, cy, font, chars in words:
        at = bisect_right(tops, cy) - 1
        while at >= 0 and ordered[at].top >= cy - tallest:
            line = ordered[at]
            if line.top <= cy <= line.bottom and line.left - 1 <= cx <= line.right + 1:
                line.fonts[font] += chars
                break
            at -= 1
    for line, cell_font in zip(lines, cell_fonts, strict=True):
        if not line.fonts and cell_font:
            line.fonts[cell_font] = len(line.text)
        total = sum(line.fonts.values())
        if total:
            bold = sum(n for f, n in line.fonts.items() if weight_class(font_style(f).weight) >= 2)
            line.bold = bold >= EMPHASIS_SHARE * total


def _furniture_key(line: Line) -> str:
    text = re.sub(r"\d+", "#", line.text.lower())
    return re.sub(r"\s+", " ", text).strip()


def drop_furniture(lines: list[Line], page_heights: dict[int, float]) -> list[Line]:
    """Removes page numbers and lines repeated in the page margins (same text modulo digits, same height band)."""
    n_pages = len(page_heights)

    def in_margin(line: Line) -> bool:
        height = page_heights[line.page]
        return line.top < height * MARGIN_RATIO or line.bottom > height * (1 - MARGIN_RATIO)

    pages_by_key: dict[tuple[str, int], set[int]] = defaultdict(set)
    for line in lines:
        if in_margin(line):
            pages_by_key[(_furniture_key(line), round(line.top / 6))].add(line.page)

    def repeated(line: Line) -> bool:
        key, band = _furniture_key(line), round(line.top / 6)
        pages: set[int] = set()
        for near in (band - 1, band, band + 1):  # tolerate a slightly shifted baseline
            pages |= pages_by_key.get((key, near), set())
        needed = 2 if n_pages <= 4 else max(3, REPEAT_RATIO * n_pages)
        return n_pages >= 2 and len(pages) >= needed

    # Peel from each page edge inwards and stop at the first real line: body text that happens to
    # repeat (boilerplate clauses) must survive when a non-repeated line sits between it and the edge.
    dropped: set[int] = set()
    by_page: dict[int, list[Line]] = defaultdict(list)
    for line in lines:
        by_page[line.page].append(line)
    for page_lines in by_page.values():
        ordered = sorted(page_lines, key=lambda ln: ln.top)
        height = page_heights[ordered[0].page]
        for edge in (ordered, ordered[::-1]):
            for line in edge:
                if id(line) in dropped:
                    continue
                in_zone = (
                    line.top < height * MARGIN_RATIO if edge is ordered else line.bottom > height * (1 - MARGIN_RATIO)
                )
                # a footer row holds several cells ("12", "Chapter 3 ..."): one marker condemns the row
                row = [other for other in page_lines if abs(other.top - line.top) <= 3]
                if not in_zone or not any(_PAGE_NUMBER.match(o.text) or repeated(o) for o in row):
                    break
                dropped.update(id(other) for other in row)
    kept = [line for line in lines if id(line) not in dropped]
    if len(kept) != len(lines):
        logger.debug("dropped %d running header/footer lines", len(lines) - len(kept))
    return kept


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", " ", text.lower()).strip()


def _matches_bookmark(line: Line, outline: list[_PdfOutlineItem]) -> bool:
    text = _norm(line.text)
    if not text:
        return False
    for item in outline:
        if item.page_no is not None and item.page_no != line.page:
            continue
        title = _norm(item.title)
        if title and (title == text or SequenceMatcher(None, title, text).ratio() >= 0.85):
            return True
    return False


def mark_headings(lines: list[Line], outline: list[_PdfOutlineItem]) -> None:
    if not lines:
        return
    sizes: Counter[float] = Counter()
    fonts: Counter[str] = Counter()
    for line in lines:
        sizes[line.size] += len(line.text)
        fonts.update(line.fonts)
    body_size = sizes.most_common(1)[0][0]
    body = font_style(fonts.most_common(1)[0][0]) if fonts else FontStyle(400, False)
    body_bold = weight_class(body.weight) >= 2
    bookmarked: set[int] = set()
    for i, line in enumerate(lines):
        words = line.text.split()
        if not any(ch.isalpha() for ch in line.text) or len(words) > MAX_HEADING_WORDS or line.text[0] in _BULLET_CHARS:
            continue
        if outline and _matches_bookmark(line, outline):
            line.heading = True
            bookmarked.add(id(line))
            continue
        if _CAPTION.match(line.text) or line.text.endswith((",", ";", "،", "؛")):
            continue
        larger = line.size >= body_size * HEADING_SIZE_RATIO
        styled = line.size >= body_size * 0.95 and (
            (line.bold and not body_bold) or emphasised(line, body, lines[i - 1 : i] + lines[i + 1 : i + 2])
        )
        if (larger or styled) and (not _LOWER_START.match(line.text) or _carries_on(lines[i - 1 : i], line)):
            line.heading = True
    _unmark_rows([line for line in lines if line.heading and id(line) not in bookmarked])


def _unmark_rows(candidates: list[Line]) -> None:
    """Candidates side by side on one baseline, a few line heights apart, are a table's or a diagram's row of
    labels, not headings (a page's other column is further away)."""
    by_page: dict[int, list[Line]] = defaultdict(list)
    for line in candidates:
        by_page[line.page].append(line)
    for page_lines in by_page.values():
        beside = {
            id(line)
            for line in page_lines
            for other in page_lines
            if other is not line
            and abs(other.top - line.top) <= 0.5 * min(line.height, other.height)
            and 0 <= max(other.left - line.right, line.left - other.right) <= 3 * max(line.height, other.height)
        }
        for line in page_lines:
            if id(line) in beside:
                line.heading = False


def _carries_on(previous: list[Line], line: Line) -> bool:
    """Whether a line that starts lower-case goes on the heading right before it ("Implement roles and separation"
    / "of duties")."""
    return (
        bool(previous)
        and previous[0].heading
        and _continues(Segment("heading", previous), previous[0], line, "heading")
    )


def _share(line: Line, test: Callable[[FontStyle], bool]) -> float:
    total = sum(line.fonts.values())
    return sum(n for font, n in line.fonts.items() if test(font_style(font))) / total if total else 0.0


def emphasised(line: Line, body: FontStyle, neighbours: list[Line]) -> bool:
    """Whether the line is set whole in a style that stands out from the body text: heavier ("Medium" over a
    "Light" body), or italic over an upright body when it stands alone (not a line of an italic passage) and ends
    no sentence. The amt handbook's section titles are Times-Italic lines at the body's size."""
    if _share(line, lambda style: style.weight >= body.weight + HEAVIER) >= EMPHASIS_SHARE:
        return True
    if body.italic or _SENTENCE_END.search(line.text) or _share(line, lambda style: style.italic) < EMPHASIS_SHARE:
        return False
    return not any(_share(other, lambda style: style.italic) >= 0.5 for other in neighbours)


def segments(lines: list[Line]) -> list[Segment]:
    """Groups lines (in the parser's reading order) into headings, paragraphs and list items."""
    out: list[Segment] = []
    prev: Line | None = None
    for line in lines:
        kind = "heading" if line.heading else ("list_item" if _BULLET.match(line.text) else "paragraph")
        current = out[-1] if out else None
        if current is not None and prev is not None and _continues(current, prev, line, kind):
            current.lines.append(line)
        else:
            out.append(Segment(kind, [line]))
        prev = line
    for segment in out:  # a passage set in a heading's style is no heading
        if segment.kind == "heading" and len(segment.text.split()) > MAX_HEADING_WORDS:
            segment.kind = "paragraph"
    return out


def _continues(segment: Segment, prev: Line, line: Line, kind: str) -> bool:
    if kind == "list_item":
        return False  # a bullet always starts a new item
    if (segment.kind == "heading") != (kind == "heading"):
        return False
    if abs(prev.size - line.size) > 0.15 * max(prev.size, line.size):
        return False
    if kind == "heading" and (prev.bold != line.bold or line.page != prev.page):
        return False
    if line.page != prev.page:
        # a paragraph broken by the page: the previous line did not end a sentence
        return kind != "heading" and not _SENTENCE_END.search(prev.text)
    gap = line.top - prev.bottom
    if gap < -0.5 * prev.height:
        return False  # moved up: a new column or a side element
    return gap <= 0.9 * max(prev.height, line.height)


def ocr_layout_heights(pages: list[OcrPage]) -> dict[int, float]:
    """The height of each OCR'd page as read (upright), where it differs from the page as given."""
    return {page.page: page.upright_height for page in pages if page.upright_height != page.height}


def ocr_lines(pages: list[OcrPage]) -> dict[int, list[Line]]:
    """OCR'd lines as `Line`s, page by page. A box's height varies with the letters in it (ascenders, descenders),
    so heights within 25 % of the document's median line height count as the body size and only clearly larger
    lines can become heading candidates."""
    heights = sorted(ln.bottom - ln.top for page in pages for ln in page.lines)
    median = heights[len(heights) // 2] if heights else 0.0
    out: dict[int, list[Line]] = {}
    for page in pages:
        lines = []
        for ln in page.lines:
            height = ln.bottom - ln.top
            size = round(median if abs(height - median) <= 0.25 * median else height, 1)
            lines.append(
                Line(
                    page.page,
                    ln.left,
                    ln.top,
                    ln.right,
                    ln.bottom,
                    ln.text,
                    size,
                    False,
                    confidence=ln.confidence,
                    page_box=ln.page_box,
                )
            )
        out[page.page] = lines
    return out


def structure_pdf(
    conv_res: ConversionResult, content: bytes, name: str, ocr: list[OcrPage] | None = None
) -> DoclingDocument:
    """A DoclingDocument with headings (levelled), paragraphs and list items from a native-pipeline result. The
    pages in `ocr` take their OCR'd lines instead of their text layer (empty or unreadable)."""
    parsed_pages = {page.page_no: page.parsed_page for page in conv_res.pages if page.parsed_page is not None}
    src = conv_res.document
    doc = DoclingDocument(name=name, origin=src.origin)
    page_heights: dict[int, float] = {}
    for page_no, page in src.pages.items():
        doc.add_page(page_no=page_no, size=page.size)
        page_heights[page_no] = page.size.height
    parsed_pages = {no: parsed for no, parsed in parsed_pages.items() if no in page_heights}
    ocr_pages = [page for page in ocr or [] if page.page in page_heights]
    by_page = ocr_lines(ocr_pages)
    native = {no: parsed for no, parsed in parsed_pages.items() if no not in by_page}
    lines = sorted([*_lines(native), *(ln for no in sorted(by_page) for ln in by_page[no])], key=lambda ln: ln.page)
    layout = {**page_heights, **ocr_layout_heights(ocr_pages)}
    return _build(doc, lines, page_heights, layout, read_outline(content), native)


def structure_scan(pages: list[OcrPage], name: str) -> DoclingDocument:
    """A DoclingDocument from OCR'd page images (an image file), structured like a PDF's text lines."""
    doc = DoclingDocument(name=name)
    page_heights: dict[int, float] = {}
    for page in pages:
        doc.add_page(page_no=page.page, size=Size(width=page.width, height=page.height))
        page_heights[page.page] = page.height
    by_page = ocr_lines(pages)
    lines = [ln for no in sorted(by_page) for ln in by_page[no]]
    return _build(doc, lines, page_heights, {**page_heights, **ocr_layout_heights(pages)}, [], {})


def _build(
    doc: DoclingDocument,
    lines: list[Line],
    page_heights: dict[int, float],
    layout_heights: dict[int, float],
    outline: list[_PdfOutlineItem],
    parsed_pages: dict[int, SegmentedPdfPage],
) -> DoclingDocument:
    """`page_heights`: of the pages as given (provenance); `layout_heights`: as their lines were laid out (an
    OCR'd page turned to read it upright)."""
    lines = drop_furniture(lines, layout_heights)
    mark_headings(lines, outline)
    list_group = None
    for segment in segments(lines):
        first = segment.lines[0]
        same_page = [
            ln.page_box or (ln.left, ln.top, ln.right, ln.bottom) for ln in segment.lines if ln.page == first.page
        ]
        box = BoundingBox(
            l=min(b[0] for b in same_page),
            t=min(b[1] for b in same_page),
            r=max(b[2] for b in same_page),
            b=max(b[3] for b in same_page),
            coord_origin=CoordOrigin.TOPLEFT,
        ).to_bottom_left_origin(page_heights[first.page])
        text = segment.text
        prov = ProvenanceItem(page_no=first.page, bbox=box, charspan=(0, len(text)))
        if segment.kind == "list_item":
            if list_group is None:
                list_group = doc.add_list_group()
            doc.add_list_item(text=text, prov=prov, parent=list_group)
            continue
        list_group = None
        if segment.kind == "heading":
            doc.add_heading(text=text, level=1, prov=prov)
        else:
            doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)
    options = HeadingHierarchyOptions(enabled=True, use_bookmarks=True, use_numbering=True, use_style=True)
    HeadingHierarchyModel(options).assign_heading_levels(doc, parsed_pages=parsed_pages, outline=outline or None)
    return doc
