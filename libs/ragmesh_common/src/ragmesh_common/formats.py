"""Accepted file formats: extension and MIME type to a ragmesh format name, and a check that the content is
what the extension says (`check_content`), run at upload and again by Parse."""
from __future__ import annotations

import io
import posixpath
import re
import zipfile
from pathlib import PurePath

from ragmesh_common.errors import InvalidArgument

# extension (no dot, lower case) -> format name reported in ParseResponse.format
EXTENSIONS: dict[str, str] = {
    "md": "md", "markdown": "md",
    "html": "html", "htm": "html", "xhtml": "html",
    "docx": "docx",
    "pptx": "pptx",
    "xlsx": "xlsx", "xlsm": "xlsx",
    "csv": "csv",
    "pdf": "pdf",
    "txt": "txt", "text": "txt",
}

MIME_TYPES: dict[str, str] = {
    "text/markdown": "md", "text/x-markdown": "md",
    "text/html": "html", "application/xhtml+xml": "html",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.ms-excel.sheet.macroenabled.12": "xlsx",
    "text/csv": "csv",
    "application/pdf": "pdf",
    "text/plain": "txt",
}


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
TEXT_FORMATS = frozenset({"md", "html", "csv", "txt"})
# OOXML: the folder of the main part that _rels/.rels points to (officeDocument relationship).
_OOXML_MAIN_FOLDER = {"docx": ("word", "a Word document"), "pptx": ("ppt", "a PowerPoint presentation"),
                      "xlsx": ("xl", "an Excel workbook")}
_ZIP_MAGIC = b"PK\x03\x04"
# Signatures of binary files that are never text.
_BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF"), (_ZIP_MAGIC, "a ZIP container (e.g. DOCX, XLSX)"), (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"), (b"\xd0\xcf\x11\xe0", "an old Office file"),
    (b"\x1f\x8b", "a gzip archive"), (b"\x7fELF", "an executable"), (b"MZ", "an executable"),
)
_UNICODE_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_RELATIONSHIP = re.compile(rb"<Relationship\b[^>]*>", re.IGNORECASE)
_ATTRIBUTE = re.compile(rb'(\w+)\s*=\s*["\']([^"\']*)["\']')


def check_content(filename: str, head: bytes, mime_type: str = "") -> str:
    """The format of `filename` when its content agrees with it; `InvalidArgument` saying why when not.

    `head` is the file or its first bytes (at least `HEAD_BYTES`; OOXML needs the whole file, a truncated
    container is only checked for its ZIP signature). Text formats (md, html, csv, txt) must not be binary:
    no NUL byte (unless a UTF-16 byte-order mark opens it) and no binary signature; a PDF starts with %PDF
    (Acrobat allows it within the first 1,024 bytes); DOCX, PPTX and XLSX are ZIP containers whose main part
    (the officeDocument relationship of _rels/.rels) lies in word/, ppt/ or xl/.
    """
    fmt = detect_format(filename, mime_type)
    name = filename or "<unnamed>"
    if fmt in TEXT_FORMATS:
        sample = head[:HEAD_BYTES]
        for magic, what in _BINARY_MAGIC:
            if sample.startswith(magic):
                raise InvalidArgument(f"{name}: the content is {what}, not the text a .{_suffix(filename)} file holds")
        if b"\x00" in sample and not sample.startswith(_UNICODE_BOMS[1:]):
            raise InvalidArgument(f"{name}: the content is binary (it contains NUL bytes), not the text a "
                                  f".{_suffix(filename)} file holds")
    elif fmt == "pdf":
        if b"%PDF-" not in head[:1024]:
            raise InvalidArgument(f"{name}: not a PDF (it does not start with %PDF-)")
    elif fmt in _OOXML_MAIN_FOLDER:
        folder, what = _OOXML_MAIN_FOLDER[fmt]
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
