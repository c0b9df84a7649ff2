"""OCR of scanned pages with RapidOCR (PP-OCR detection, direction and recognition models in ONNX, bundled with the
`rapidocr` package and run offline by onnxruntime).

Called directly rather than through Docling's `RapidOcrModel`: Docling runs OCR only in its standard PDF pipeline,
which needs the layout weights this parser runs without, and has no path for image files.

A page image gives text lines with a bounding box in PDF points (top-left origin, the convention of native PDF
lines) and the recogniser's confidence. Small skew is absorbed by the detector's rotated boxes; a page turned by
90, 180 or 270 degrees is recognised by trying the other orientations when the first reading looks sideways
(most boxes taller than wide) or reads poorly, keeping the best one and mapping its boxes back onto the page as
it was given.
"""

from __future__ import annotations

import io
import logging
import math
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageOps

from ragmesh_common.errors import InvalidArgument
from ragmesh_common.formats import image_pages

logger = logging.getLogger(__name__)

# a first reading below this mean confidence, or mostly of vertical boxes, is tried in other orientations
REORIENT_BELOW = 0.85
# a page whose char-weighted confidence is below this is reported in the document's warnings
LOW_CONFIDENCE = 0.8
_ROTATIONS = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}


@dataclass
class OcrLine:
    """One line of text. Its box on the page as given (`page_box`) is for provenance; `left`..`bottom` are the
    same line on the page read upright and deskewed, for layout (lines, paragraphs, headings). Both in PDF points,
    top-left origin."""

    text: str
    left: float
    top: float
    right: float
    bottom: float
    confidence: float
    page_box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


@dataclass
class OcrPage:
    page: int  # 1-based
    width: float  # points
    height: float
    lines: list[OcrLine] = field(default_factory=list)
    rotation: int = 0  # degrees the page image was turned (counter-clockwise) to read it upright
    skew: float = 0.0  # degrees of the text lines from the horizontal once turned

    @property
    def upright_height(self) -> float:
        return self.width if self.rotation in (90, 270) else self.height

    @property
    def confidence(self) -> float:
        """Character-weighted mean confidence (1.0 for a page without text)."""
        chars = sum(len(line.text) for line in self.lines)
        if not chars:
            return 1.0
        return sum(line.confidence * len(line.text) for line in self.lines) / chars


@dataclass
class OcrReport:
    """What OCR of one document did: pages read, pages skipped past the time bound, pages below LOW_CONFIDENCE."""

    pages: list[OcrPage] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def warnings(self, max_seconds: float) -> list[str]:
        notes = []
        low = [p for p in self.pages if p.lines and p.confidence < LOW_CONFIDENCE]
        if low:
            listed = ", ".join(f"{p.page} ({p.confidence:.2f})" for p in low[:50])
            notes.append(f"OCR confidence below {LOW_CONFIDENCE} on page(s) {listed}: check the text of the scan")
        if self.skipped:
            notes.append(
                f"OCR stopped after {max_seconds:g}s (PARSER_OCR_MAX_SECONDS): page(s) {_ranges(self.skipped)} "
                "were not read"
            )
        return notes


def _ranges(pages: list[int]) -> str:
    out: list[str] = []
    start = prev = pages[0]
    for page in [*pages[1:], -1]:
        if page == prev + 1:
            prev = page
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = page
    return ", ".join(out)


def out_of_memory(exc: BaseException) -> bool:
    """An allocation that failed inside a native library: onnxruntime answers a C++ `std::bad_alloc` (what the
    parser worker's RLIMIT_AS causes) as a RuntimeException naming it, which rapidocr wraps in its own
    ONNXRuntimeError; Python's MemoryError never comes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, MemoryError) or "bad_alloc" in str(seen) or "Failed to allocate memory" in str(seen):
            return True
        seen = seen.__cause__
    return False


class OcrEngine:
    """RapidOCR, built once per worker process. `read` is not re-entrant: one page at a time."""

    def __init__(self, threads: int = 1) -> None:
        from rapidocr import RapidOCR  # onnxruntime sessions: only workers build them

        self._engine = RapidOCR(
            params={
                "Global.log_level": "error",  # "text detection result is empty" on every blank page
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )

    def warmup(self) -> None:
        image = Image.new("L", (320, 64), 255)
        ImageDraw.Draw(image).text((8, 20), "warm up", fill=0)
        self.read(image, 1.0)

    def _run(self, image: Image.Image) -> list[tuple[np.ndarray[Any, Any], str, float]]:
        from rapidocr.utils.output import RapidOCROutput

        try:
            result = self._engine(np.asarray(image.convert("RGB")), use_cls=False)
        except Exception as exc:
            if out_of_memory(exc):  # the worker's memory limit (RLIMIT_AS), hit inside onnxruntime
                raise MemoryError(f"OCR ran out of memory: {exc.__class__.__name__}") from exc
            raise
        # an empty page gives an output of one of the partial kinds (detection only, nothing recognised)
        if not isinstance(result, RapidOCROutput) or result.boxes is None or result.txts is None:
            return []
        if result.scores is None:
            return []
        return [
            (np.asarray(box, dtype=float), str(text), float(score))
            for box, text, score in zip(result.boxes, result.txts, result.scores, strict=True)
            if str(text).strip()
        ]

    def read(self, image: Image.Image, px_per_pt: float) -> tuple[list[OcrLine], int, float]:
        """The text lines of one upright-or-turned page image (boxes in points: pixels / `px_per_pt`), the
        rotation that read it best and the skew of its lines."""
        width, height = image.size
        # the text's region only: a page of blank paper around a line or two can hide it from the detector, and a
        # smaller image is read faster
        ox, oy, crop_right, crop_bottom = _content_box(image)
        region = image.crop((ox, oy, crop_right, crop_bottom))
        found = self._run(region)
        rotation = 0
        if _needs_reorientation(found):
            sideways = _sideways(found)
            tries = (90, 270) if sideways else (180,)
            # a sideways reading may score well (the recogniser turns tall boxes), but its layout is not the page's
            best = -1.0 if sideways else _score(found)
            for angle in tries:
                turned = self._run(region.transpose(_ROTATIONS[angle]))
                if _score(turned) > best + 0.02:
                    found, rotation, best = turned, angle, _score(turned)
        turned_w, turned_h = (height, width) if rotation in (90, 270) else (width, height)
        skew = _skew(found)
        cos, sin = math.cos(math.radians(skew)), math.sin(math.radians(skew))
        cx, cy = turned_w / 2, turned_h / 2
        lines = []
        for box, text, score in found:
            xs, ys = _unrotate(box, rotation, crop_right - ox, crop_bottom - oy)
            xs, ys = xs + ox, ys + oy  # on the page as given
            tx, ty = _turn(xs, ys, rotation, width, height)  # on the page read upright
            # deskewed: turned back by the skew about the page centre, so that a box's height is its text's
            dx, dy = tx - cx, ty - cy
            ux, uy = cx + dx * cos + dy * sin, cy - dx * sin + dy * cos
            lines.append(
                OcrLine(
                    unicodedata.normalize("NFKC", text).strip(),
                    float(ux.min()) / px_per_pt,
                    float(uy.min()) / px_per_pt,
                    float(ux.max()) / px_per_pt,
                    float(uy.max()) / px_per_pt,
                    score,
                    (
                        float(xs.min()) / px_per_pt,
                        float(ys.min()) / px_per_pt,
                        float(xs.max()) / px_per_pt,
                        float(ys.max()) / px_per_pt,
                    ),
                )
            )
        return _rows(lines), rotation, skew


def _content_box(image: Image.Image) -> tuple[int, int, int, int]:
    """The box (left, top, right, bottom) around the page's dark content with a margin; the whole page when it is
    blank. Found on a 4x reduced copy, where isolated noise pixels average out and text stays dark."""
    width, height = image.size
    small = image.convert("L").reduce(4) if min(width, height) >= 64 else image.convert("L")
    factor = width / small.size[0]
    box = small.point(lambda v: 255 if v < 160 else 0).getbbox()
    if box is None:
        return 0, 0, width, height
    margin = max(width, height) * 0.02
    left, top, right, bottom = (v * factor for v in box)
    return (
        max(0, int(left - margin)),
        max(0, int(top - margin)),
        min(width, int(right + margin) + 1),
        min(height, int(bottom + margin) + 1),
    )


def _turn(
    x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], rotation: int, width: float, height: float
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A point on the image as given (`width` x `height`), on the image turned `rotation` degrees counter-clockwise."""
    if rotation == 90:
        return y, width - x
    if rotation == 180:
        return width - x, height - y
    if rotation == 270:
        return height - y, x
    return x, y


def _skew(found: list[tuple[np.ndarray[Any, Any], str, float]]) -> float:
    """The median angle (degrees, y down) of the long text boxes' top edges."""
    angles = [
        math.degrees(math.atan2(float(box[1][1] - box[0][1]), float(box[1][0] - box[0][0])))
        for box, text, _ in found
        if len(text) >= 8
    ]
    angles = [a for a in angles if abs(a) < 30]
    return float(np.median(angles)) if angles else 0.0


def _score(found: list[tuple[np.ndarray[Any, Any], str, float]]) -> float:
    """Character-weighted confidence times a share of letters: sideways or upside-down text reads as few, poor
    characters."""
    chars = sum(len(text) for _, text, _ in found)
    if not chars:
        return 0.0
    return sum(score * len(text) for _, text, score in found) / chars * min(1.0, chars / 20)


def _sideways(found: list[tuple[np.ndarray[Any, Any], str, float]]) -> bool:
    vertical = 0.0
    total = 0.0
    for box, text, _ in found:
        width = float(np.linalg.norm(box[1] - box[0]))
        height = float(np.linalg.norm(box[3] - box[0]))
        total += len(text)
        vertical += len(text) if height > 1.5 * width else 0
    return total > 0 and vertical > 0.5 * total


def _needs_reorientation(found: list[tuple[np.ndarray[Any, Any], str, float]]) -> bool:
    if not found:
        return True  # text turned 90 degrees can hide from a first detection
    chars = sum(len(text) for _, text, _ in found)
    mean = sum(score * len(text) for _, text, score in found) / max(chars, 1)
    return _sideways(found) or mean < REORIENT_BELOW


def _unrotate(
    box: np.ndarray[Any, Any], rotation: int, width: float, height: float
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The x and y of a box found on the image turned by `rotation` degrees counter-clockwise, on the image as given
    (`width` x `height`)."""
    x, y = box[:, 0], box[:, 1]
    if rotation == 90:  # turned CCW: (x, y) -> (y, W - x)
        return width - y, x
    if rotation == 180:
        return width - x, height - y
    if rotation == 270:  # turned CW: (x, y) -> (H - y, x)
        return y, height - x
    return x, y


def _rows(lines: list[OcrLine]) -> list[OcrLine]:
    """Joins pieces of one printed line that the detector split at wide spaces, in reading order (top to bottom,
    then left to right, on the upright page)."""
    ordered = sorted(lines, key=lambda ln: ((ln.top + ln.bottom) / 2, ln.left))
    rows: list[OcrLine] = []
    for line in ordered:
        last = rows[-1] if rows else None
        height = line.bottom - line.top
        if (
            last is not None
            and abs((last.top + last.bottom) / 2 - (line.top + line.bottom) / 2)
            < 0.5 * min(height, last.bottom - last.top)
            and 0 <= line.left - last.right < 2.5 * height
        ):
            chars_last, chars_line = len(last.text), len(line.text)
            last.confidence = (last.confidence * chars_last + line.confidence * chars_line) / (chars_last + chars_line)
            last.text = f"{last.text} {line.text}"
            last.right = max(last.right, line.right)
            last.top = min(last.top, line.top)
            last.bottom = max(last.bottom, line.bottom)
            last.page_box = (
                min(last.page_box[0], line.page_box[0]),
                min(last.page_box[1], line.page_box[1]),
                max(last.page_box[2], line.page_box[2]),
                max(last.page_box[3], line.page_box[3]),
            )
        else:
            rows.append(line)
    return rows


def _upright(image: Image.Image) -> Image.Image:
    """8-bit RGB on white (transparency flattened), turned as its EXIF orientation says."""
    image = ImageOps.exif_transpose(image) or image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        return ImageOps.autocontrast(image.convert("F").convert("L")).convert("RGB")  # high bit depth scans
    return image.convert("RGB")


class ImageFile:
    """The pages of an image file (a multi-page TIFF has several), decoded one at a time. The headers are checked
    first (`image_pages`): a decompression bomb is refused before a pixel is decoded. The file's resolution gives
    the page size in points, 72 dpi when it declares none."""

    def __init__(self, name: str, content: bytes, fmt: str) -> None:
        self.name = name
        self.sizes = image_pages(name, content, fmt)
        self._image = Image.open(io.BytesIO(content))

    def close(self) -> None:
        self._image.close()

    def page(self, number: int) -> tuple[Image.Image, float]:
        """Page `number` (1-based) as upright 8-bit RGB, and its pixels per point."""
        try:
            self._image.seek(number - 1)
            frame = self._image
            dpi = frame.info.get("dpi") or (72.0, 72.0)
            try:
                px_per_pt = max(float(dpi[0]), 1.0) / 72.0
            except (TypeError, ValueError, IndexError):
                px_per_pt = 1.0
            return _upright(frame), px_per_pt
        except (OSError, ValueError, SyntaxError, EOFError) as exc:
            raise InvalidArgument(f"{self.name}: page {number} could not be decoded ({exc})") from None


def ocr_pages(
    engine: OcrEngine,
    numbers: list[int],
    load: Callable[[int], tuple[Image.Image, float]],
    max_seconds: float,
    progress: Callable[[int, int], None] | None = None,
) -> OcrReport:
    """OCR of the pages `numbers` (`load(number)` gives a page's image and pixels per point) until `max_seconds`
    have passed; the pages left are recorded as skipped. `progress(done, total)` after each page."""
    report = OcrReport()
    started = time.monotonic()
    for index, number in enumerate(numbers):
        if time.monotonic() - started > max_seconds:
            report.skipped = numbers[index:]
            logger.warning("OCR stopped after %.0fs: %d page(s) not read", max_seconds, len(report.skipped))
            break
        image, px_per_pt = load(number)
        lines, rotation, skew = engine.read(image, px_per_pt)
        width, height = image.size
        report.pages.append(OcrPage(number, width / px_per_pt, height / px_per_pt, lines, rotation, skew))
        del image
        if progress is not None:
            progress(index + 1, len(numbers))
    report.seconds = time.monotonic() - started
    return report
