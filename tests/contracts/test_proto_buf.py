"""`buf lint` and `buf breaking` over proto/ (configuration: proto/buf.yaml; conventions: proto/README.md).

Breaking changes are checked against the last release: the newest `v*` tag when the repository has one, and
always against the committed image of the newest release under proto/releases/ (so a clone without tags,
such as a shallow CI checkout, still checks something real). When the tag is present, its image must equal
the committed one.

A deliberate breaking change is recorded, not silenced: a new release image and, beside it,
`<release>.breaking` listing buf's findings against the release before (see proto/README.md). Between two
consecutive release images buf must report exactly what that file lists; against an older tag, only what the
newer releases' files list.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto"
RELEASES = PROTO / "releases"
TAG_PATTERN = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


def _buf(*args: str) -> subprocess.CompletedProcess[str]:
    # the virtualenv's buf (buf-bin in requirements.txt) first: `make test` does not put .venv/bin on PATH
    beside = Path(sys.executable).parent / "buf"
    exe = str(beside) if beside.exists() else shutil.which("buf")
    assert exe, "buf is not installed (pip install buf-bin)"
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def _version(name: str) -> tuple[int, int, int]:
    match = TAG_PATTERN.match(name)
    assert match, f"not a release name: {name}"
    return int(match[1]), int(match[2]), int(match[3])


def release_images() -> list[Path]:
    """The committed release images, newest last."""
    return sorted(RELEASES.glob("v*.binpb"), key=lambda p: _version(p.stem))


def last_release_tag() -> str | None:
    """The newest release tag (vMAJOR.MINOR.PATCH), or None when the checkout has none."""
    done = subprocess.run(
        ["git", "tag", "--list", "v*"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    tags = [t for t in done.stdout.split() if TAG_PATTERN.match(t)]
    return max(tags, key=_version) if tags else None


def git_input(tag: str) -> str:
    """A buf input naming proto/ at `tag` (the common git dir, so a worktree works as well as a clone)."""
    common = subprocess.run(
        ["git", "rev-parse", "--git-common-dir"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    return f"{(ROOT / common).resolve()}#tag={tag},subdir=proto"


def _findings(done: subprocess.CompletedProcess[str]) -> set[str]:
    """buf breaking's findings without their location (`path:line:col:`), which differs between a folder and an
    image."""
    return {re.sub(r"^[^:]*:\d+:\d+:", "", line).strip() for line in done.stdout.splitlines() if line.strip()}


def recorded_breaks(image: Path) -> set[str]:
    """The deliberate breaking changes of the release `image` against the release before it."""
    record = image.with_suffix(".breaking")
    if not record.is_file():
        return set()
    lines = record.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def _clean(done: subprocess.CompletedProcess[str], what: str) -> None:
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 0 and not output, f"{what} failed (rc {done.returncode}):\n{output}"


def test_buf_lint() -> None:
    _clean(_buf("lint", "proto"), "buf lint proto")


def test_no_breaking_change_against_the_committed_release_image() -> None:
    images = release_images()
    assert images, "no release image under proto/releases/ (see proto/README.md, releasing a contract version)"
    _clean(
        _buf("breaking", "proto", "--against", str(images[-1].relative_to(ROOT))),
        f"buf breaking proto --against {images[-1].relative_to(ROOT)}",
    )


def test_no_breaking_change_against_the_last_release_tag() -> None:
    tag = last_release_tag()
    if tag is None:
        pytest.skip("no v* tag in this checkout (shallow clone?): checked against the committed image instead")
    allowed: set[str] = set()
    for image in release_images():
        if _version(image.stem) > _version(tag):
            allowed |= recorded_breaks(image)
    done = _buf("breaking", "proto", "--against", git_input(tag))
    assert not done.stderr.strip(), done.stderr
    unrecorded = _findings(done) - allowed
    assert not unrecorded, f"breaking changes against {tag} that no newer release records: {sorted(unrecorded)}"


def test_each_release_breaks_its_predecessor_exactly_as_recorded() -> None:
    images = release_images()
    for older, newer in itertools.pairwise(images):
        done = _buf("breaking", str(newer.relative_to(ROOT)), "--against", str(older.relative_to(ROOT)))
        assert not done.stderr.strip(), done.stderr
        assert _findings(done) == recorded_breaks(newer), (
            f"{newer.name} against {older.name}: buf reports {sorted(_findings(done))}, "
            f"{newer.with_suffix('.breaking').name} records {sorted(recorded_breaks(newer))}"
        )


def test_committed_image_of_the_last_release_is_what_its_tag_builds(tmp_path: Path) -> None:
    tag = last_release_tag()
    if tag is None:
        pytest.skip("no v* tag in this checkout (shallow clone?)")
    committed = RELEASES / f"{tag}.binpb"
    assert committed.is_file(), f"the release {tag} has no image: buf build proto -o proto/releases/{tag}.binpb"
    built = tmp_path / f"{tag}.binpb"
    _clean(_buf("build", git_input(tag), "-o", str(built)), f"buf build {tag}")
    assert built.read_bytes() == committed.read_bytes(), (
        f"proto/releases/{tag}.binpb differs from what tag {tag} builds: regenerate it from the tag"
    )


def test_the_checks_fail_on_a_breaking_change(tmp_path: Path) -> None:
    """The check can fail: deleting a field from a copy of the contracts is reported."""
    copy = tmp_path / "proto"
    shutil.copytree(PROTO, copy, ignore=shutil.ignore_patterns("releases"))
    common = copy / "ragmesh" / "common" / "v1" / "common.proto"
    text = common.read_text()
    assert "  string title = 2;\n" in text
    common.write_text(text.replace("  string title = 2;\n", "", 1))
    images = release_images()
    assert images
    done = _buf("breaking", str(copy), "--against", str(images[-1]))
    assert done.returncode != 0 and 'field "2" with name "title"' in done.stdout, done.stdout + done.stderr
