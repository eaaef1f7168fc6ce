"""``merge_datasets``, ``dataset_update`` and ``complete_dataset`` hold the writer lease as ``optimize`` does.

Two writers of one output at once, local and on SeaweedFS: the first is held inside its run (after it took
the lease: its reads wait on a gate, an injected store), the second runs meanwhile and fails with
``OutputLockedError`` naming the first (operation, host, pid) without writing anything; the first then
finishes, and the output is exactly its result, with no lease left behind. The order never depends on timing.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import TYPE_CHECKING, Any

import pytest
from write_targets import TARGETS, make_target

from dataset_files import without_version_log
from litstream import (
    ChunkWriter,
    OutputLockedError,
    StreamingDataset,
    complete_dataset,
    dataset_update,
    merge_datasets,
    optimize,
)
from litstream._core._bridge import run_sync
from litstream.write._writer_lock import is_lock_name, lock_name

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from write_targets import Target

    from litstream import Store

GATE_TIMEOUT = 60.0


class GatedReads:
    """A Store that holds every read of a key matching ``gated`` until :attr:`open` is set (a slow server).

    Everything else is the inner store's (its ``local_path`` too, so local writes stay atomic)."""

    def __init__(self, inner: Store, gated: Callable[[str], bool]) -> None:
        self._inner = inner
        self._gated = gated
        self.waiting = threading.Event()
        self.open = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _wait(self, key: str) -> None:
        if self._gated(key):
            self.waiting.set()
            assert self.open.wait(GATE_TIMEOUT), "the gate was never opened"

    async def get(self, key: str) -> Any:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self._wait, key)
        return await self._inner.get(key)

    async def get_range(self, key: str, start: int, length: int) -> Any:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self._wait, key)
        return await self._inner.get_range(key, start, length)


def _first_while_second(first: Callable[[], Any], gate: GatedReads, second: Callable[[], Any]) -> str:
    """Run ``first`` in a thread until it waits on ``gate``, run ``second`` (must be refused), let ``first``
    finish; the refusal's message."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            first()
            outcome.append(None)
        except BaseException as exc:  # reported below
            outcome.append(exc)
            gate.waiting.set()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert gate.waiting.wait(GATE_TIMEOUT)
        assert outcome == [], f"the first writer ended before its gate: {outcome}"
        with pytest.raises(OutputLockedError) as refused:
            second()
    finally:
        gate.open.set()
        thread.join(GATE_TIMEOUT)
    assert outcome == [None], outcome
    return str(refused.value)


def _names_first(message: str, operation: str) -> None:
    assert f"{operation} run " in message
    assert f"host {socket.gethostname()}, pid {os.getpid()}," in message


def _values(target: Target) -> list[int]:
    return sorted(int(s["i"]) for s in StreamingDataset(target.location, storage_options=target.options))


def _no_lease(target: Target) -> None:
    names = target.files()
    if target.name == "local":
        names = os.listdir(target.location)
    assert lock_name(0) not in names


def sample(i: int) -> dict[str, int]:
    return {"i": i}


def key_of(s: dict[str, int]) -> str:
    return f"k{s['i']}"


def _dataset(where: str, request: pytest.FixtureRequest, path: Path, values: list[int], **kwargs: Any) -> Target:
    target = make_target(where, request, path)
    optimize(
        sample, values, target.location, chunk_size=2, num_workers=1, storage_options=target.options, verbose=False,
        **kwargs,
    )  # fmt: skip
    return target


@pytest.mark.parametrize("where", TARGETS)
def test_two_merges_into_one_output(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    a = _dataset(where, request, tmp_path / "a", [0, 1, 2])
    b = _dataset(where, request, tmp_path / "b", [10, 11])
    c = _dataset(where, request, tmp_path / "c", [20, 21, 22])
    out = make_target(where, request, tmp_path / "out")
    gated = GatedReads(a.store, lambda key: key.startswith("chunk-"))
    message = _first_while_second(
        lambda: merge_datasets([gated, b.store], out.store),
        gated,
        lambda: merge_datasets([c.location, b.location], out.location, storage_options=out.options),
    )
    _names_first(message, "merge_datasets")
    assert _values(out) == [0, 1, 2, 10, 11]  # the first merge's samples only, never a mix
    _no_lease(out)


@pytest.mark.parametrize("where", TARGETS)
def test_two_updates_of_one_dataset(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = _dataset(where, request, tmp_path / "ds", list(range(6)), key_fn=key_of)
    before = set(target.files())
    gated = GatedReads(target.store, lambda key: key.startswith("chunk-"))
    message = _first_while_second(
        lambda: dataset_update(gated, {"k1": {"i": 101}}),
        gated,
        lambda: dataset_update(target.location, {"k4": {"i": 104}}, storage_options=target.options),
    )
    _names_first(message, "dataset_update")
    assert _values(target) == [0, 2, 3, 4, 5, 101]  # the first update only
    new = set(target.files()) - before
    assert len([n for n in new if n.startswith("chunk-")]) == 1  # the refused update wrote no chunk
    _no_lease(target)


def _interrupted(target: Target) -> None:
    async def write() -> None:
        for rank, values in {0: range(0, 5), 1: range(5, 8)}.items():
            async with ChunkWriter(target.store, rank=rank, chunk_size=2) as writer:
                for v in values:
                    await writer.add(sample(v))

    run_sync(write)


@pytest.mark.parametrize("where", TARGETS)
def test_two_completions_of_one_dataset(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target(where, request, tmp_path)
    _interrupted(target)
    assert "index.json" not in target.files()
    gated = GatedReads(target.store, lambda key: key != "index.json" and not is_lock_name(key))
    message = _first_while_second(
        lambda: complete_dataset(gated),
        gated,
        lambda: complete_dataset(target.location, storage_options=target.options),
    )
    _names_first(message, "complete_dataset")
    assert _values(target) == list(range(8))
    names = without_version_log(target.files())
    assert not any(n.endswith("index.json") and n != "index.json" for n in names)  # partials consumed
    _no_lease(target)


@pytest.mark.parametrize("where", TARGETS)
def test_optimize_is_refused_while_a_merge_writes(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    a = _dataset(where, request, tmp_path / "a", [0, 1])
    b = _dataset(where, request, tmp_path / "b", [10, 11])
    out = make_target(where, request, tmp_path / "out")
    gated = GatedReads(a.store, lambda key: key.startswith("chunk-"))
    message = _first_while_second(
        lambda: merge_datasets([gated, b.store], out.store),
        gated,
        lambda: optimize(
            sample, [7, 8], out.location, chunk_size=2, num_workers=1, storage_options=out.options, verbose=False
        ),
    )
    _names_first(message, "merge_datasets")
    assert _values(out) == [0, 1, 10, 11]
    _no_lease(out)
