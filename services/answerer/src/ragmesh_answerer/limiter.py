"""Admission control for generations: at most N at once, a bounded FIFO queue, and a wait budget.

A request either starts at once, waits in the queue (its position and an estimated wait are reported
whenever the position changes), or is refused at once with `Exhausted` and a retry-after hint: when the
queue is full, or when the expected wait already exceeds its budget (the queue timeout, or what is left of
the call's deadline). The expected wait comes from the recent hold times of the slots: a smoothed mean
plus twice their smoothed deviation (as TCP plans its retransmission timeout), because generation times
vary a lot on a shared machine, and a waiter whose budget runs out after its stream started can no longer
get a clean refusal. The slot of each running generation is expected to free at its start + that planned
hold, and the waiters ahead take the slots in turn as they free. Until a first generation has finished there is no
estimate, and only the queue's length and the budget's expiry bound the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass


class Exhausted(Exception):
    """The request cannot start within its budget; maps to RESOURCE_EXHAUSTED with a retry-after hint."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def retry_after_seconds(self) -> int:
        """Whole seconds, at least 1 (what HTTP's Retry-After carries)."""
        return max(1, math.ceil(self.retry_after))


@dataclass(frozen=True)
class QueuePosition:
    position: int  # 1 = next to start
    estimated_wait: float  # seconds; 0 = no estimate yet


class Ticket:
    """One request's place: admitted at once, or queued until `wait` returns. Always `release` it."""

    def __init__(self, limiter: Limiter, budget: float, admitted: bool) -> None:
        self._limiter = limiter
        self._budget = budget
        self._enqueued = limiter.clock()
        self._wake = asyncio.Event()
        self.admitted = admitted
        self.started_at: float | None = self._enqueued if admitted else None
        self._released = False

    async def wait(self) -> AsyncIterator[QueuePosition]:
        """Yields the queue position each time it changes; returns once admitted. Raises `Exhausted`
        when the budget runs out first (the place is given up)."""
        last = 0
        deadline = self._enqueued + self._budget
        while not self.admitted:
            position = self._limiter.position(self)
            if position != last:
                last = position
                yield QueuePosition(position, round(self._limiter.expected_wait(position - 1), 1))
                continue  # the consumer may have taken a while: look again before sleeping
            remaining = deadline - self._limiter.clock()
            if remaining <= 0:
                self._limiter.leave(self)
                raise Exhausted(
                    f"no generation slot freed within {self._budget:.0f}s (queue position {position})",
                    self._limiter.retry_after(self._budget),
                )
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)

    def release(self) -> None:
        """Frees the slot (or the queue place, when still waiting). Safe to call more than once."""
        if self._released:
            return
        self._released = True
        self._limiter.leave(self)


class Limiter:
    """At most `max_concurrent` holders, at most `max_queue` waiters, FIFO. One per event loop."""

    def __init__(
        self,
        max_concurrent: int,
        max_queue: int,
        queue_timeout: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        smoothing: float = 0.2,
    ) -> None:
        if max_concurrent < 1 or max_queue < 0 or queue_timeout <= 0:
            raise ValueError("max_concurrent >= 1, max_queue >= 0 and queue_timeout > 0 are required")
        self.max_concurrent = max_concurrent
        self.max_queue = max_queue
        self.queue_timeout = queue_timeout
        self.clock = clock
        self._smoothing = smoothing
        self._active: set[Ticket] = set()
        self._queue: deque[Ticket] = deque()
        self.hold_seconds: float | None = None  # smoothed hold time of a slot; None until one was released
        self.hold_deviation = 0.0  # smoothed absolute deviation of the hold times

    @property
    def active(self) -> int:
        return len(self._active)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def position(self, ticket: Ticket) -> int:
        return self._queue.index(ticket) + 1

    @property
    def planned_hold(self) -> float | None:
        """How long a slot is planned to be held: the smoothed mean plus twice the smoothed deviation."""
        return None if self.hold_seconds is None else self.hold_seconds + 2 * self.hold_deviation

    def expected_wait(self, ahead: int) -> float:
        """Seconds until a waiter with `ahead` waiters before it is expected to start (0 without an estimate)."""
        hold = self.planned_hold
        if hold is None:
            return 0.0
        now = self.clock()
        frees = [max(now, (t.started_at or now) + hold) for t in self._active]
        frees += [now] * (self.max_concurrent - len(frees))
        heapq.heapify(frees)
        for _ in range(ahead):  # each waiter ahead takes the next slot to free and holds it for the planned time
            heapq.heappush(frees, heapq.heappop(frees) + hold)
        return max(0.0, frees[0] - now)

    def retry_after(self, budget: float) -> float:
        """When a request like this one is expected to fit: the back of the queue's wait minus the budget,
        and no sooner than the next slot frees."""
        back = self.expected_wait(len(self._queue))
        next_free = self.expected_wait(0)
        return max(1.0, back - budget, next_free)

    def budget(self, deadline_remaining: float | None) -> float:
        """The wait budget: the queue timeout, shortened to the call's deadline less a generation's time."""
        if deadline_remaining is None:
            return self.queue_timeout
        return min(self.queue_timeout, deadline_remaining - (self.planned_hold or 0.0))

    def enter(self, deadline_remaining: float | None = None) -> Ticket:
        """Admits, queues or refuses (`Exhausted`, at once) a request whose call has `deadline_remaining`."""
        budget = self.budget(deadline_remaining)
        if len(self._active) < self.max_concurrent and not self._queue:
            ticket = Ticket(self, budget, admitted=True)
            self._active.add(ticket)
            return ticket
        if len(self._queue) >= self.max_queue:
            raise Exhausted(
                f"the answer queue is full ({self.max_queue} waiting, {self.active} generating)",
                self.retry_after(budget),
            )
        wait = self.expected_wait(len(self._queue))
        if budget <= 0 or wait > budget:
            raise Exhausted(
                f"the expected wait for a generation slot ({wait:.0f}s) exceeds this request's "
                f"budget ({max(budget, 0):.0f}s)",
                self.retry_after(budget),
            )
        ticket = Ticket(self, budget, admitted=False)
        self._queue.append(ticket)
        return ticket

    def leave(self, ticket: Ticket) -> None:
        if ticket in self._active:
            self._active.remove(ticket)
            held = self.clock() - (ticket.started_at or self.clock())
            if self.hold_seconds is None:
                self.hold_seconds = held
            else:
                self.hold_deviation += self._smoothing * (abs(held - self.hold_seconds) - self.hold_deviation)
                self.hold_seconds += self._smoothing * (held - self.hold_seconds)
        elif ticket in self._queue:
            self._queue.remove(ticket)
        else:
            return
        while self._queue and len(self._active) < self.max_concurrent:
            head = self._queue.popleft()
            head.admitted, head.started_at = True, self.clock()
            self._active.add(head)
            head._wake.set()  # noqa: SLF001 - the limiter owns its tickets' wake-ups
        for waiter in self._queue:  # everyone behind moved up
            waiter._wake.set()  # noqa: SLF001
