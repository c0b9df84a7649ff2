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
    assert scripts["ragmesh"] == "ragmesh_cli.main:run"
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


TEARDOWN_CTRL_C = """
import os, subprocess, sys, time
marker = sys.argv[1]


class SlowTeardown:  # a module global: torn down after the interpreter has reset its signal handlers
    def __del__(self, open=open, exists=os.path.exists, monotonic=time.monotonic, sleep=time.sleep, marker=marker):
        open(marker + ".tearing-down", "w").close()  # builtins are gone by now: bound as defaults
        deadline = monotonic() + 120
        while not exists(marker) and monotonic() < deadline:
            sleep(0.01)


slow = SlowTeardown()
# Ctrl-C from outside once the command is done, while the process tears down (however slow a loaded machine is)
code = (
    f"import os, signal, time\\n"
    f"while not os.path.exists({marker + '.tearing-down'!r}): time.sleep(0.01)\\n"
    f"os.kill({os.getpid()}, signal.SIGINT); open({marker!r}, 'w').close()"
)
subprocess.Popen([sys.executable, "-c", code])
sys.argv = ["ragmesh", "--help"]
from ragmesh_cli.main import run
run()
"""


def test_a_ctrl_c_while_the_finished_command_tears_down_keeps_its_exit_code(tmp_path: Path) -> None:
    """Found by the bulk-ingest e2e (CI, loaded machine): a Ctrl-C that reached `ragmesh ingest` just as it ended
    killed it by the signal (status -2) instead of exit 0 or 130. The launcher blocks it once the command is done."""
    script = tmp_path / "teardown.py"
    script.write_text(TEARDOWN_CTRL_C)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(load_dev_paths().source_paths(ROOT))}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "signalled")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert (tmp_path / "signalled").exists()
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "Usage" in done.stdout
