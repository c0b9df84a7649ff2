"""The folder (or mounted share) source: every regular file below the root, with its ACL from mapping files.

Where it may read: the root must lie inside one of the administrator's CONNECTORS_ALLOWED_ROOTS, by its real path
(symlinks resolved), checked at every run. The walk never leaves the root: it goes directory by directory through
file descriptors (os.fwalk), follows no symlink (a symlinked file or folder is skipped and reported) and opens
each file with O_NOFOLLOW relative to its folder's descriptor, so a link planted during the run leads nowhere.
Hidden files and folders (a name starting with '.') are not synced.

ACL: a folder may hold a mapping file, `.ragmesh-acl.yaml` (or `.json`):

    acl: {departments: [eng]}          # this folder and everything below it
    rules:                             # first match wins; patterns are relative to this folder
      - match: "hr/*"                  # `*` also matches '/': everything below hr/
        acl: {departments: [hr]}
      - match: "*.pdf"
        acl: {roles: [manager]}

A file's ACL is the first rule that matches it in the nearest folder's mapping, else that mapping's `acl`, else
the same in the parent folder's mapping, up to the root; else the connector's ACL. A mapping file that cannot be
read or does not validate fails the files it governs (they are not ingested with a wider ACL, nor deleted).

Change detection: a file whose size and modification time are those recorded, and whose ACL is the same, is
`NotModified` without being read; otherwise its bytes go to the engine, which compares their SHA-256.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import mimetypes
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragmesh_common.connectors import AclSpec, FolderConfig, ItemState
from ragmesh_ingestion.connectors.base import (
    Failed,
    Fetched,
    NotModified,
    Outcome,
    Scan,
    Skipped,
    SourceUnavailable,
    content_problem,
    safe_filename,
    unsupported,
)

MAPPING_FILES = (".ragmesh-acl.yaml", ".ragmesh-acl.yml", ".ragmesh-acl.json")
MAX_MAPPING_BYTES = 256 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class AclRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    match: str = Field(min_length=1, max_length=500)
    acl: AclSpec


class AclMapping(BaseModel):
    """A folder's mapping file."""

    model_config = ConfigDict(extra="forbid")

    acl: AclSpec | None = None
    rules: list[AclRule] = Field(default_factory=list, max_length=500)

    def acl_for(self, relative: str) -> dict[str, Any] | None:
        """The ACL this mapping gives a file at `relative` (below the mapping's folder), or None."""
        for rule in self.rules:
            pattern = rule.match.strip("/")
            if fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(relative, pattern + "/*"):
                return rule.acl.normal()
        return self.acl.normal() if self.acl is not None else None


@dataclass
class _Folder:
    mapping: AclMapping | None
    error: str = ""  # the mapping file could not be used: the folder's files fail


def real_root(root: str, allowed: Sequence[Path]) -> Path:
    """The root's real path if it is a folder inside an allowed base (both resolved), else SourceUnavailable."""
    if not allowed:
        raise SourceUnavailable("no folder may be synced: CONNECTORS_ALLOWED_ROOTS is not set on the worker")
    try:
        real = Path(root).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise SourceUnavailable(f"the root {root} cannot be opened: {getattr(exc, 'strerror', None) or exc}") from None
    if not real.is_dir():
        raise SourceUnavailable(f"the root {root} is not a folder")
    for base in allowed:
        try:
            real_base = base.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if real == real_base or real_base in real.parents:
            return real
    raise SourceUnavailable(f"the root {root} resolves to {real}, outside the allowed base directories")


def _read_at(dir_fd: int, name: str, limit: int) -> bytes:
    """A regular file's bytes, opened below `dir_fd` without following a symlink; OSError beyond `limit`."""
    fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def _load_mapping(dir_fd: int, names: set[str]) -> _Folder:
    for name in MAPPING_FILES:
        if name not in names:
            continue
        try:
            raw = _read_at(dir_fd, name, MAX_MAPPING_BYTES)
            data = json.loads(raw) if name.endswith(".json") else yaml.safe_load(raw)
            return _Folder(AclMapping.model_validate(data if data is not None else {}))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            reason = exc.errors(include_input=False)[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            return _Folder(None, f"ACL mapping {name} is invalid: {reason}"[:300])
    return _Folder(None)


class FolderSource:
    def __init__(self, config: FolderConfig, default_acl: dict[str, Any], allowed: Sequence[Path]) -> None:
        self.config = config
        self.default_acl = default_acl
        self.allowed = allowed

    def _acl(self, folders: dict[str, _Folder], relative: str) -> tuple[dict[str, Any] | None, str]:
        """The ACL of the file at `relative`, or (None, why not) when a mapping file on its way is invalid."""
        path = PurePosixPath(relative)
        for folder in path.parents:  # the nearest folder first, the root (".") last
            key = folder.as_posix()
            info = folders.get(key)
            if info is None:
                continue
            if info.error:
                return None, info.error
            if info.mapping is not None:
                below = path.relative_to(folder).as_posix() if key != "." else relative
                acl = info.mapping.acl_for(below)
                if acl is not None:
                    return acl, ""
        return self.default_acl, ""

    def scan(self, known: Mapping[str, ItemState], scan: Scan) -> Iterator[Outcome]:
        root = real_root(self.config.root, self.allowed)
        folders: dict[str, _Folder] = {}
        errors: list[OSError] = []
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(root, onerror=errors.append, follow_symlinks=False):
            relative_dir = Path(dirpath).relative_to(root).as_posix()
            names = set(filenames) | set(dirnames)
            folders[relative_dir] = _load_mapping(dir_fd, names)
            for name in sorted(dirnames):
                if name.startswith("."):
                    dirnames.remove(name)  # hidden folders are not walked
            for name in sorted(names):
                if name.startswith("."):
                    continue
                key = name if relative_dir == "." else f"{relative_dir}/{name}"
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError as exc:
                    yield Failed(key, f"cannot stat: {exc.strerror}")
                    continue
                if stat.S_ISLNK(info.st_mode):
                    if name in dirnames:
                        dirnames.remove(name)
                    yield Skipped(key, "a symlink (not followed)")
                    continue
                if stat.S_ISDIR(info.st_mode):
                    continue
                if not stat.S_ISREG(info.st_mode):
                    yield Skipped(key, "not a regular file")
                    continue
                yield self._file(dir_fd, name, key, info, folders, known.get(key))
        if errors:
            scan.complete = False  # a folder that could not be listed: nothing below it may be taken as deleted
            scan.problems.extend(f"cannot list {e.filename}: {e.strerror}" for e in errors[:20])

    def _file(
        self,
        dir_fd: int,
        name: str,
        key: str,
        info: os.stat_result,
        folders: dict[str, _Folder],
        state: ItemState | None,
    ) -> Outcome:
        mime_type = mimetypes.guess_type(name, strict=False)[0] or ""
        why = unsupported(name, mime_type)
        if why:
            return Skipped(key, why)
        if info.st_size > self.config.max_file_bytes:
            return Skipped(key, f"larger than the connector's limit of {self.config.max_file_bytes} bytes")
        acl, problem = self._acl(folders, key)
        if acl is None:
            return Failed(key, problem)
        stamp = f"{info.st_size}:{info.st_mtime_ns}"
        if state is not None and state.etag == stamp and state.document_id:
            return NotModified(key, acl)
        try:
            content = _read_at(dir_fd, name, self.config.max_file_bytes)
        except OSError as exc:
            return Failed(key, f"cannot read: {exc.strerror or exc}")
        filename = safe_filename(name)
        bad = content_problem(filename, content, mime_type)
        if bad:
            return Skipped(key, bad)
        # no title of its own: the catalogue titles it by the file name until the parser finds the document's title
        return Fetched(key, filename, mime_type, "", content, acl, etag=stamp)
