"""Which tasks the worker runs, and which files it may read for them.

Nothing that comes through Redis is believed: whoever can write to the broker can enqueue a task. A task is run
only when its ingestion token (ragmesh_common.tokens.verify_ingest_token: Ed25519, audience `ingestion`, checked
with the public keys only) is valid now, names the task's document and version, and grants the task's file; the
user the worker acts for comes from the token alone. The file must lie inside the upload store
(GATEWAY_UPLOAD_DIR), named without `..`, and is opened one component at a time below the store's root with
O_NOFOLLOW, so that neither a path nor a symlink planted in the store leads out of it.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ragmesh_common.ingestion import IngestTask
from ragmesh_common.tokens import IngestGrant, InvalidToken, verify_ingest_token

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class TaskRefused(PermissionError):
    """The task is forged, stale or asks for a file outside the upload store: it is not run, nor retried. (A
    PermissionError: met while an admitted document is read, e.g. a symlink planted since, it fails that
    document like any unreadable file.)"""


@dataclass(frozen=True)
class Admitted:
    """A task the worker may run: for `grant.user`, reading `relative` below the upload store."""

    grant: IngestGrant
    relative: str


def store_relative(path: str, root: Path) -> str:
    """`path`'s place below the upload store `root` (POSIX, relative), or TaskRefused: a relative path, one
    with `..`, or one outside the store."""
    if not os.path.isabs(path):
        raise TaskRefused("the file path is not absolute")
    if ".." in PurePosixPath(path).parts:
        raise TaskRefused("the file path contains '..'")
    normal = Path(os.path.normpath(path))
    for base in (Path(os.path.normpath(root.absolute())), root.resolve()):
        try:
            relative = normal.relative_to(base)
        except ValueError:
            continue
        if relative.parts:
            return relative.as_posix()
    raise TaskRefused("the file is outside the upload store")


def _parts(relative: str) -> list[str]:
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise TaskRefused(f"not a path inside the upload store: {relative!r}")
    return list(parts)


def check_no_symlinks(root: Path, relative: str) -> None:
    """TaskRefused when a component of `relative` below `root` is a symlink or a special file (lstat only: nothing
    is opened). A missing file is left to the ingestion, which fails the document as unreadable."""
    current = root.resolve()
    parts = _parts(relative)
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise TaskRefused("the stored path contains a symlink")
        if not (stat.S_ISDIR(mode) if index < len(parts) - 1 else stat.S_ISREG(mode)):
            raise TaskRefused("the stored path is not a file in the store's folders")


def read_in_store(root: Path, relative: str) -> bytes:
    """The bytes of the regular file `relative` below `root`, opened directory by directory with O_NOFOLLOW (a
    symlink anywhere on the way, or a file that is not regular, is TaskRefused; a missing one OSError)."""
    parts = _parts(relative)
    fd = os.open(root.resolve(), os.O_RDONLY | _DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                next_fd = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink (O_NOFOLLOW) or a file
                    raise TaskRefused(f"{part!r} in the stored path is not a directory of the store") from None
                raise
            os.close(fd)
            fd = next_fd
        try:
            file_fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW: the file is a symlink
                raise TaskRefused("the stored file is a symlink") from None
            raise
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise TaskRefused("the stored file is not a regular file")
        return handle.read()


def admit(task: IngestTask, public_keys: dict[str, Ed25519PublicKey], root: Path, now: float | None = None) -> Admitted:
    """The task's grant and file if the worker may run it, else TaskRefused (with the reason to log)."""
    try:
        grant = verify_ingest_token(task.token, public_keys, now=now)
    except InvalidToken as exc:
        raise TaskRefused(f"invalid ingestion token: {exc}") from None
    if grant.document_id != task.document_id:
        raise TaskRefused("the ingestion token is for another document")
    if grant.version != task.version:
        raise TaskRefused(f"the ingestion token is for version {grant.version}, the task for {task.version}")
    relative = store_relative(task.path, root)
    if relative != grant.file:
        raise TaskRefused("the ingestion token grants another file")
    check_no_symlinks(root, relative)
    return Admitted(grant, relative)
