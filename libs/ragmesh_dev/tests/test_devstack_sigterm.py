"""SIGTERM to a process that owns engines or services (a benchmark, a test run) must still stop them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# The parent starts a child in a session of its own (as Stack and EmbeddedPostgres do), prints the child's pid
# and stops the child only from a `finally`.
PLAIN = """
    import subprocess, sys, time
    {install}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        print(child.pid, flush=True)
        time.sleep(120)
    finally:
        child.terminate(); child.wait(10)
        print("stopped", flush=True)
"""
ASYNC = """
    import asyncio, subprocess, sys
    {install}
    async def main():
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            print(child.pid, flush=True)
            await asyncio.sleep(120)
        finally:
            child.terminate(); child.wait(10)
            print("stopped", flush=True)
    asyncio.run(main())
"""
INSTALL = "from ragmesh_dev.devstack import interrupt_on_sigterm; interrupt_on_sigterm()"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_if_alive(pid: int) -> None:
    """A test that fails must not leave its child behind (it sleeps for two minutes in a session of its own)."""
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


def run_and_terminate(script: str) -> tuple[int, str]:
    """Starts the parent, sends it SIGTERM once its child runs; the child's pid and the parent's output."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())  # printed inside the `try`
    parent.send_signal(signal.SIGTERM)
    out, _ = parent.communicate(timeout=30)
    return child, out


@pytest.mark.parametrize("script", [PLAIN, ASYNC], ids=["plain", "asyncio"])
def test_sigterm_runs_finally_and_stops_the_child(script: str) -> None:
    child, out = run_and_terminate(script.format(install=INSTALL))
    try:
        assert "stopped" in out
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child)
    finally:
        kill_if_alive(child)


def test_without_it_the_child_outlives_its_parent() -> None:
    """What the handler is for: Python's default SIGTERM skips the `finally` and orphans the child."""
    child, out = run_and_terminate(PLAIN.format(install=""))
    try:
        assert "stopped" not in out
        assert alive(child)
    finally:
        kill_if_alive(child)


def test_pytest_runs_with_it_installed() -> None:
    """The root conftest installs it, so `kill` of a test run tears the fixtures (engines, mesh) down."""
    assert signal.getsignal(signal.SIGTERM) is signal.default_int_handler
