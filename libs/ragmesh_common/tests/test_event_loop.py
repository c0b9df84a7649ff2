"""Every service process runs its main coroutine on the loop RAGMESH_EVENT_LOOP names (uvloop by default)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from ragmesh_common.server import run_event_loop


def _loop_type(monkeypatch: pytest.MonkeyPatch, choice: str | None) -> type:
    if choice is None:
        monkeypatch.delenv("RAGMESH_EVENT_LOOP", raising=False)
    else:
        monkeypatch.setenv("RAGMESH_EVENT_LOOP", choice)
    seen: list[type] = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()))

    run_event_loop(main())
    return seen[0]


def test_uvloop_by_default_and_the_standard_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _loop_type(monkeypatch, None) is uvloop.Loop
    assert _loop_type(monkeypatch, "UVLOOP") is uvloop.Loop
    assert not issubclass(_loop_type(monkeypatch, "asyncio"), uvloop.Loop)


def test_an_unknown_loop_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit, match="RAGMESH_EVENT_LOOP must be one of uvloop, asyncio"):
        _loop_type(monkeypatch, "trio")
