"""Generated scans for OCR tests and the OCR bench: known text rendered to page images (a resolution, noise, a
small rotation), saved as image files or as a PDF without a text layer, and a mixed PDF (a text page, then a
scanned one).

Text is drawn with Pillow's bundled scalable font (`ImageFont.load_default(size)`), so nothing depends on the fonts
a machine has installed.
"""

from __future__ import annotations

import io
import random
import textwrap
from collections.abc import Sequence

import pypdfium2 as pdfium
from PIL import Image, ImageDraw, ImageFilter, ImageFont

A4_INCHES = (8.27, 11.69)


def render_page(
    paragraphs: Sequence[str],
    *,
    dpi: int = 200,
    title: str = "",
    font_pt: float = 12.0,
    noise: float = 0.0,
    rotate: float = 0.0,
    seed: int = 0,
) -> Image.Image:
    """An A4 page at `dpi` with `title` (larger) and `paragraphs` (wrapped, a blank line between them), as a
    grayscale scan: `noise` is the share of pixels flipped to random grey, `rotate` degrees counter-clockwise."""
    width, height = round(A4_INCHES[0] * dpi), round(A4_INCHES[1] * dpi)
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    px = font_pt * dpi / 72
    body = ImageFont.load_default(size=px)
    margin = round(dpi * 0.9)
    y = float(margin)
    if title:
        draw.text((margin, y), title, font=ImageFont.load_default(size=px * 1.6), fill=0)
        y += px * 3
    chars = max(20, int((width - 2 * margin) / (px * 0.55)))
    for paragraph in paragraphs:
        for line in textwrap.wrap(paragraph, chars):
            if y > height - margin:
                break
            draw.text((margin, y), line, font=body, fill=0)
            y += px * 1.45
        y += px * 1.0
    if rotate:
        page = page.rotate(rotate, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=255)
    if noise:
        rng = random.Random(seed)
        pixels = page.load()
        assert pixels is not None
        for _ in range(int(noise * width * height)):
            pixels[rng.randrange(width), rng.randrange(height)] = rng.randrange(256)
        page = page.filter(ImageFilter.GaussianBlur(0.4))
    return page


def image_bytes(page: Image.Image, fmt: str = "PNG", dpi: int = 200, **options: object) -> bytes:
    buffer = io.BytesIO()
    page.save(buffer, fmt, dpi=(dpi, dpi), **options)
    return buffer.getvalue()


def scanned_pdf(pages: Sequence[Image.Image], dpi: int = 200) -> bytes:
    """A PDF of page images only (no text layer), each page `dpi` dots per inch."""
    buffer = io.BytesIO()
    first, *rest = [p.convert("RGB") for p in pages]
    first.save(buffer, "PDF", resolution=float(dpi), save_all=True, append_images=rest)
    return buffer.getvalue()


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def text_pdf(lines: Sequence[str]) -> bytes:
    """A one-page A4 PDF with a text layer: `lines` in Helvetica 11 pt."""
    ops = ["BT", "/F1 11 Tf", "14 TL", "72 770 Td"]
    ops += [f"({_escape(line)}) Tj T*" for line in lines]
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1", "replace")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write(b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets))
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def mixed_pdf(text_lines: Sequence[str], scans: Sequence[Image.Image], dpi: int = 200) -> bytes:
    """A PDF whose first page has a text layer (`text_lines`) and whose next pages are the scans."""
    document = pdfium.PdfDocument(text_pdf(text_lines))
    scanned = pdfium.PdfDocument(scanned_pdf(scans, dpi))
    try:
        document.import_pages(scanned)
        buffer = io.BytesIO()
        document.save(buffer)
        return buffer.getvalue()
    finally:
        scanned.close()
        document.close()
