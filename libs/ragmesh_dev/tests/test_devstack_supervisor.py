"""The local stack's supervisor: a process that exits is restarted with capped exponential backoff, the others
keep running, and stop() ends everything (the restarted one included)."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest

from ragmesh_dev.devstack import DEFAULT_PORTS, Stack, restart_delay, write_private

PORTS = {name: 1 for name in DEFAULT_PORTS}  # nothing here listens


def wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_backoff_doubles_and_is_capped() -> None:
    assert [restart_delay(k, 0.5, 4.0) for k in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_a_crashed_process_is_restarted_and_the_rest_keeps_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RAGMESH_RESTART_BASE_SECONDS", "0.05")
    monkeypatch.setenv("RAGMESH_RESTART_MAX_SECONDS", "0.2")
    stack = Stack(tmp_path, ports=PORTS, supervise=False)
    caplog.set_level(logging.WARNING, logger="ragmesh.devstack")
    try:
        steady = stack._spawn("steady", [sys.executable, "-c", "import time; time.sleep(120)"])
        stack._spawn("flaky", [sys.executable, "-c", "import sys; sys.exit(3)"])
        steady_pid = steady.popen.pid
        stack.start_supervisor()
        wait_for(lambda: sum(r["name"] == "flaky" for r in stack.restarts) >= 5, 60)
        flaky = [r for r in stack.restarts if r["name"] == "flaky"]
        assert [r["attempt"] for r in flaky[:5]] == [1, 2, 3, 4, 5]
        assert [r["delay_s"] for r in flaky[:5]] == [0.05, 0.1, 0.2, 0.2, 0.2]
        assert all(r["exit_code"] == 3 for r in flaky)
        assert "restarting flaky (exit code 3, attempt 2, next in 0.1 s)" in caplog.text
        assert steady.popen.poll() is None and steady.popen.pid == steady_pid
        assert not any(r["name"] == "steady" for r in stack.restarts)
        assert len(stack.processes) == 2  # restarted in place, not added
    finally:
        stack.stop()
    assert all(p.popen.poll() is not None for p in [steady])


def test_a_killed_process_is_restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_RESTART_BASE_SECONDS", "0.05")
    stack = Stack(tmp_path, ports=PORTS, supervise=False)
    try:
        service = stack._spawn("service", [sys.executable, "-c", "import time; time.sleep(120)"])
        first = service.popen.pid
        stack.start_supervisor()
        service.popen.kill()
        wait_for(lambda: service.popen.pid != first and service.popen.poll() is None, 30)
        assert stack.restarts[0]["exit_code"] == -9
    finally:
        stack.stop()
    assert service.popen.poll() is not None


def test_secret_files_are_private(tmp_path: Path) -> None:
    loose = tmp_path / "jwt-dev-secret"
    loose.write_text("old")
    loose.chmod(0o644)
    write_private(loose, "new")
    assert loose.read_text() == "new" and loose.stat().st_mode & 0o777 == 0o600
    stack = Stack(tmp_path, ports=PORTS, supervise=False)
    assert stack.jwt_secret
    for name in ("jwt-dev-secret", "secrets.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
