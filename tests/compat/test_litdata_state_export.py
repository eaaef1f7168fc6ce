"""litstream's ``StreamingDataLoader.state_dict()`` is in LitData 0.2.76's layout, and LitData resumes from it.

* Layout: after the same batches, every key LitData writes is in litstream's state, at the same place,
  with a value of the same shape (litstream's own entries may sit beside them).
* LitData resumes from it: LitData's loader loads litstream's state and yields exactly what
  litstream's own loader yields from that state (single dataset and Combined; 0 and 2 workers;
  shuffle on and off).
"""

from __future__ import annotations

import copy
import shutil
from typing import TYPE_CHECKING, Any

import pytest

import litstream
from litstream import ConfigurationError
from peer import finish_peer_epoch, litdata_marks, peer_workers, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name=:ResourceWarning")

BATCH = 3


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


def _write(root: Path, start: int, n: int) -> str:
    out = root / "data"
    litstream.optimize(
        fn=_sample, inputs=list(range(start, start + n)), output_dir=str(out), chunk_size=4, num_workers=1
    )
    return str(out)


@pytest.fixture(scope="module")
def ints_47(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _write(tmp_path_factory.mktemp("export-47"), 0, 47)


@pytest.fixture(scope="module")
def ints_30(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _write(tmp_path_factory.mktemp("export-30"), 1000, 30)


def _shape(value: Any) -> Any:
    """The structure of a state value: dict keys (as strings), list lengths, scalar types (tuples are lists)."""
    if isinstance(value, dict):
        return {str(k): _shape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shape(v) for v in value]
    return type(value).__name__


def _assert_litdata_layout(ours: Any, theirs: Any, where: str = "state") -> None:
    """Every key of LitData's state is in ours with a value of the same shape (ours may hold more keys)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), f"{where}: {ours!r} is not a dict"
        missing = {str(k) for k in theirs} - {str(k) for k in ours}
        assert not missing, f"{where} lacks LitData's keys {sorted(missing)}"
        by_name = {str(k): v for k, v in ours.items()}
        for key, value in theirs.items():
            _assert_litdata_layout(by_name[str(key)], value, f"{where}[{key!r}]")
    else:
        assert _shape(ours) == _shape(theirs), f"{where}: {ours!r} is shaped unlike LitData's {theirs!r}"


def _take(loader: Any, k: int) -> tuple[dict[str, Any], list[Any]]:
    it = iter(loader)
    seen = [v for _ in range(k) for v in _flat(next(it))]
    state: dict[str, Any] = loader.state_dict()
    if type(loader).__module__.startswith("litdata"):
        finish_peer_epoch(it)  # LitData's workers end at the epoch's end (see there)
    del it  # litstream's loader is shut down mid-epoch
    return state, seen


def _flat(batch: Any) -> list[Any]:
    """The sample values of a batch (a Parallel batch is a pair of tensors)."""
    if isinstance(batch, dict):
        return [int(v) for v in batch["x"]]
    return [tuple(pair) for pair in zip(*(_flat(b) for b in batch), strict=True)]


def _values(loader: Any) -> list[Any]:
    return [v for batch in loader for v in _flat(batch)]


def _single(mod: Any, data: str, shuffle: bool) -> Any:
    return mod.StreamingDataset(data, shuffle=shuffle)


def _combined(mod: Any, paths: tuple[str, str], shuffle: bool) -> Any:
    return mod.CombinedStreamingDataset([mod.StreamingDataset(p, shuffle=shuffle) for p in paths])


def _parallel(mod: Any, paths: tuple[str, str], length: int | None) -> Any:
    return mod.ParallelStreamingDataset([mod.StreamingDataset(p) for p in paths], length=length)


def _copies(tmp_path: Path, first: str, second: str) -> tuple[str, str]:
    """LitData reads its own copies (it may write next to the chunks)."""
    return str(shutil.copytree(first, tmp_path / "litdata-0")), str(shutil.copytree(second, tmp_path / "litdata-1"))


# ------------------------------------------------------------------------------------------------ layout


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
def test_single_dataset_state_has_litdata_layout(ints_47: str, workers: int, shuffle: bool) -> None:
    theirs, _ = _take(litdata.StreamingDataLoader(_single(litdata, ints_47, shuffle), batch_size=BATCH,
                                                  **peer_workers(workers)), 5)  # fmt: skip
    ours, _ = _take(litstream.StreamingDataLoader(_single(litstream, ints_47, shuffle), batch_size=BATCH,
                                                  num_workers=workers), 5)  # fmt: skip
    _assert_litdata_layout(ours, theirs)
    for key in ("num_samples_yielded", "latest_worker_idx", "current_epoch"):
        assert ours[key] == theirs[key], key
    same = {k: v for k, v in theirs["dataset"].items() if k not in ("region_of_interest", "input_dir_path")}
    assert {k: ours["dataset"][k] for k in same} == same  # LitData's values, key by key
    assert [tuple(r) for r in ours["dataset"]["region_of_interest"]] == theirs["dataset"]["region_of_interest"]


@pytest.mark.parametrize("workers", [0, 2])
def test_combined_state_has_litdata_layout(ints_47: str, ints_30: str, tmp_path: Path, workers: int) -> None:
    theirs, _ = _take(litdata.StreamingDataLoader(_combined(litdata, _copies(tmp_path, ints_47, ints_30), False),
                                                  batch_size=BATCH, **peer_workers(workers)), 3)  # fmt: skip
    ours, _ = _take(litstream.StreamingDataLoader(_combined(litstream, (ints_47, ints_30), False),
                                                  batch_size=BATCH, num_workers=workers), 3)  # fmt: skip
    _assert_litdata_layout(ours, theirs)
    assert set(ours["dataset"]) == {"0", "1"}  # LitData refuses any other entry there
    assert ours["num_samples_yielded"] == theirs["num_samples_yielded"]  # per worker, per dataset
    assert ours["latest_worker_idx"] == theirs["latest_worker_idx"]
    for i in ("0", "1"):
        assert ours["dataset"][i]["num_samples_yielded"] == theirs["dataset"][i]["num_samples_yielded"]


@pytest.mark.parametrize("length", [None, 80])
@pytest.mark.parametrize("workers", [0, 2])
def test_parallel_state_has_litdata_layout(
    ints_47: str, ints_30: str, tmp_path: Path, workers: int, length: int | None
) -> None:
    k = 6 if length is None else 12  # cycling: past the end of the 30-item dataset on every worker
    theirs, seen_theirs = _take(litdata.StreamingDataLoader(_parallel(litdata, _copies(tmp_path, ints_47, ints_30),
                                length), batch_size=BATCH, **peer_workers(workers)), k)  # fmt: skip
    ours, seen_ours = _take(litstream.StreamingDataLoader(_parallel(litstream, (ints_47, ints_30), length),
                            batch_size=BATCH, num_workers=workers), k)  # fmt: skip
    assert seen_ours == seen_theirs
    _assert_litdata_layout(ours, theirs)
    assert set(ours["dataset"]) == {"0", "1"}
    assert ours["num_cycles"] == theirs["num_cycles"]
    assert ours["num_samples_yielded"] == theirs["num_samples_yielded"]


# --------------------------------------------------------------------------------- LitData resumes ours


@pytest.mark.parametrize("k", [1, 7, 15])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_litdata_resumes_a_litstream_state(ints_47: str, workers: int, shuffle: bool, k: int) -> None:
    def loader(mod: Any) -> Any:
        return mod.StreamingDataLoader(_single(mod, ints_47, shuffle), batch_size=BATCH, num_workers=workers)

    full = _values(loader(litstream))
    state, seen = _take(loader(litstream), k)
    assert seen == full[: len(seen)]

    ours_loader = loader(litstream)
    ours_loader.load_state_dict(copy.deepcopy(state))
    ours = _values(ours_loader)
    theirs_loader = loader(litdata)
    theirs_loader.load_state_dict(copy.deepcopy(state))
    theirs = _values(theirs_loader)

    assert seen + ours == full  # litstream's resume: exactly the rest of the epoch
    assert theirs == ours


@pytest.mark.parametrize("k", [2, 9])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_litdata_resumes_a_litstream_combined_state(
    ints_47: str, ints_30: str, workers: int, shuffle: bool, k: int
) -> None:
    def loader(mod: Any) -> Any:  # the same folders: a state names its dataset's path
        return mod.StreamingDataLoader(_combined(mod, (ints_47, ints_30), shuffle), batch_size=BATCH,
                                       num_workers=workers)  # fmt: skip

    full = _values(loader(litstream))
    state, seen = _take(loader(litstream), k)
    theirs_own, seen_theirs = _take(loader(litdata), k)
    assert seen == seen_theirs == full[: len(seen)]  # the same batches in both libraries

    ours_loader = loader(litstream)
    ours_loader.load_state_dict(copy.deepcopy(state))
    ours = _values(ours_loader)
    theirs_loader = loader(litdata)
    theirs_loader.load_state_dict(copy.deepcopy(state))
    theirs = _values(theirs_loader)
    mirror = loader(litdata)  # LitData resuming its own state of the same batches
    mirror.load_state_dict(copy.deepcopy(theirs_own))

    assert sorted(seen + ours) == sorted(full)  # litstream's resume: each remaining sample once
    assert theirs == _values(mirror)  # LitData reads our state as its own
    if workers == 0:
        assert theirs == ours
    # With workers, LitData's own resume of a Combined dataset is not exact (it replays each member's
    # total over the workers, not the per-worker counts it saved): docs/resume.md. litstream's is.


# ------------------------------------------------------------------------ force_override, canonical nodes


def test_force_override_state_dict_resumes_with_the_current_settings(ints_47: str) -> None:
    state, seen = _take(litstream.StreamingDataLoader(litstream.StreamingDataset(ints_47, seed=1, shuffle=True),
                                                      batch_size=BATCH), 4)  # fmt: skip
    strict = litstream.StreamingDataLoader(litstream.StreamingDataset(ints_47, seed=2, shuffle=True), batch_size=BATCH)
    with pytest.raises(ConfigurationError, match="checkpoint has seed=1 but this dataset has seed=2"):
        strict.load_state_dict(copy.deepcopy(state))

    forced_ds = litstream.StreamingDataset(ints_47, seed=2, shuffle=True, force_override_state_dict=True)
    forced = litstream.StreamingDataLoader(forced_ds, batch_size=BATCH)
    with pytest.warns(UserWarning, match="force_override_state_dict: checkpoint has seed=1 .* using the current value"):
        forced.load_state_dict(copy.deepcopy(state))
    rest = _values(forced)
    other_order = _values(litstream.StreamingDataLoader(litstream.StreamingDataset(ints_47, seed=2, shuffle=True),
                                                        batch_size=BATCH))  # fmt: skip
    assert rest == other_order[len(seen) :]  # the counts kept, the order of seed=2 (as LitData does)

    peer = litdata.StreamingDataLoader(
        litdata.StreamingDataset(ints_47, seed=2, shuffle=True, force_override_state_dict=True), batch_size=BATCH
    )
    peer.load_state_dict(copy.deepcopy(state))  # LitData accepts it too and serves the rest of the epoch
    assert len(_values(peer)) == len(rest)


@pytest.mark.parametrize("ncn", [None, 3])
def test_num_canonical_nodes_is_recorded_as_litdata_records_it(ints_47: str, ncn: int | None) -> None:
    def state_of(mod: Any) -> dict[str, Any]:
        ds = mod.StreamingDataset(ints_47, shuffle=True, num_canonical_nodes=ncn)
        return _take(mod.StreamingDataLoader(ds, batch_size=BATCH), 2)[0]

    ours, theirs = state_of(litstream), state_of(litdata)
    assert ours["dataset"]["num_canonical_nodes"] == theirs["dataset"]["num_canonical_nodes"] == (ncn or 1)
    resumed = litstream.StreamingDataset(ints_47, shuffle=True)  # kept from the loaded state, as in LitData
    resumed.load_state_dict(ours["dataset"])
    assert resumed.state_dict(0, 0, BATCH)["num_canonical_nodes"] == (ncn or 1)


def test_num_canonical_nodes_must_be_a_count() -> None:
    with pytest.raises(ConfigurationError, match=r"num_canonical_nodes must be None or an int >= 1, got 0"):
        litstream.StreamingDataset("/nonexistent", num_canonical_nodes=0)
