"""`make install` / `make test` (tools/dev_paths.py) put a working `ragmesh` launcher in the virtualenv's bin."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def load_dev_paths():
    spec = importlib.util.spec_from_file_location("dev_paths", ROOT / "tools" / "dev_paths.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_paths_writes_a_ragmesh_launcher_that_runs(tmp_path: Path) -> None:
    dev_paths = load_dev_paths()
    assert str(ROOT / "libs" / "ragmesh_cli" / "src") in dev_paths.source_paths(ROOT)
    scripts = dev_paths.console_scripts(ROOT)
    assert scripts["ragmesh"] == "ragmesh_cli.main:app"
    [launcher] = dev_paths.write_launchers({"ragmesh": scripts["ragmesh"]}, tmp_path, sys.executable)
    assert os.access(launcher, os.X_OK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dev_paths.source_paths(ROOT))}
    done = subprocess.run([str(launcher), "--help"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "ingest" in done.stdout and "traces" in done.stdout
    done = subprocess.run(
        [str(launcher), "--url", "http://127.0.0.1:1", "docs", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stderr.startswith("error: cannot reach http://127.0.0.1:1")
