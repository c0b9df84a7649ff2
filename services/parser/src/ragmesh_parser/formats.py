"""Accepted file formats: extension and MIME type to a ragmesh format name."""
from __future__ import annotations

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
