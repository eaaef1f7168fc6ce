"""Checkpoints saved by LitData: recognise them, check them, and turn them into litstream's layout.

A user migrating mid-training holds ``StreamingDataLoader.state_dict()`` of LitData 0.2.76. Its
``"dataset"`` entry shares most keys with litstream's (``read.plan._resume`` describes ours) but:

* it has keys litstream never writes (``cache_dir_path``, ``num_canonical_nodes``,
  ``initial_num_nodes``) and always writes ``subsampled_files`` / ``region_of_interest``; its
  ``item_shuffle_window`` (0.2.76; litstream writes it too) is missing in older LitData's states;
* it lacks litstream's ``rank``, ``worker_samples_yielded``, ``resume_levels`` and ``shuffle_window``;
* ``item_loader`` is ``None`` for the default loader and ``drop_last`` is the resolved bool.

Positions: LitData's loader adds ``batch_size`` to ``num_samples_yielded`` for every batch, short or
not, so the count is ``batch_size`` times the batches its rank delivered. Which items those were
follows from the read plan, which is LitData's on the same topology (``read.plan._plan``): torch hands out
batches round-robin over the workers (skipping a worker that has run out), so the per-worker counts
are ``read.plan._resume.round_robin`` of that batch count over the workers' stream lengths. They are
written as litstream's exact ``worker_samples_yielded``, and the resumed loader continues with the
worker whose turn was next, as LitData's loader does.

A ``CombinedStreamingDataset`` state (:func:`from_litdata_combined`) is the whole loader state:
LitData keeps, per loader worker, the exact samples it delivered from each member, which give
litstream's per-worker composite counts directly.

Everything here is untrusted input (a checkpoint may come from anywhere): every field used is type-
and range-checked, and what litstream cannot resume exactly is refused with ``ConfigurationError``
rather than resumed approximately (a state whose ``item_shuffle_window`` differs from the resuming
dataset's is refused by ``check_config`` only when the two orders differ on this dataset's chunks):

* a LitData state taken after one of LitData's elastic resumes (``resume_mode="elastic"``; its
  position lives in LitData's own canonical stream, not in the read plan);
* a multi-node state (``initial_num_nodes > 1``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError
from ._resume import level_streams, round_robin
from ._resume_types import EpochSpec, Topology

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    #: ``(items per chunk, selected regions or None)`` of the resuming dataset (see ``EpochSpec``).
    Layout = tuple[Sequence[int], Sequence[tuple[int, int]] | None]

__all__ = [
    "from_litdata_combined",
    "from_litdata_state",
    "is_litdata_composite_state",
    "is_litdata_state",
    "same_order_window",
]

#: Keys that LitData writes into a ``StreamingDataset`` state (litstream also writes ``item_shuffle_window``).
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


def same_order_window(state: Mapping[str, Any], current: Mapping[str, Any], chunk_sizes: Sequence[int] | None) -> int:
    """The checkpoint's in-chunk shuffle block size, as the resuming dataset's when both order alike.

    LitData 0.2.76 and litstream write the resolved ``item_shuffle_window`` (an int >= 0); older
    LitData and litstream wrote none and permuted whole slices (0). When neither window splits any
    chunk of this dataset (a window of 0 or 1, or one at least the largest chunk, is one permutation
    of each slice), the two orders are the same and the resuming dataset's value is taken; otherwise
    the saved value is kept and ``check_config`` refuses a dataset built with another one, as LitData
    does.
    """
    window = state.get("item_shuffle_window", 0)
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigurationError(
            f"LitData checkpoint has item_shuffle_window={window!r}; expected an int >= 0 (LitData writes the "
            "resolved block size): the checkpoint is damaged"
        )
    now = current.get("item_shuffle_window")
    if chunk_sizes is None:
        return window
    largest = max(chunk_sizes, default=0)
    whole = [w <= 1 or largest <= w for w in (window, now) if isinstance(w, int)]
    return now if isinstance(now, int) and all(whole) else window


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


def _checked(state: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a LitData ``StreamingDataset`` state that litstream uses, each checked."""
    if not isinstance(state, dict):
        raise ConfigurationError(f"LitData checkpoint has a dataset state {state!r:.80}; expected a dict")
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
    out = {key: _int(state, key, minimum=1) for key in ("world_size", "num_workers", "batch_size")}
    out["yielded"] = yielded = _int(state, "num_samples_yielded", minimum=0)
    out["epoch"] = _int(state, "current_epoch", minimum=0)
    _int(state, "seed", minimum=0)
    in_epoch = _int(state, "sample_in_epoch", minimum=0, default=yielded * out["world_size"])
    if in_epoch != yielded * out["world_size"]:
        raise ConfigurationError(
            f"LitData checkpoint has sample_in_epoch={in_epoch} but num_samples_yielded={yielded} on "
            f"world_size={out['world_size']}: a position after an elastic resume; {_FIX}"
        )
    for key in ("initial_world_size", "initial_num_workers", "initial_batch_size", "num_canonical_nodes"):
        if key in state:
            _int(state, key, minimum=1)
    if not isinstance(state.get("shuffle"), bool):
        raise ConfigurationError(f"LitData checkpoint has shuffle={state.get('shuffle')!r}; expected a bool")
    if not isinstance(state.get("drop_last"), bool):
        raise ConfigurationError(f"LitData checkpoint has drop_last={state.get('drop_last')!r}; expected a bool")
    loader = state.get("item_loader")
    if loader is not None and not isinstance(loader, dict):
        raise ConfigurationError(f"LitData checkpoint has item_loader={loader!r}; expected a dict or None")
    for key in ("input_dir_path", "input_dir_url", "cache_dir_path"):
        value = state.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"LitData checkpoint has {key}={value!r}; expected a string or None")
    return out


def _config_part(state: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration keys of litstream's layout, from a checked LitData state."""
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
    loader = state.get("item_loader")
    out["item_loader"] = {} if loader is None else dict(loader)  # None: LitData's default PyTreeLoader
    # LitData stores the resolved flag; litstream's None means "True in a distributed run".
    drop_last, world = state["drop_last"], state["world_size"]
    out["drop_last"] = None if current.get("drop_last") is None and drop_last == (world > 1) else drop_last
    out["shuffle_window"] = current.get("shuffle_window")  # litstream's window shuffle; LitData has none
    return out


def _position(world: int, workers: int, batch: int, epoch: int, counts: list[int]) -> dict[str, Any]:
    return {
        "num_samples_yielded": sum(counts),
        "num_workers": workers,
        "batch_size": batch,
        "current_epoch": epoch,
        "world_size": world,
        "state_version": 2,
        "sample_in_epoch": sum(counts) * world,
        "initial_world_size": world,
        "initial_num_workers": workers,
        "initial_batch_size": batch,
        "resume_mode": "strict",
        "rank": 0,  # LitData does not record the saver; under DDP lock-step every rank holds the same count
        "worker_samples_yielded": counts,
        "resume_levels": [],
    }


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
        A state in litstream's layout, as ``StreamingDataset.state_dict`` writes it;
            ``check_config`` and ``resolve_resume`` then validate it further.

    Raises:
        ConfigurationError: a malformed field, or a state litstream cannot resume exactly (the
            message names the field, its value and what to do).
    """
    fields = _checked(state)
    world, workers, batch = fields["world_size"], fields["num_workers"], fields["batch_size"]
    sizes, regions = layout()
    item_window = same_order_window(state, current, sizes)
    spec = EpochSpec(
        chunk_sizes=tuple(int(n) for n in sizes),
        shuffle=state["shuffle"],
        seed=state["seed"],
        epoch=max(fields["epoch"], 1),
        drop_last=state["drop_last"],
        regions=None if regions is None else tuple((int(a), int(b)) for a, b in regions),
        item_shuffle_window=item_window,
    )
    counts = _worker_counts(state, spec, Topology(world, workers, batch), fields["yielded"])
    config = {**_config_part(state, current), "item_shuffle_window": item_window}
    return {**config, **_position(world, workers, batch, fields["epoch"], counts)}


def is_litdata_composite_state(state: object) -> bool:
    """Whether ``state`` is LitData's ``StreamingDataLoader.state_dict()`` of a Combined / Parallel dataset."""
    if not isinstance(state, dict) or not isinstance(state.get("num_samples_yielded"), dict):
        return False
    members = state.get("dataset")
    return isinstance(members, dict) and "composite" not in members and "composite" not in state


def _per_worker(raw: Mapping[Any, Any], workers: int, datasets: int) -> list[list[int]]:
    """LitData's ``{worker: [samples per dataset]}`` (workers that delivered nothing are absent)."""
    rows = [[0] * datasets for _ in range(workers)]
    for key, counts in raw.items():
        worker = int(key) if isinstance(key, str) and key.isdigit() else key
        if isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < workers:
            raise ConfigurationError(f"LitData checkpoint counts samples of worker {key!r}; num_workers={workers}")
        if not isinstance(counts, list) or len(counts) != datasets:
            raise ConfigurationError(
                f"LitData checkpoint has num_samples_yielded[{key!r}]={counts!r:.80}; expected {datasets} counts"
            )
        rows[worker] = [_int({"count": c}, "count", minimum=0) for c in counts]
    return rows


def from_litdata_combined(
    state: Mapping[str, Any],
    *,
    kind: str,
    config: Mapping[str, Any],
    members: Sequence[Mapping[str, Any]],
    layouts: Sequence[Callable[[], Layout]] | None = None,
) -> dict[str, Any]:
    """Convert LitData's loader state of a Combined / Parallel dataset to litstream's loader state.

    LitData records, per loader worker, the samples it delivered from each dataset (exact counts);
    a worker's composite position is their sum (Combined) or their common value (a Parallel without
    ``length``, where each tuple takes one sample of every member). LitData records none of the wrapper's own settings
    (``seed``, ``weights``, ...): the resuming wrapper's are used, so build it as in the saving run.

    Args:
        state: The whole ``StreamingDataLoader.state_dict()`` saved by LitData.
        kind: The resuming wrapper's kind (``"combined"`` or ``"parallel"``).
        config: The resuming wrapper's own configuration (``CompositeDataset._config()``).
        members: Each member's configuration (``StreamingDataset._config()``), in order.
        layouts: Each member's layout (see :func:`from_litdata_state`), used to accept a saved
            ``item_shuffle_window`` that orders that member's chunks as its own; ``None``: the
            windows must be equal.

    Raises:
        ConfigurationError: a malformed field, another number of datasets, members saved on
            different topologies, or the state of a ``ParallelStreamingDataset(length=...)``
            (cycling; not accepted yet).
    """
    if kind == "parallel" and config.get("length") is not None:
        raise ConfigurationError(
            f"a ParallelStreamingDataset(length={config.get('length')!r}) checkpoint saved by LitData cannot be loaded "
            f"yet (its cycle counts are not converted); {_FIX}"
        )
    raw = state["dataset"]
    if {str(key) for key in raw} != {str(i) for i in range(len(members))}:
        raise ConfigurationError(
            f"LitData checkpoint holds datasets {sorted(str(key) for key in raw)} but this wrapper has "
            f"{len(members)}; build it with the same datasets, in the same order, as the run that saved it"
        )
    saved = [raw[str(i)] if str(i) in raw else raw[i] for i in range(len(members))]
    fields = [_checked(member) for member in saved]
    topology = {(f["world_size"], f["num_workers"], f["batch_size"]) for f in fields}
    if len(topology) != 1:
        raise ConfigurationError(f"LitData checkpoint's datasets were saved on different topologies: {topology}")
    world, workers, batch = topology.pop()
    epoch = _int(state, "current_epoch", minimum=0)
    rows = _per_worker(state["num_samples_yielded"], workers, len(members))
    if kind == "parallel":  # one sample of every member per tuple: the counts of a worker agree
        if any(len(set(row)) > 1 for row in rows):
            raise ConfigurationError(f"LitData checkpoint of a ParallelStreamingDataset has unequal counts {rows}")
        own = [row[0] for row in rows]
    else:
        own = [sum(row) for row in rows]
    composite = {
        "kind": kind,
        **config,
        "num_datasets": len(members),
        **{key: value for key, value in _position(world, workers, batch, epoch, own).items() if key in _COMPOSITE},
        "carry": None,
    }
    sizes: list[Sequence[int] | None] = [None] * len(members) if layouts is None else [lay()[0] for lay in layouts]
    out: dict[str, Any] = {
        str(i): {
            **_config_part(member, current),
            "item_shuffle_window": same_order_window(member, current, chunk_sizes),
            "current_epoch": epoch,
        }
        for i, (member, current, chunk_sizes) in enumerate(zip(saved, members, sizes, strict=True))
    }
    out["composite"] = composite
    return {"dataset": out, "current_epoch": epoch, "num_samples_yielded": sum(own), "latest_worker_idx": 0}


_COMPOSITE = (
    "num_samples_yielded",
    "worker_samples_yielded",
    "num_workers",
    "batch_size",
    "world_size",
    "rank",
    "current_epoch",
    "resume_levels",
)
