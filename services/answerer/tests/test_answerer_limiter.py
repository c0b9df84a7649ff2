"""Admission control: slots, the bounded FIFO queue, positions, the wait budget and refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ragmesh_answerer.limiter import Exhausted, Limiter, QueuePosition, Ticket


class Clock:
    """A hand-moved monotonic clock for the wait estimates."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def settle(condition: Callable[[], bool]) -> None:
    """Lets the event loop run until `condition` holds (a bounded number of turns, no wall clock)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the waiter did not get there")


async def positions_until_admitted(ticket: Ticket, seen: list[QueuePosition]) -> None:
    async for place in ticket.wait():
        seen.append(place)


async def test_admits_up_to_the_limit_then_queues_in_order() -> None:
    limiter = Limiter(2, 4, 30.0)
    first, second = limiter.enter(), limiter.enter()
    assert first.admitted and second.admitted and limiter.active == 2
    third, fourth = limiter.enter(), limiter.enter()
    assert not third.admitted and not fourth.admitted
    assert (limiter.position(third), limiter.position(fourth)) == (1, 2)
    first.release()
    assert third.admitted and limiter.position(fourth) == 1 and limiter.active == 2
    first.release()  # a second release changes nothing
    assert limiter.active == 2 and limiter.queued == 1


async def test_full_queue_is_refused_at_once_with_a_retry_hint() -> None:
    limiter = Limiter(1, 1, 30.0)
    limiter.enter()
    limiter.enter()
    with pytest.raises(Exhausted) as refused:
        limiter.enter()
    assert "queue is full" in str(refused.value)
    assert refused.value.retry_after_seconds >= 1
    assert limiter.queued == 1


async def test_no_queue_means_busy_is_refused() -> None:
    limiter = Limiter(1, 0, 30.0)
    limiter.enter()
    with pytest.raises(Exhausted):
        limiter.enter()


async def test_waiter_sees_its_position_move_up_then_starts() -> None:
    limiter = Limiter(1, 4, 30.0)
    holder = limiter.enter()
    ahead, waiter = limiter.enter(), limiter.enter()
    seen: list[QueuePosition] = []
    task = asyncio.create_task(positions_until_admitted(waiter, seen))
    await settle(lambda: len(seen) == 1)
    assert seen[0].position == 2
    holder.release()  # `ahead` starts, `waiter` moves to the front
    await settle(lambda: len(seen) == 2)
    assert seen[1].position == 1 and not task.done()
    ahead.release()
    await asyncio.wait_for(task, 5)
    assert waiter.admitted and limiter.active == 1 and limiter.queued == 0


async def test_cancelled_waiter_frees_its_place() -> None:
    limiter = Limiter(1, 2, 30.0)
    holder = limiter.enter()
    leaving, staying = limiter.enter(), limiter.enter()
    seen: list[QueuePosition] = []

    async def consume(ticket: Ticket) -> None:
        try:
            await positions_until_admitted(ticket, seen)
        finally:
            ticket.release()  # what the servicer does when its caller goes away

    task = asyncio.create_task(consume(leaving))
    await settle(lambda: len(seen) == 1)  # it is waiting at position 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert limiter.queued == 1 and limiter.position(staying) == 1
    limiter.enter()  # the place it left can be taken again
    holder.release()
    assert staying.admitted


async def test_expected_wait_comes_from_recent_hold_times() -> None:
    clock = Clock()
    limiter = Limiter(1, 8, 30.0, clock=clock)
    ticket = limiter.enter()
    assert limiter.expected_wait(0) == 0.0  # no estimate before a generation has finished
    clock.now += 10
    ticket.release()
    assert limiter.hold_seconds == 10
    limiter.enter()
    clock.now += 4
    assert limiter.expected_wait(0) == pytest.approx(6)  # the running one frees 10 s after it started
    assert limiter.expected_wait(2) == pytest.approx(26)  # then two more take 10 s each


async def test_varying_hold_times_plan_for_more_than_their_mean() -> None:
    clock = Clock()
    limiter = Limiter(1, 8, 30.0, clock=clock)
    for held in (10, 30, 10, 30):
        ticket = limiter.enter()
        clock.now += held
        ticket.release()
    assert limiter.hold_seconds is not None and limiter.planned_hold is not None
    assert limiter.planned_hold > limiter.hold_seconds + 10  # twice a deviation of several seconds on top
    limiter.enter()
    assert limiter.expected_wait(0) == pytest.approx(limiter.planned_hold)


async def test_deadline_shorter_than_the_expected_wait_is_refused_at_once() -> None:
    clock = Clock()
    limiter = Limiter(1, 8, 30.0, clock=clock)
    ticket = limiter.enter()
    clock.now += 10
    ticket.release()
    limiter.enter()  # busy for about 10 s
    with pytest.raises(Exhausted) as refused:
        limiter.enter(deadline_remaining=15)  # 15 s left, 10 to wait and 10 to generate
    assert "exceeds this request's budget" in str(refused.value)
    assert limiter.queued == 0
    queued = limiter.enter(deadline_remaining=120)  # budget 30 s (the queue timeout): 10 s fits
    assert not queued.admitted and limiter.queued == 1
    short = Limiter(1, 8, 5.0, clock=clock)  # a queue timeout shorter than the same wait
    short.hold_seconds = 10.0
    short.enter()
    with pytest.raises(Exhausted) as refused:
        short.enter()
    assert refused.value.retry_after_seconds >= 5  # the wait (10 s) less the budget (5 s)


async def test_budget_running_out_in_the_queue_gives_the_place_up() -> None:
    limiter = Limiter(1, 4, 0.05)  # the queue timeout is the budget
    limiter.enter()
    waiter = limiter.enter()
    with pytest.raises(Exhausted) as refused:
        async for _ in waiter.wait():
            pass
    assert "within" in str(refused.value)
    assert limiter.queued == 0


def test_invalid_limits_are_rejected() -> None:
    with pytest.raises(ValueError):
        Limiter(0, 1, 1.0)
    with pytest.raises(ValueError):
        Limiter(1, -1, 1.0)
    with pytest.raises(ValueError):
        Limiter(1, 1, 0.0)
