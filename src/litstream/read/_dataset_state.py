"""What a ``StreamingDataset`` serves and where it stands: selection, lengths, checkpoints, resume plan.

The facade keeps only its spec, a few counters and the loaded checkpoint; these functions hold the logic
and drive it through the :class:`~litstream.read._face.Member` protocol. The meaning of every checkpoint
key and of strict versus elastic resume is ``read._resume``'s; the selection is ``read._subset``'s.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, TypeVar

from .._core._distributed import detect_distributed, in_worker
from .._core._errors import ConfigurationError
from ._shuffler import make_shuffler
from ._versions import VERSION_KEY, check_version_digest
from .plan._checkpoint import DatasetCheckpoint
from .plan._litdata_state import from_litdata_state, is_litdata_state, same_order_window
from .plan._plan import items_per_rank, worker_plan
from .plan._resume import ResumePlan, Topology
from .plan._resume_config import check_config, config_mismatches
from .plan._session import open_session, resume_plan
from .plan._subset import Selection, check_selection_state, subset_selection

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .._core._distributed import DistributedEnv, WorkerEnv
    from ._face import Member
    from ._spec import ReadSpec
    from .plan._pieces import Piece
    from .plan._resume_types import Level

__all__ = [
    "address",
    "chunk_names",
    "clear_resume",
    "dataset_config",
    "dataset_state",
    "distributed",
    "ensure_shuffler",
    "layout",
    "load_state",
    "open_epoch",
    "pin_distributed",
    "plan_inputs",
    "rank_length",
    "read_spec",
    "replace_order",
    "restricted",
    "resume_position",
    "selected",
    "set_loader_prefetch",
    "resume_version",
    "state_config",
    "subset",
    "worker_lengths",
]

M = TypeVar("M", bound="Member")


# -- selection ---------------------------------------------------------------------------------------------
def selected(face: Member) -> Selection | None:
    """The items ``face`` serves, or ``None`` for every item once; a subsample is resolved once, into the spec."""
    spec = face._spec
    if spec.selection is None and spec.subsample != 1.0:
        face._spec = dataclasses.replace(spec, selection=spec.select(face._get_source().chunk_sizes))
    return face._spec.selection


def restricted(face: M, selection: Selection) -> M:
    """A copy of ``face`` serving ``selection`` only, at epoch 1 with no pending checkpoint."""
    new = copy.copy(face)
    new._spec = dataclasses.replace(face._read_spec(), selection=selection)
    new.current_epoch = 1
    new._resume_state = None
    new._resume = None
    new.shuffler = None  # another plan: made again on first use
    return new


def subset(face: M, indices: Sequence[int] | slice) -> M:
    """``face`` restricted to ``indices`` of it (see ``StreamingDataset.subset``)."""
    base = face._selected() or Selection.full(face._get_source().chunk_sizes)
    return restricted(face, subset_selection(base, indices))


def whole(face: Member) -> bool:
    """Whether ``face`` serves every item once, decided without reading the index."""
    return face._spec.selection is None and face._spec.subsample == 1.0


def _selection_config(face: Member) -> dict[str, Any]:
    """LitData's checkpoint keys ``subsampled_files`` / ``region_of_interest``, only when not whole."""
    if whole(face):
        return {}
    source = face._get_source()
    selection = face._selected() or Selection.full(source.chunk_sizes)
    return selection.state([c.filename for c in source.index.chunks])


def address(face: Member, index: object) -> range | int | tuple[int, int]:
    """Where ``face[index]`` is: the positions of a slice, a position of the whole dataset, or the
    ``(chunk, item)`` of a selected item.

    Raises:
        TypeError: ``index`` is neither int nor slice.
        IndexError: ``index`` is outside ``[-len, len)``.
    """
    source, selection = face._get_source(), face._selected()
    total = len(source) if selection is None else len(selection)
    if isinstance(index, slice):
        return range(*index.indices(total))
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"dataset indices must be int or slice, got {type(index).__name__}")
    position = index + total if index < 0 else index
    if not 0 <= position < total:
        raise IndexError(f"index {index} is out of range for a dataset of {total} items")
    return position if selection is None else selection.locate(position)


def chunk_names(face: Member) -> list[str]:
    """The chunk files ``face`` reads, in selection order (LitData's ``subsampled_files``)."""
    names = [c.filename for c in face._get_source().index.chunks]
    selection = face._selected()
    return names if selection is None else [names[c] for c in selection.chunks]


def pin_distributed(face: Member) -> None:
    """Record this process's rank and world size, and the dataset version, in ``face`` for the DataLoader workers
    about to start (each worker opens the dataset again: the pinned version, whatever was committed since)."""
    face._parent_env = detect_distributed()
    face._spec = face._spec.pin_now()  # opened here already: pinned then (read._pump.face_source)


def distributed(face: Member) -> DistributedEnv:
    """Rank and world size of ``face``: in a DataLoader worker, those of the process that started it."""
    return face._parent_env if face._parent_env is not None and in_worker() else detect_distributed()


def read_spec(face: Member) -> ReadSpec:
    """``face``'s spec with its transforms (a subclass's too); an unresolved subsample stays lazy."""
    return dataclasses.replace(face._spec, transforms=tuple(face.transforms))


def set_loader_prefetch(face: Member, prefetch_factor: int) -> None:
    """Tell ``face`` the batches a DataLoader worker builds ahead (its memory share counts them)."""
    face._loader_prefetch = prefetch_factor


def replace_order(face: Member, **changes: Any) -> None:
    """Set ``shuffle`` / ``drop_last`` in ``face``'s spec; a changed value drops its shuffler (made again on
    first use, as LitData's)."""
    if any(getattr(face._spec, name) != value for name, value in changes.items()):
        face.shuffler = None
    face._spec = face._spec.replace(**changes)


# -- lengths -----------------------------------------------------------------------------------------------
def plan_inputs(face: Member) -> tuple[list[tuple[int, int]], list[int]]:
    """Regions and chunk bytes of the chunks the plan runs on (the selected ones, if any)."""
    source = face._get_source()
    chunk_bytes = [c.chunk_bytes for c in source.index.chunks]
    selection = face._selected()
    if selection is None:
        return [(0, size) for size in source.chunk_sizes], chunk_bytes
    return list(selection.regions), [chunk_bytes[c] for c in selection.chunks]


def worker_lengths(face: Member, num_workers: int, batch_size: int) -> list[int]:
    """Items each worker of this rank serves in ``face``'s current epoch (index = worker id)."""
    env, spec = face._distributed(), face._spec
    regions, chunk_bytes = plan_inputs(face)
    workers = max(num_workers, 1)
    out = []
    for worker in range(workers):
        plan = worker_plan(
            regions,
            rank=env.rank,
            world_size=env.world_size,
            worker=worker,
            num_workers=workers,
            batch_size=batch_size,
            drop_last=spec.resolved_drop_last(env.world_size),
            shuffle=spec.shuffle is not False,
            seed=spec.seed,
            epoch=face.current_epoch,
            num_nodes=env.num_nodes,
            chunk_bytes=chunk_bytes,
            max_cache_size=spec.plan_cache_bytes,
        )
        out.append(sum(p.end - p.start for p in plan))
    return out


def rank_length(face: Member, num_workers: int, batch_size: int) -> int:
    """Items this rank serves in ``face``'s current epoch with ``num_workers`` workers and ``batch_size``."""
    env, spec = face._distributed(), face._spec
    regions, chunk_bytes = plan_inputs(face)
    return items_per_rank(
        regions,
        rank=env.rank,
        world_size=env.world_size,
        num_workers=max(num_workers, 1),
        batch_size=batch_size,
        drop_last=spec.resolved_drop_last(env.world_size),
        num_nodes=env.num_nodes,
        shuffle=spec.shuffle is not False,
        seed=spec.seed,
        epoch=face.current_epoch,
        chunk_bytes=chunk_bytes,
        max_cache_size=spec.plan_cache_bytes,
    )


def ensure_shuffler(face: Member) -> None:
    """Make LitData's ``face.shuffler`` (``read/_shuffler.py``) for ``face``'s plan unless it is already there."""
    if face.shuffler is None:
        regions, chunk_bytes = plan_inputs(face)
        spec = face._spec
        face.shuffler = make_shuffler(
            spec.shuffle,
            regions,
            [end for _, end in regions],
            seed=spec.seed,
            drop_last=spec.resolved_drop_last(face._distributed().world_size),
            item_window=spec.item_shuffle_window,
            shuffle_window=spec.shuffle_window,
            chunk_bytes=chunk_bytes,
            max_cache_size=spec.plan_cache_bytes,
        )


def open_epoch(face: Member, worker: WorkerEnv) -> Sequence[Piece]:
    """The pieces ``worker`` of ``face`` reads this epoch (the rest of a loaded checkpoint's epoch, if any); a
    checkpoint taken at its epoch's end is dropped and ``face`` moves on to the next epoch."""
    env = face._distributed()
    args = face._spec.plan_args(rank=env.rank, world_size=env.world_size, worker=worker.worker,
                                num_workers=worker.num_workers, batch_size=face.batch_size,
                                epoch=face.current_epoch, num_nodes=env.num_nodes)  # fmt: skip
    session = open_session(face._get_source(), args, face._selected(), resume_position(face, worker.num_workers))
    if session.restarted:
        face._clear_resume()
        face.current_epoch = session.epoch
    return session.pieces


# -- checkpoints -------------------------------------------------------------------------------------------
def dataset_config(face: Member) -> dict[str, Any]:
    """The settings a checkpoint of ``face`` must match (``read.plan._resume_config.check_config``)."""
    config = face._spec.config()
    config.update(_selection_config(face))
    return config


def state_config(face: Member) -> dict[str, Any]:
    """:func:`dataset_config` plus the keys LitData 0.2.76 writes into every dataset state.

    ``subsampled_files`` / ``region_of_interest`` (the whole dataset when nothing is selected),
    ``cache_dir_path``, ``num_canonical_nodes`` and ``initial_num_nodes``; the LitData spelling of the
    other values is ``read._checkpoint.litdata_spelling``'s.
    """
    config = dataset_config(face)
    if "region_of_interest" not in config:
        source = face._get_source()
        config.update(Selection.full(source.chunk_sizes).state([c.filename for c in source.index.chunks]))
    saved = face._resume_state or {}
    settings = face._spec.cache
    config["cache_dir_path"] = None if settings is None else settings.cache_dir
    config["num_canonical_nodes"] = face.num_canonical_nodes or saved.get("num_canonical_nodes")
    config["initial_num_nodes"] = saved.get("initial_num_nodes") or max(face._distributed().num_nodes, 1)
    face._get_source()  # opened, so its version is pinned: a resume serves the same one (docs/versions.md)
    pin = face._spec.version
    config[VERSION_KEY] = None if pin is None else pin.digest
    return config


def dataset_state(
    face: Member,
    num_samples_yielded: int,
    num_workers: int,
    batch_size: int,
    current_epoch: int | None,
    worker_samples_yielded: Sequence[int] | None,
    resume_levels: Sequence[Level],
) -> dict[str, Any]:
    """``StreamingDataset.state_dict``: a ``DatasetCheckpoint.to_state()`` of this rank's position."""
    env = face._distributed()
    if worker_samples_yielded is not None:  # LitData's count: batch_size per batch, short ones too
        batch = max(batch_size, 1)
        num_samples_yielded = batch * sum(-(-c // batch) for c in worker_samples_yielded)
    return DatasetCheckpoint(
        config=state_config(face),
        num_samples_yielded=num_samples_yielded,
        num_workers=max(num_workers, 1),
        batch_size=batch_size,
        current_epoch=face.current_epoch if current_epoch is None else current_epoch,
        world_size=env.world_size,
        rank=env.rank,
        worker_samples_yielded=None if worker_samples_yielded is None else tuple(worker_samples_yielded),
        resume_levels=tuple(resume_levels),
    ).to_state()


def layout(face: Member) -> tuple[Sequence[int], Sequence[tuple[int, int]] | None]:
    """Chunk sizes and regions of what ``face`` serves, as LitData's states count them."""
    sizes = face._get_source().chunk_sizes
    selection = face._selected()
    return (sizes, None) if selection is None else (selection.sizes(sizes), selection.regions)


def _override(face: Member, state: Mapping[str, Any]) -> Mapping[str, Any]:
    """With ``force_override_state_dict``, ``state`` with ``face``'s value of each mismatching setting."""
    if not face._force_override_state_dict:
        return state
    current = dataset_config(face)
    fixed = dict(state)
    for key, message in config_mismatches(state, current):
        warnings.warn(f"force_override_state_dict: {message.split(';')[0]}; using the current value", stacklevel=5)
        fixed[key] = current[key]
    return fixed


def load_state(face: Member, state: Mapping[str, Any]) -> None:
    """``StreamingDataset.load_state_dict``: check ``state`` against ``face`` and keep it for the next epoch.

    Raises:
        ConfigurationError: as ``StreamingDataset.load_state_dict``.
    """
    resume_version(face, state.get(VERSION_KEY))
    if is_litdata_state(state):  # saved by LitData: see read._litdata_state
        state = from_litdata_state(state, dataset_config(face), layout=lambda: layout(face))
    elif state.get("shuffle") in (True, "full") and "item_shuffle_window" not in state:
        # saved before checkpoints recorded it (a full in-chunk permutation): fine if no chunk is split
        window = same_order_window(state, dataset_config(face), layout(face)[0])
        state = {**state, "item_shuffle_window": window}
    state = _override(face, state)
    check_config(state, dataset_config(face))
    if not face._force_override_state_dict and not (whole(face) and "region_of_interest" not in state):
        source = face._get_source()
        chosen = face._selected() or Selection.full(source.chunk_sizes)
        check_selection_state(state, chosen, source.chunk_sizes, [c.filename for c in source.index.chunks])
    face._resume_state = dict(state)
    face._resume = None
    face.current_epoch = max(int(state.get("current_epoch", 1)), 1)


def resume_version(face: Member, saved: object) -> None:
    """Pin ``face`` to the dataset version a checkpoint was saved on (``None``: saved without one, e.g. by
    LitData); an opened dataset of another version is opened again on the checkpoint's."""
    if saved is None:
        return
    ref = check_version_digest(saved, "dataset_version")
    current = face._spec.version
    if current is None or current.digest != ref.digest:
        face._replace_spec(version=ref)


def clear_resume(face: Member) -> None:
    """Forget ``face``'s loaded checkpoint (its epoch was served or abandoned)."""
    face._resume_state = None
    face._resume = None


def resume_position(face: Member, num_workers: int) -> ResumePlan | None:
    """The loaded checkpoint of ``face`` resolved for this rank, ``num_workers`` and its batch size."""
    if face._resume_state is None:
        return None
    env = face._distributed()
    if env.num_nodes > 1:
        raise ConfigurationError(
            f"resuming from a checkpoint with num_nodes={env.num_nodes} is not supported yet; resume on one "
            "node (unset NNODES) or start the epoch without load_state_dict()"
        )
    topology = Topology(env.world_size, max(num_workers, 1), face.batch_size)
    plan = face._resume
    if not isinstance(plan, ResumePlan) or plan.topology != topology or plan.rank != env.rank:
        plan = resume_plan(
            face._resume_state,
            face._get_source(),
            face._selected(),
            rank=env.rank,
            topology=topology,
            shuffle_window=face._spec.shuffle_window,
        )
        face._resume = plan
    return plan
