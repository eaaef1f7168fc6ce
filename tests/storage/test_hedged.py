"""Hedged range reads, against a scripted fake store (a slow answer is a fault real servers won't give on cue)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import pytest

from litstream import ConfigurationError, ObjectNotFoundError, StorageError
from litstream.storage._store import HedgedStore, ObjectMeta

if TYPE_CHECKING:
    from collections.abc import Sequence

    from litstream.storage._store import PutData

pytestmark = pytest.mark.anyio

DATA = bytes(range(256))
SLOW = 30.0  # seconds: an answer that must never be waited for


@dataclass
class Step:
    """What one call does: wait ``delay`` seconds, then answer (or raise ``error``)."""

    delay: float
    error: Exception | None = None


@dataclass
class ScriptedStore:
    """A Store whose range reads follow a script, one :class:`Step` per call, and that records what happened."""

    script: list[Step]
    started: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "scripted://"

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        call = len(self.started)
        self.started.append(call)
        step = self.script[call] if call < len(self.script) else Step(0.0)
        try:
            await anyio.sleep(step.delay)
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(call)
            raise
        if step.error is not None:
            raise step.error
        self.finished.append(call)
        return DATA[start : start + length]

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        first = await self.get_range(path, starts[0], lengths[0])
        return [first] + [DATA[s : s + n] for s, n in zip(starts[1:], lengths[1:], strict=True)]

    async def get(self, path: str) -> bytes:
        return DATA

    async def put(self, path: str, data: PutData) -> None:
        raise NotImplementedError

    async def head(self, path: str) -> ObjectMeta:
        return ObjectMeta(path, len(DATA))

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        return []

    async def delete(self, path: str) -> None:
        raise NotImplementedError


async def test_a_slow_read_is_duplicated_and_the_loser_cancelled() -> None:
    inner = ScriptedStore([Step(SLOW), Step(0.01)])
    store = HedgedStore(inner, hedge_delay=0.05)
    with anyio.fail_after(SLOW / 3):
        assert await store.get_range("x", 10, 4) == DATA[10:14]
    assert inner.started == [0, 1]  # the duplicate was issued
    assert inner.finished == [1]
    assert inner.cancelled == [0]  # the loser was cancelled inside the task group
    stats = store.statistics()
    assert (stats.reads, stats.hedges, stats.hedge_wins) == (1, 1, 1)


async def test_a_fast_read_is_not_duplicated() -> None:
    inner = ScriptedStore([Step(0.0)])
    store = HedgedStore(inner, hedge_delay=5.0)
    with anyio.fail_after(4):
        assert await store.get_ranges("x", [0, 3], [2, 2]) == [DATA[0:2], DATA[3:5]]
    assert inner.started == [0]
    assert inner.cancelled == []
    assert store.statistics().hedges == 0


async def test_a_failed_primary_waits_for_the_duplicate() -> None:
    inner = ScriptedStore([Step(0.3, StorageError("primary broke")), Step(0.05)])
    store = HedgedStore(inner, hedge_delay=0.05)
    assert await store.get_range("x", 0, 3) == DATA[:3]
    assert inner.finished == [1]


async def test_both_failing_raises_the_first_failure() -> None:
    inner = ScriptedStore([Step(0.2, StorageError("first")), Step(0.3, StorageError("second"))])
    store = HedgedStore(inner, hedge_delay=0.05)
    with pytest.raises(StorageError, match="first"):
        await store.get_range("x", 0, 3)


async def test_not_found_is_final_and_cancels_the_duplicate() -> None:
    inner = ScriptedStore([Step(0.2, ObjectNotFoundError("x is gone")), Step(SLOW)])
    store = HedgedStore(inner, hedge_delay=0.05)
    with anyio.fail_after(SLOW / 3), pytest.raises(ObjectNotFoundError, match="x is gone"):
        await store.get_range("x", 0, 3)
    assert inner.cancelled == [1]


async def test_a_primary_failing_before_the_delay_is_raised_without_a_duplicate() -> None:
    inner = ScriptedStore([Step(0.0, StorageError("refused"))])
    store = HedgedStore(inner, hedge_delay=SLOW)
    with anyio.fail_after(SLOW / 3), pytest.raises(StorageError, match="refused"):
        await store.get_range("x", 0, 3)
    assert inner.started == [0]


async def test_cancelling_the_caller_cancels_both_attempts() -> None:
    inner = ScriptedStore([Step(SLOW), Step(SLOW)])
    store = HedgedStore(inner, hedge_delay=0.01)
    with anyio.move_on_after(0.3):
        await store.get_range("x", 0, 3)
    assert sorted(inner.cancelled) == [0, 1]
    assert inner.finished == []


async def test_the_delay_adapts_to_observed_latency() -> None:
    inner = ScriptedStore([Step(0.02)] * 8)
    store = HedgedStore(inner, min_delay=0.001, initial_delay=3.0, min_samples=8)
    assert store.delay() == 3.0  # too few samples yet
    for _ in range(8):
        await store.get_range("x", 0, 1)
    assert 0.015 <= store.delay() < 1.0  # about the 95th percentile of ~20 ms reads
    floored = HedgedStore(ScriptedStore([]), min_delay=0.25, min_samples=2)
    for _ in range(2):
        await floored.get_range("x", 0, 1)
    assert floored.delay() == 0.25


async def test_everything_else_passes_through() -> None:
    store = HedgedStore(ScriptedStore([]), hedge_delay=0.1)
    assert store.url == "scripted://"
    assert await store.get("x") == DATA
    assert (await store.head("x")).size == 256
    assert await store.list() == []


def test_bad_arguments() -> None:
    with pytest.raises(ConfigurationError, match="hedge_delay"):
        HedgedStore(ScriptedStore([]), hedge_delay=-1)
    with pytest.raises(ConfigurationError, match="quantile"):
        HedgedStore(ScriptedStore([]), quantile=1.5)


async def test_hedge_delay_zero_turns_hedging_off() -> None:
    """``hedge_delay=0`` means off (LitData's and StreamingRawDataset's meaning), not "duplicate at once"."""
    store = ScriptedStore([Step(0.01)])
    hedged = HedgedStore(store, hedge_delay=0)
    assert await hedged.get_range("k", 0, 4) == DATA[:4]
    assert await hedged.get_ranges("k", [0, 8], [2, 2]) == [DATA[:2], DATA[8:10]]
    assert store.started == [0, 1]  # one call per read, no duplicate
    assert hedged.statistics().hedges == 0
