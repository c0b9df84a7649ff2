"""bench/retrieval.py's `timed`: the paths of a latency bench, and a call that fails on one of them."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench


def _load() -> ModuleType:
    return load_bench("retrieval")


def _rounds(count: int, fail_at: set[int]) -> list[tuple[Callable[[], Awaitable[None]], ...]]:
    def ok() -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            await asyncio.sleep(0)

        return call

    def failing(i: int) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            if i in fail_at:
                raise TimeoutError(f"read budget spent in round {i}\nsecond line")

        return call

    return [(ok(), failing(i)) for i in range(count)]


def test_a_failed_call_is_counted_on_its_path_and_the_rounds_go_on() -> None:
    bench = _load()
    failures: list[Counter[str]] = [Counter(), Counter()]
    timings = asyncio.run(bench.timed(_rounds(10, {1, 6, 8}), warmup=2, failures=failures))
    assert [len(t) for t in timings] == [8, 6]  # rounds 2..9 kept; the second path lost rounds 6 and 8
    assert failures[0] == Counter()
    assert sum(failures[1].values()) == 3  # the warm-up round's failure is counted too
    assert all(reason.startswith("TimeoutError: read budget spent") for reason in failures[1])


def test_without_a_failure_count_the_first_error_stops_the_bench() -> None:
    bench = _load()
    with pytest.raises(TimeoutError):
        asyncio.run(bench.timed(_rounds(4, {2}), warmup=0))


def test_a_call_that_hangs_past_the_call_timeout_fails_on_its_path() -> None:
    bench = _load()

    async def hangs() -> None:
        await asyncio.sleep(3600)

    async def ok() -> None:
        return None

    failures: list[Counter[str]] = [Counter(), Counter()]
    timings = asyncio.run(bench.timed([(ok, hangs)] * 3, warmup=0, failures=failures, call_timeout=0.01))
    assert [len(t) for t in timings] == [3, 0] and sum(failures[1].values()) == 3
