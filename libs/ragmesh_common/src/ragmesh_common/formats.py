"""Accepted file formats: extension and MIME type to a ragmesh format name, and a check that the content is
what the extension says (`check_content`), run at upload and again by Parse.

The check reads untrusted bytes, so its cost is bounded by the file's size, never by its shape: a ZIP
container's entries are judged by their declared sizes before any is read (`check_archive`: entry count,
declared total, compression ratio), only `_rels/.rels` is inflated and at most `MAX_RELS_BYTES` of it, and its
tags are read with RE2 (linear time; the backtracking `re` took 35 s over one 40,000-character attribute).
It is CPU work over a whole upload: async callers run it in a worker thread.
"""

from __future__ import annotations

import io
import posixpath
import struct
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import PurePath

import re2
from PIL import Image, UnidentifiedImageError

from ragmesh_common.errors import InvalidArgument


@dataclass(frozen=True)
class Format:
    """One accepted file format: everything the gateway, the parser and the CLI need to know about it. Adding a
    format is adding one entry to FORMATS (a Docling input format, or plain text the parser reads itself)."""

    name: str  # reported in ParseResponse.format
    extensions: tuple[str, ...]  # no dot, lower case; the first is the one Docling recognises
    mime_types: tuple[str, ...]
    docling: str | None  # Docling's InputFormat value; None: plain text, read by the parser itself
    content: str  # what check_content expects: "text", "pdf", "ooxml" or "image"
    ooxml_folder: str = ""  # OOXML: the folder of the main part (word/, ppt/, xl/)
    description: str = ""  # for error messages


FORMATS: tuple[Format, ...] = (
    Format("md", ("md", "markdown"), ("text/markdown", "text/x-markdown"), "md", "text"),
    Format("html", ("html", "htm", "xhtml"), ("text/html", "application/xhtml+xml"), "html", "text"),
    Format(
        "docx",
        ("docx",),
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",),
        "docx",
        "ooxml",
        "word",
        "a Word document",
    ),
    Format(
        "pptx",
        ("pptx",),
        ("application/vnd.openxmlformats-officedocument.presentationml.presentation",),
        "pptx",
        "ooxml",
        "ppt",
        "a PowerPoint presentation",
    ),
    Format(
        "xlsx",
        ("xlsx", "xlsm"),
        (
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "application/vnd.ms-excel.sheet.macroenabled.12",
        ),
        "xlsx",
        "ooxml",
        "xl",
        "an Excel workbook",
    ),
    Format("csv", ("csv",), ("text/csv",), "csv", "text"),
    Format("pdf", ("pdf",), ("application/pdf",), "pdf", "pdf"),
    Format("asciidoc", ("adoc", "asciidoc"), ("text/asciidoc", "text/x-asciidoc"), "asciidoc", "text"),
    Format("txt", ("txt", "text"), ("text/plain",), None, "text"),
    # scanned pages: read by OCR in the parser (docling None, content "image")
    Format("png", ("png",), ("image/png",), None, "image", description="a PNG image"),
    Format("jpeg", ("jpg", "jpeg"), ("image/jpeg",), None, "image", description="a JPEG image"),
    Format("tiff", ("tif", "tiff"), ("image/tiff",), None, "image", description="a TIFF image"),
    Format("bmp", ("bmp",), ("image/bmp", "image/x-ms-bmp"), None, "image", description="a BMP image"),
    Format("webp", ("webp",), ("image/webp",), None, "image", description="a WebP image"),
)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
IMAGE_FORMATS: frozenset[str] = frozenset(f.name for f in FORMATS if f.content == "image")
# extension (no dot, lower case) -> format name; MIME type -> format name
EXTENSIONS: dict[str, str] = {ext: f.name for f in FORMATS for ext in f.extensions}
MIME_TYPES: dict[str, str] = {mime: f.name for f in FORMATS for mime in f.mime_types}


def accepted_extensions() -> list[str]:
    return sorted(f".{ext}" for ext in EXTENSIONS)


def detect_format(filename: str, mime_type: str = "") -> str:
    """The format of a file: its extension decides; the MIME type only when the extension says nothing."""
    suffix = PurePath(filename).suffix.lower().lstrip(".")
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    mime = mime_type.split(";", 1)[0].strip().lower()
    if mime in MIME_TYPES and (not suffix or suffix == "bin"):
        return MIME_TYPES[mime]
    what = f"extension .{suffix}" if suffix else "no extension"
    if mime:
        what += f", MIME type {mime}"
    raise InvalidArgument(
        f"{filename or '<unnamed>'}: unsupported file type ({what}); accepted: {', '.join(accepted_extensions())}"
    )


# How many leading bytes `check_content` looks at for text formats and magic numbers (git's binary heuristic
# reads 8,000).
HEAD_BYTES = 8192
_ZIP_MAGIC = b"PK\x03\x04"
# Signatures of binary files that are never text.
_BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF"),
    (_ZIP_MAGIC, "a ZIP container (e.g. DOCX, XLSX)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\xd0\xcf\x11\xe0", "an old Office file"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x7fELF", "an executable"),
    (b"MZ", "an executable"),
)
_UNICODE_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
# RE2 (linear time) over untrusted bytes: a Relationship tag, and one attribute of it
_RELATIONSHIP = re2.compile(rb"(?i)<Relationship\b[^>]*>")
_ATTRIBUTE = re2.compile(rb'(\w+)\s*=\s*["\']([^"\']*)["\']')
# Limits on a ZIP container (DOCX, PPTX, XLSX), checked on the declared sizes of its central directory before
# anything is inflated. Office files hold tens to a few thousand parts; their XML deflates 5-30x and a
# repetitive sheet to ~150x, while a deflate bomb reaches ~1,000x. The parser reads the container whole, so
# the declared total bounds what one upload can make it inflate.
MAX_ARCHIVE_ENTRIES = 10_000
MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024  # declared uncompressed total
MAX_COMPRESSION_RATIO = 300  # per entry, for entries over RATIO_FLOOR_BYTES uncompressed
RATIO_FLOOR_BYTES = 1024 * 1024
MAX_RELS_BYTES = 1024 * 1024  # _rels/.rels: a few hundred bytes in any real file
# Limits on an image (a scanned page), read from its header before any pixel is decoded: Pillow's own
# decompression-bomb bound per page (89.5 megapixels: an A4 page at 1,200 dpi is 140, at 600 dpi 35), and pages
# (TIFF frames) per file.
MAX_IMAGE_PIXELS = 89_478_485  # PIL.Image.MAX_IMAGE_PIXELS
MAX_IMAGE_FRAMES = 2000
# Pillow's name for each image format (a JPEG with several pictures opens as MPO)
_PIL_FORMATS = {"png": {"PNG"}, "jpeg": {"JPEG", "MPO"}, "tiff": {"TIFF"}, "bmp": {"BMP", "DIB"}, "webp": {"WEBP"}}


class ImageTooLarge(InvalidArgument):
    """An image whose header declares more pixels or pages than a scan has (a decompression bomb)."""


def check_content(filename: str, head: bytes, mime_type: str = "") -> str:
    """The format of `filename` when its content agrees with it; `InvalidArgument` saying why when not.

    `head` is the file or its first bytes (at least `HEAD_BYTES`; OOXML needs the whole file, a truncated
    container is only checked for its ZIP signature). Text formats (content "text") must not be binary:
    no NUL byte (unless a UTF-16 byte-order mark opens it) and no binary signature; a PDF starts with %PDF
    (Acrobat allows it within the first 1,024 bytes); DOCX, PPTX and XLSX are ZIP containers whose main part
    (the officeDocument relationship of _rels/.rels) lies in word/, ppt/ or xl/.
    """
    fmt = detect_format(filename, mime_type)
    spec = BY_NAME[fmt]
    name = filename or "<unnamed>"
    if spec.content == "text":
        sample = head[:HEAD_BYTES]
        for magic, what in _BINARY_MAGIC:
            if sample.startswith(magic):
                raise InvalidArgument(f"{name}: the content is {what}, not the text a .{_suffix(filename)} file holds")
        if b"\x00" in sample and not sample.startswith(_UNICODE_BOMS[1:]):
            raise InvalidArgument(
                f"{name}: the content is binary (it contains NUL bytes), not the text a .{_suffix(filename)} file holds"
            )
    elif spec.content == "pdf":
        if b"%PDF-" not in head[:1024]:
            raise InvalidArgument(f"{name}: not a PDF (it does not start with %PDF-)")
    elif spec.content == "ooxml":
        folder, what = spec.ooxml_folder, spec.description
        if not head.startswith(_ZIP_MAGIC):
            raise InvalidArgument(f"{name}: not {what} (a .{fmt} file is a ZIP container; this one is not)")
        main = _ooxml_main_part(head, name)
        if main is not None and main.split("/", 1)[0] != folder:
            raise InvalidArgument(f"{name}: not {what} (its main part is {main or 'missing'}, not in {folder}/)")
    elif spec.content == "image":
        image_pages(name, head, fmt)
    return fmt


def image_pages(name: str, content: bytes, fmt: str) -> list[tuple[int, int]]:
    """The (width, height) of every page (frame) of an image file, read from its headers without decoding a
    pixel; `ImageTooLarge` past `MAX_IMAGE_PIXELS` per page or `MAX_IMAGE_FRAMES` pages, `InvalidArgument` when
    the bytes are not an image of format `fmt`."""
    what = BY_NAME[fmt].description
    try:
        with warnings.catch_warnings():
            # Pillow warns between its bound and twice it and refuses above: the bound is checked here, by name
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(content)) as image:
                if image.format not in _PIL_FORMATS[fmt]:
                    raise InvalidArgument(f"{name}: not {what} (the content is {image.format or 'unknown'})")
                frames = int(getattr(image, "n_frames", 1))
                if frames > MAX_IMAGE_FRAMES:
                    raise ImageTooLarge(f"{name}: the image has {frames} pages; at most {MAX_IMAGE_FRAMES}")
                sizes = []
                for frame in range(frames):
                    if frame:
                        image.seek(frame)
                    width, height = image.size
                    if width * height > MAX_IMAGE_PIXELS:
                        raise ImageTooLarge(
                            f"{name}: page {frame + 1} is {width} x {height} pixels, above the limit of "
                            f"{MAX_IMAGE_PIXELS:,} pixels per page (a decompression bomb, not a scan); refused "
                            "before decoding"
                        )
                    sizes.append((width, height))
    except InvalidArgument:
        raise
    except Image.DecompressionBombError as exc:  # Pillow's own bound, twice ours: the size is in its message
        raise ImageTooLarge(
            f"{name}: the image is above the limit of {MAX_IMAGE_PIXELS:,} pixels per page (a decompression bomb, "
            f"not a scan; {exc}); refused before decoding"
        ) from None
    except UnidentifiedImageError:
        raise InvalidArgument(f"{name}: not {what} (not an image Pillow can identify)") from None
    except (OSError, ValueError, EOFError, SyntaxError, struct.error) as exc:
        raise InvalidArgument(f"{name}: not {what} (unreadable image header: {exc})") from None
    if not sizes or any(w <= 0 or h <= 0 for w, h in sizes):
        raise InvalidArgument(f"{name}: not {what} (an image without pixels)")
    return sizes


def _suffix(filename: str) -> str:
    return PurePath(filename).suffix.lower().lstrip(".") or "(none)"


def check_archive(name: str, archive: zipfile.ZipFile) -> None:
    """`InvalidArgument` when a ZIP container declares more than a document would: too many entries, too large a
    total, or an entry inflating far beyond what real files do (a deflate bomb). Reads only the central
    directory, which `ZipFile` has already parsed."""
    entries = archive.infolist()
    if len(entries) > MAX_ARCHIVE_ENTRIES:
        raise InvalidArgument(f"{name}: the container holds {len(entries)} entries; at most {MAX_ARCHIVE_ENTRIES}")
    total = 0
    for entry in entries:
        total += entry.file_size
        if entry.file_size > RATIO_FLOOR_BYTES and entry.file_size > MAX_COMPRESSION_RATIO * max(
            entry.compress_size, 1
        ):
            raise InvalidArgument(
                f"{name}: entry {entry.filename[:100]!r} inflates {entry.compress_size} bytes to {entry.file_size} "
                f"(more than {MAX_COMPRESSION_RATIO}x: a compression bomb, not a document)"
            )
    if total > MAX_ARCHIVE_BYTES:
        raise InvalidArgument(
            f"{name}: the container inflates to {total} bytes; at most {MAX_ARCHIVE_BYTES} are accepted"
        )


def _read_entry(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, limit: int) -> bytes:
    """At most `limit` bytes of an entry whose declared size is at most `limit`; a declared size that lies is
    caught by reading one byte past it."""
    if entry.file_size > limit:
        raise InvalidArgument(f"entry {entry.filename!r} is {entry.file_size} bytes; at most {limit} are read")
    with archive.open(entry) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise InvalidArgument(f"entry {entry.filename!r} inflates past its declared size")
    return data


_EOCD = b"PK\x05\x06"  # end of central directory record
_ZIP64_LOCATOR = b"PK\x06\x07"
_EOCD_SEARCH = 22 + 65535  # the record and the longest comment


def _declared_entries(content: bytes) -> int | None:
    """The entry count a ZIP's end record declares (ZIP64 included), read before `zipfile` parses one entry per
    declared record (a 50 MB container of empty entries holds a million); None when there is no end record."""
    at = content.rfind(_EOCD, max(0, len(content) - _EOCD_SEARCH))
    if at < 0 or len(content) < at + 22:
        return None
    (count,) = struct.unpack_from("<H", content, at + 10)
    locator = at - 20
    if count == 0xFFFF and locator >= 0 and content[locator : locator + 4] == _ZIP64_LOCATOR:
        (record,) = struct.unpack_from("<Q", content, locator + 8)
        if record + 40 <= len(content) and content[record : record + 4] == b"PK\x06\x06":
            (count,) = struct.unpack_from("<Q", content, record + 32)
    return int(count)


def _ooxml_main_part(content: bytes, name: str = "<unnamed>") -> str | None:
    """The path of the officeDocument part of a complete OOXML container ("" when the container has none);
    None when `content` is not a complete ZIP (a head only). `InvalidArgument` when the container is a bomb."""
    declared = _declared_entries(content)
    if declared is not None and declared > MAX_ARCHIVE_ENTRIES:
        raise InvalidArgument(f"{name}: the container declares {declared} entries; at most {MAX_ARCHIVE_ENTRIES}")
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            check_archive(name, archive)
            names = set(archive.namelist())
            try:
                rels_entry = archive.getinfo("_rels/.rels")
            except KeyError:
                rels = b""
            else:
                try:
                    rels = _read_entry(archive, rels_entry, MAX_RELS_BYTES)
                except InvalidArgument as exc:
                    raise InvalidArgument(f"{name}: {exc}") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        if isinstance(exc, InvalidArgument):
            raise
        return None
    for tag in _RELATIONSHIP.findall(rels):
        attrs = {k.decode().lower(): v.decode("utf-8", "replace") for k, v in _ATTRIBUTE.findall(tag)}
        if attrs.get("type", "").endswith("/officeDocument"):
            target = posixpath.normpath(attrs.get("target", "").lstrip("/"))
            return target if target in names else ""
    return ""
