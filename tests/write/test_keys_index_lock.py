"""``build_keys_index`` holds the output's writer lease, and a failed build leaves the old sidecar.

Two real processes race (spawned, local and S3 on SeaweedFS): two ``build_keys_index`` runs on one
dataset, and one racing an ``optimize`` in ``append`` mode. Exactly one writes, the other fails with
``OutputLockedError`` naming it (operation, host, pid), and the dataset with its sidecar is exactly the
winner's (see ``lock_racers.py``: the winner holds the lease until the loser has finished, so the
outcome never depends on timing). A build that fails before its commit (a failed put, an ``index.json``
rewritten by a writer that ignores the lease) puts the previous sidecar back, byte for byte.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

import pytest
from lock_racers import inputs_of, race, sample
from write_targets import TARGETS, make_target

from litstream import OutputLockedError, StorageError, build_keys_index, optimize
from litstream._core._bridge import run_sync
from litstream.format._index import Index
from litstream.format._keys import section_of, shard_name
from litstream.storage._resolver import store_for
from litstream.write._keys import has_sidecar, load_sidecar
from litstream.write._writer_lock import lock_name

if TYPE_CHECKING:
    from pathlib import Path

    from write_targets import Target

    from litstream import Store

BASE = [9000 + i for i in range(4)]


def old_key(s: dict[str, int]) -> str:
    return f"old-{s['i']}"


def _base(target: Target, **kwargs: Any) -> None:
    optimize(
        sample, BASE, target.location, chunk_size=2, num_workers=1, storage_options=target.options, verbose=False,
        **kwargs,
    )  # fmt: skip


def _keys(target: Target) -> list[str] | None:
    """The dataset's keys, sorted (``None`` without a sidecar); checks that index.json announces it."""
    index = Index.from_json(target.read("index.json"))
    if not run_sync(has_sidecar, target.store):
        assert section_of(index.extra) is None
        return None
    assert section_of(index.extra) is not None
    loaded = run_sync(load_sidecar, target.store, index)
    assert loaded is not None
    return sorted(loaded[0].keys.to_pylist())


def _samples(target: Target) -> list[int]:
    return sorted(s["i"] for s in target.dataset())


def _no_lease(target: Target) -> None:
    names = os.listdir(target.location) if target.name == "local" else target.files()
    assert lock_name(0) not in names


def _outcome(kinds: tuple[str, str], target: Target, mode: str | None) -> tuple[int, str]:
    """Race ``kinds``; the winner's run and kind, after checking the loser's refusal names it."""
    outcomes = race(kinds, target.location, target.options, mode)
    by = {o[2]: o for o in outcomes}
    assert sorted(by) == ["locked", "ok"], outcomes
    winner, loser = by["ok"], by["locked"]
    operation = "build_keys_index" if kinds[winner[0]] == "keys" else kinds[winner[0]]
    assert f"{operation} run " in loser[3]
    assert f"host {socket.gethostname()}, pid {winner[1]}," in loser[3]
    _no_lease(target)
    return winner[0], kinds[winner[0]]


@pytest.mark.parametrize("where", TARGETS)
def test_two_keys_index_builds_race_one_wins_whole(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target(where, request, tmp_path)
    _base(target)
    run, _ = _outcome(("keys", "keys"), target, None)
    assert _keys(target) == sorted(f"r{run}-{i}" for i in BASE)  # one run's keys, never a mix
    assert _samples(target) == BASE


@pytest.mark.parametrize("where", TARGETS)
def test_a_keys_index_build_and_an_append_race(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target(where, request, tmp_path)
    _base(target)
    run, kind = _outcome(("keys", "optimize"), target, "append")
    if kind == "optimize":  # the append won: its samples, and no sidecar (the build wrote nothing)
        assert _samples(target) == sorted(BASE + inputs_of(run))
        assert _keys(target) is None
    else:  # the build won: the old samples, all keyed
        assert _samples(target) == BASE
        assert _keys(target) == sorted(f"r{run}-{i}" for i in BASE)


class FailingPut:
    """The inner store, except that a ``put`` of ``name`` fails (a server that refuses one write)."""

    def __init__(self, inner: Store, name: str) -> None:
        self._inner = inner
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    async def put(self, path: str, data: Any) -> None:
        if path == self._name:
            raise StorageError(f"put {path}: refused by the test server")
        await self._inner.put(path, data)


def _sidecar_bytes(target: Target) -> dict[str, bytes]:
    return {name: target.read(name) for name in target.files() if name.startswith("keys/") or name == "index.json"}


@pytest.mark.parametrize("fault", ["put", "index"])
@pytest.mark.parametrize("where", TARGETS)
def test_a_failed_build_leaves_the_previous_sidecar(
    where: str, fault: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = make_target(where, request, tmp_path)
    _base(target, key_fn=old_key)
    before = _sidecar_bytes(target)
    assert sorted(before) == ["index.json", shard_name(0)]
    location, options = target.location, target.options
    if fault == "put":  # shards 0 and 1 are written, shard 2 is refused
        with pytest.raises(StorageError, match="refused by the test server"):
            build_keys_index(
                FailingPut(target.store, shard_name(2)), key_fn=lambda s: f"new-{s['i']}", overwrite=True,
                num_shards=3, verbose=False,
            )  # fmt: skip
    else:  # a writer that ignores the lease rewrites index.json while the build scans

        def rewrites(s: dict[str, int]) -> str:
            store = store_for(location, options)
            run_sync(store.put, "index.json", before["index.json"].replace(b'"chunks"', b'"chunks" '))
            return f"new-{s['i']}"

        with pytest.raises(OutputLockedError, match=r"index\.json was changed by another writer"):
            build_keys_index(location, rewrites, overwrite=True, num_shards=3, storage_options=options, verbose=False)
        before["index.json"] = target.read("index.json")  # the other writer's index stands
    assert _sidecar_bytes(target) == before  # the old shard back, the new ones gone
    assert _keys(target) == sorted(f"old-{i}" for i in BASE)
    _no_lease(target)
