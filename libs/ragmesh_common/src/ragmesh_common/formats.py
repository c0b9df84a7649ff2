"""Accepted file formats: extension and MIME type to a ragmesh format name, and a check that the content is
what the extension says (`check_content`), run at upload and again by Parse."""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass
from pathlib import PurePath

from ragmesh_common.errors import InvalidArgument


@dataclass(frozen=True)
class Format:
    """One accepted file format: everything the gateway, the parser and the CLI need to know about it. Adding a
    format is adding one entry to FORMATS (a Docling input format, or plain text the parser reads itself)."""

    name: str  # reported in ParseResponse.format
    extensions: tuple[str, ...]  # no dot, lower case; the first is the one Docling recognises
    mime_types: tuple[str, ...]
    docling: str | None  # Docling's InputFormat value; None: plain text, read by the parser itself
    content: str  # what check_content expects: "text", "pdf" or "ooxml"
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
)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
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
_RELATIONSHIP = re.compile(rb"<Relationship\b[^>]*>", re.IGNORECASE)
_ATTRIBUTE = re.compile(rb'(\w+)\s*=\s*["\']([^"\']*)["\']')


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
        main = _ooxml_main_part(head)
        if main is not None and main.split("/", 1)[0] != folder:
            raise InvalidArgument(f"{name}: not {what} (its main part is {main or 'missing'}, not in {folder}/)")
    return fmt


def _suffix(filename: str) -> str:
    return PurePath(filename).suffix.lower().lstrip(".") or "(none)"


def _ooxml_main_part(content: bytes) -> str | None:
    """The path of the officeDocument part of a complete OOXML container ("" when the container has none);
    None when `content` is not a complete ZIP (a head only)."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
            rels = archive.read("_rels/.rels") if "_rels/.rels" in names else b""
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return None
    for tag in _RELATIONSHIP.findall(rels):
        attrs = {k.decode().lower(): v.decode("utf-8", "replace") for k, v in _ATTRIBUTE.findall(tag)}
        if attrs.get("type", "").endswith("/officeDocument"):
            target = posixpath.normpath(attrs.get("target", "").lstrip("/"))
            return target if target in names else ""
    return ""
