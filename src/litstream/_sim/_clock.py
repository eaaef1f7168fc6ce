"""The virtual clock a simulation runs on: trio's clock interface, jumping ahead whenever the loop is idle.

trio's ``MockClock(autojump_threshold=0)`` jumps to the next deadline as soon as no task is runnable, even while
a worker thread is still decoding a chunk: the real CPU work of the engine (which it does in threads) would
then be charged whatever virtual time the next sleeper happened to ask for. :class:`VirtualClock` jumps only
when no thread of anyio's default limiter (the one the engine's ``to_thread.run_sync`` calls use) is busy, so
real work takes no virtual time and every virtual second comes from a modelled sleep.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio.abc

if TYPE_CHECKING:
    import anyio

__all__ = ["VirtualClock"]

_POLL = 0.05
"""Real seconds to wait for a busy thread before looking again (a finished thread wakes the loop sooner)."""


class VirtualClock(trio.abc.Clock):
    """A trio clock that starts at 0 and advances only by jumping to the next deadline when the loop is idle."""

    def __init__(self) -> None:
        self._now = 0.0
        self._threads: anyio.CapacityLimiter | None = None

    def watch_threads(self, limiter: anyio.CapacityLimiter) -> None:
        """Do not jump while ``limiter`` has tokens borrowed (call it from inside the run)."""
        self._threads = limiter

    def start_clock(self) -> None:
        """See :meth:`trio.abc.Clock.start_clock`."""

    def current_time(self) -> float:
        """The virtual time in seconds."""
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        """Called by trio's loop when no task is runnable: jump to ``deadline`` unless a thread is working."""
        if deadline <= self._now:
            return 0.0
        if self._threads is not None and self._threads.borrowed_tokens:
            return _POLL
        if math.isinf(deadline):
            return _POLL  # nothing will ever wake up by time: a deadlock, or a thread not watched
        self._now = deadline
        return 0.0
