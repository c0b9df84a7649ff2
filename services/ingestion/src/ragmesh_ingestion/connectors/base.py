"""What a source tells the sync engine about each of its items, and the checks every source shares.

A source (folder.py, web.py) yields one outcome per item it met: `Fetched` (the bytes, to compare with what was
ingested), `NotModified` (the source says it did not change: same size and time, or HTTP 304), `Gone` (the item
was there and is not any more), `Skipped` (a rule keeps it out: type, size, robots) or `Failed` (a problem that
may pass). The engine (engine.py) turns them into documents and item states.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

from ragmesh_common.connectors import ItemState
from ragmesh_common.errors import InvalidArgument
from ragmesh_common.formats import check_content, detect_format


@dataclass
class Fetched:
    key: str
    filename: str
    mime_type: str
    title: str  # the source's own title (an HTML page's <title>); "" when it has none
    content: bytes
    acl: dict[str, Any]
    etag: str = ""
    last_modified: str = ""


@dataclass
class NotModified:
    key: str
    acl: dict[str, Any]


@dataclass
class Gone:
    key: str


@dataclass
class Skipped:
    key: str
    reason: str


@dataclass
class Failed:
    key: str
    reason: str


Outcome = Fetched | NotModified | Gone | Skipped | Failed


@dataclass
class Scan:
    """A source's pass: `complete` when it listed everything (only then may what it did not meet be deleted)."""

    complete: bool = True
    problems: list[str] = field(default_factory=list)


class Source(Protocol):
    def scan(self, known: Mapping[str, ItemState], scan: Scan) -> Iterator[Outcome]: ...


class SourceUnavailable(RuntimeError):
    """The source as a whole cannot be read (a missing root, a root outside the allowed bases): the run fails
    and nothing is deleted."""


def safe_filename(name: str) -> str:
    """A file name for the upload store (the gateway's rule: the last component, unusual characters replaced)."""
    base = PurePosixPath(name.replace("\\", "/")).name
    cleaned = re.sub(r"[^A-Za-z0-9._ -]", "_", base).strip(" .")
    return cleaned[:200] or "document"


def unsupported(filename: str, mime_type: str = "") -> str | None:
    """Why the platform cannot ingest a file of this name and type, or None."""
    try:
        detect_format(filename, mime_type)
    except InvalidArgument as exc:
        return str(exc)
    return None


def content_problem(filename: str, content: bytes, mime_type: str = "") -> str | None:
    """Why these bytes cannot be ingested as `filename` (empty, or not what the extension says), or None."""
    if not content:
        return "the file is empty"
    try:
        check_content(filename, content, mime_type)
    except InvalidArgument as exc:
        return str(exc)
    return None
