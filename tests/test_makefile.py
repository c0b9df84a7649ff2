"""The Makefile's promises: `make help` lists every target, and `make clean-data` honours RAGMESH_DATA_DIR."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = ROOT / "Makefile"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _targets() -> set[str]:
    text = MAKEFILE.read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([a-z][a-z0-9-]*):(?!=)", text, flags=re.M)}


def _make(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        ["make", "--no-print-directory", "-f", str(MAKEFILE), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_help_lists_every_target_with_a_description() -> None:
    listed = dict(re.findall(r"^make (\S+) +(\S.*)$", _make("help"), flags=re.M))
    targets = _targets()
    assert targets, "no targets parsed from the Makefile"
    assert targets == set(listed), f"missing from make help: {sorted(targets - set(listed))}"
    phony = re.search(r"^\.PHONY:(.*)$", MAKEFILE.read_text(encoding="utf-8"), flags=re.M)
    assert phony is not None
    assert set(phony.group(1).split()) == targets


def test_clean_data_removes_the_configured_folder_only(tmp_path: Path) -> None:
    data = tmp_path / "elsewhere"
    (data / "pg").mkdir(parents=True)
    (data / "pg" / "keep-me-not").write_text("x")
    default = tmp_path / ".data"
    default.mkdir()
    _make("clean-data", f"RAGMESH_DATA_DIR={data}", cwd=tmp_path)
    assert not data.exists()
    assert default.exists(), "clean-data removed .data although RAGMESH_DATA_DIR named another folder"
