"""Checkpoints saved by LitData: recognise them, check them, and turn them into litstream's layout.

A user migrating mid-training holds ``StreamingDataLoader.state_dict()`` of LitData 0.2.76. Its
``"dataset"`` entry shares most keys with litstream's (``read._resume`` describes ours) but:

* it has keys litstream never writes (``cache_dir_path``, ``item_shuffle_window``,
  ``num_canonical_nodes``, ``initial_num_nodes``) and always writes ``subsampled_files`` /
  ``region_of_interest``;
* it lacks litstream's ``rank``, ``worker_samples_yielded``, ``resume_levels`` and ``shuffle_window``;
* ``item_loader`` is ``None`` for the default loader and ``drop_last`` is the resolved bool.

Positions: LitData's loader adds ``batch_size`` to ``num_samples_yielded`` for every batch, short or
not, so the count is ``batch_size`` times the batches its rank delivered. Which items those were
follows from the read plan, which is LitData's on the same topology (``read._plan``): torch hands out
batches round-robin over the workers (skipping a worker that has run out), so the per-worker counts
are ``read._resume.round_robin`` of that batch count over the workers' stream lengths. They are
written as litstream's exact ``worker_samples_yielded``, and the resumed loader continues with the
worker whose turn was next, as LitData's loader does.

Everything here is untrusted input (a checkpoint may come from anywhere): every field used is type-
and range-checked, and what litstream cannot resume exactly is refused with ``ConfigurationError``
rather than resumed approximately:

* a LitData state taken after one of LitData's elastic resumes (``resume_mode="elastic"``; its
  position lives in LitData's own canonical stream, not in the read plan);
* a multi-node state (``initial_num_nodes > 1``);
* a shuffled state whose ``item_shuffle_window`` orders items differently from litstream: LitData
  0.2.76 shuffles items inside a chunk in blocks of ``item_shuffle_window`` (default 256); that is
  litstream's full in-chunk permutation only when no chunk holds more items than the window (or the
  window is 0 or 1).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError
from ._resume import level_streams, round_robin
from ._resume_types import EpochSpec, Topology

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    #: ``(items per chunk, selected regions or None)`` of the resuming dataset (see ``EpochSpec``).
    Layout = tuple[Sequence[int], Sequence[tuple[int, int]] | None]

__all__ = ["from_litdata_state", "is_litdata_state"]

#: Keys that only LitData writes into a ``StreamingDataset`` state.
_LITDATA_ONLY = ("cache_dir_path", "item_shuffle_window", "num_canonical_nodes", "initial_num_nodes")
#: Keys that only litstream writes.
_LITSTREAM_ONLY = ("rank", "worker_samples_yielded", "resume_levels")
_FIX = "resume it with LitData, or start the epoch without the checkpoint"


def is_litdata_state(state: object) -> bool:
    """Whether ``state`` looks like a ``StreamingDataset`` state written by LitData (not by litstream)."""
    if not isinstance(state, dict):
        return False
    return any(key in state for key in _LITDATA_ONLY) and not any(key in state for key in _LITSTREAM_ONLY)


def _int(state: Mapping[str, Any], key: str, *, minimum: int, default: int | None = None) -> int:
    value = state.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"LitData checkpoint has {key}={value!r}; expected an int >= {minimum}: the checkpoint is damaged "
            "or not a StreamingDataLoader.state_dict()['dataset'] of LitData"
        )
    return value


def _same_dir(saved: object, current: object) -> bool:
    if saved is None or current is None:
        return saved == current
    if not isinstance(saved, str) or not isinstance(current, str):
        return False
    return os.path.realpath(saved) == os.path.realpath(current)


def _shuffle_order_matches(state: Mapping[str, Any], chunk_sizes: Sequence[int]) -> None:
    if state.get("shuffle") is not True:
        return
    window = state.get("item_shuffle_window", 0)  # LitData before 0.2.76 permuted whole slices
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigurationError(f"LitData checkpoint has item_shuffle_window={window!r}; expected an int >= 0")
    if window <= 1:
        return
    largest = max(chunk_sizes, default=0)
    if largest > window:
        raise ConfigurationError(
            f"LitData checkpoint was saved with shuffle=True and item_shuffle_window={window}, and this dataset "
            f"has a chunk of {largest} items: LitData then shuffles items in blocks of {window}, an order "
            f"litstream does not reproduce, so the items already served cannot be known; {_FIX}"
        )


def _worker_counts(state: Mapping[str, Any], spec: EpochSpec, saved: Topology, yielded: int) -> list[int]:
    """Samples each worker of the saving rank delivered, from LitData's ``batch_size`` x batches count."""
    streams = level_streams(spec, (), saved)
    lengths = [sum(len(seg) for seg in stream) for stream in streams[: saved.num_workers]]
    batches = -(-yielded // saved.batch_size)
    held = sum(-(-n // saved.batch_size) for n in lengths)
    if batches > held:
        raise ConfigurationError(
            f"LitData checkpoint has num_samples_yielded={yielded} ({batches} batches of {saved.batch_size}) but a "
            f"rank serves only {held} batches in epoch {spec.epoch} with {saved.as_dict()}: the checkpoint "
            "belongs to another dataset or run; resume with the dataset that saved it"
        )
    return round_robin(lengths, saved.batch_size, batches)[0]


def from_litdata_state(
    state: Mapping[str, Any], current: Mapping[str, Any], *, layout: Callable[[], Layout]
) -> dict[str, Any]:
    """Convert LitData's ``StreamingDataset`` state to litstream's (see the module docstring).

    Args:
        state: ``StreamingDataLoader.state_dict()["dataset"]`` saved by LitData (0.2.71 to 0.2.76).
        current: The resuming dataset's configuration (``StreamingDataset._config()``): the keys
            whose LitData spelling differs are taken from it once they are known to agree.
        layout: Returns the resuming dataset's items per chunk and selected regions (``EpochSpec``).

    Returns:
        A state in litstream's layout, as ``StreamingDataset.state_dict`` writes it without
        per-worker counts; ``check_config`` and ``resolve_resume`` then validate it further.

    Raises:
        ConfigurationError: a malformed field, or a state litstream cannot resume exactly (the
            message names the field, its value and what to do).
    """
    if state.get("resume_mode", "strict") != "strict":
        raise ConfigurationError(
            f"LitData checkpoint has resume_mode={state.get('resume_mode')!r}: it was saved after one of LitData's "
            f"elastic resumes, whose position litstream cannot reconstruct; {_FIX}"
        )
    version = state.get("state_version", 2)
    if version != 2:
        raise ConfigurationError(f"LitData checkpoint has state_version={version!r}; only version 2 is understood")
    nodes = _int(state, "initial_num_nodes", minimum=1, default=1)
    if nodes > 1:
        raise ConfigurationError(f"LitData checkpoint has initial_num_nodes={nodes}: multi-node states; {_FIX}")
    world = _int(state, "world_size", minimum=1)
    workers = _int(state, "num_workers", minimum=1)
    batch = _int(state, "batch_size", minimum=1)
    yielded = _int(state, "num_samples_yielded", minimum=0)
    epoch = _int(state, "current_epoch", minimum=0)
    _int(state, "seed", minimum=0)
    in_epoch = _int(state, "sample_in_epoch", minimum=0, default=yielded * world)
    if in_epoch != yielded * world:
        raise ConfigurationError(
            f"LitData checkpoint has sample_in_epoch={in_epoch} but num_samples_yielded={yielded} on "
            f"world_size={world}: a position after an elastic resume; {_FIX}"
        )
    for key in ("initial_world_size", "initial_num_workers", "initial_batch_size", "num_canonical_nodes"):
        if key in state:
            _int(state, key, minimum=1)
    if not isinstance(state.get("shuffle"), bool):
        raise ConfigurationError(f"LitData checkpoint has shuffle={state.get('shuffle')!r}; expected a bool")
    drop_last = state.get("drop_last")
    if not isinstance(drop_last, bool):
        raise ConfigurationError(f"LitData checkpoint has drop_last={drop_last!r}; expected a bool")
    loader = state.get("item_loader")
    if loader is not None and not isinstance(loader, dict):
        raise ConfigurationError(f"LitData checkpoint has item_loader={loader!r}; expected a dict or None")
    for key in ("input_dir_path", "input_dir_url", "cache_dir_path"):
        value = state.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"LitData checkpoint has {key}={value!r}; expected a string or None")
    sizes, regions = layout()
    _shuffle_order_matches(state, sizes)
    spec = EpochSpec(
        chunk_sizes=tuple(int(n) for n in sizes),
        shuffle=state["shuffle"],
        seed=state["seed"],
        epoch=max(epoch, 1),
        drop_last=drop_last,
        regions=None if regions is None else tuple((int(a), int(b)) for a, b in regions),
    )
    counts = _worker_counts(state, spec, Topology(world, workers, batch), yielded)

    out: dict[str, Any] = {
        key: state[key]
        for key in ("shuffle", "seed", "subsampled_files", "region_of_interest", "input_dir_url")
        if key in state
    }
    # A remote dataset: LitData's path is its own cache folder; the URL identifies the data.
    # A local one: the same folder, however the path was spelled.
    url, path = state.get("input_dir_url"), state.get("input_dir_path")
    same = url is not None and url == current.get("input_dir_url")
    out["input_dir_path"] = (
        current.get("input_dir_path") if same or _same_dir(path, current.get("input_dir_path")) else path
    )
    out["item_loader"] = {} if loader is None else dict(loader)  # None: LitData's default PyTreeLoader
    # LitData stores the resolved flag; litstream's None means "True in a distributed run".
    out["drop_last"] = None if current.get("drop_last") is None and drop_last == (world > 1) else drop_last
    out["shuffle_window"] = current.get("shuffle_window")  # litstream's window shuffle; LitData has none
    out.update(
        num_samples_yielded=sum(counts),
        num_workers=workers,
        batch_size=batch,
        current_epoch=epoch,
        world_size=world,
        state_version=2,
        sample_in_epoch=sum(counts) * world,
        initial_world_size=world,
        initial_num_workers=workers,
        initial_batch_size=batch,
        resume_mode="strict",
        rank=0,  # LitData does not record the saver; under DDP lock-step every rank holds the same count
        worker_samples_yielded=counts,
        resume_levels=[],
    )
    return out
