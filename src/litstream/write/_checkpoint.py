"""Resumable optimize (``use_checkpoint=True``): what is saved, when, and how a re-run uses it.

Layout under the output directory::

    .checkpoints/config-{node_rank}.json   {"version": 1, "num_nodes", "num_workers", "global_ranks",
                                            "inputs": [sha256 of each worker's input list]}
    .checkpoints/checkpoint-{rank}.json    {"version": 1, "chunks": [...], "config": {...}|null,
                                            "inputs_done": k, "samples_skip": s,
                                            "samples_written": m, "next_chunk_index": n}

A worker writes its checkpoint right **after** each of its chunks is stored, so a checkpoint never names
a chunk that does not exist, and with one atomic ``put`` (temp name + rename locally, a single PUT on an
object store), so it is old or new, never torn. It records the first ``inputs_done`` inputs of the
worker as finished (all their samples are in committed chunks) and ``samples_skip`` samples of the next
input as already committed (an input whose samples straddle a chunk boundary). A re-run skips those,
continues chunk numbering at ``next_chunk_index`` (overwriting an orphan chunk stored after the last
checkpoint), and seeds its partial index with the committed chunks: every input lands in the dataset
exactly once, whether a worker or the parent was killed. ``fn`` must be deterministic for the
``samples_skip`` part (the same input yields the same samples). The files are LitData-like but not
LitData's (LitData's ``config.json`` stores the raw inputs and cannot resume a multi-node job).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, ObjectNotFoundError
from ..format._index import ChunkInfo, DatasetConfig
from ..storage._files import remove_empty_folder
from ..storage._listing import list_retrying

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..storage._store import Store

__all__ = [
    "CHECKPOINT_DIR",
    "CommitTracker",
    "RunConfig",
    "WorkerCheckpoint",
    "clear_checkpoints",
    "inputs_digest",
    "load_checkpoints",
]

CHECKPOINT_DIR = ".checkpoints"
_VERSION = 1


def _config_name(node_rank: int) -> str:
    return f"{CHECKPOINT_DIR}/config-{node_rank}.json"


def checkpoint_name(rank: int) -> str:
    """Path of worker ``rank``'s checkpoint, relative to the output root."""
    return f"{CHECKPOINT_DIR}/checkpoint-{rank}.json"


def inputs_digest(items: Sequence[Any]) -> str:
    """A stable fingerprint of one worker's inputs (JSON; ``repr`` for what JSON cannot encode)."""
    text = json.dumps(list(items), sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class RunConfig:
    """How the inputs were split when the checkpoints were made; a re-run must match it exactly."""

    num_nodes: int
    num_workers: int
    global_ranks: tuple[int, ...]
    inputs: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": _VERSION,
                "num_nodes": self.num_nodes,
                "num_workers": self.num_workers,
                "global_ranks": list(self.global_ranks),
                "inputs": list(self.inputs),
            }
        )

    @classmethod
    def from_json(cls, text: bytes) -> RunConfig:
        obj = json.loads(text)
        return cls(obj["num_nodes"], obj["num_workers"], tuple(obj["global_ranks"]), tuple(obj["inputs"]))


@dataclass(frozen=True)
class WorkerCheckpoint:
    """One worker's committed progress (see the module docstring)."""

    chunks: tuple[ChunkInfo, ...] = ()
    config: DatasetConfig | None = None
    inputs_done: int = 0
    samples_skip: int = 0
    samples_written: int = 0
    next_chunk_index: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": _VERSION,
                "chunks": [c.to_json_obj() for c in self.chunks],
                "config": None if self.config is None else self.config.to_json_obj(),
                "inputs_done": self.inputs_done,
                "samples_skip": self.samples_skip,
                "samples_written": self.samples_written,
                "next_chunk_index": self.next_chunk_index,
            }
        )

    @classmethod
    def from_json(cls, text: bytes) -> WorkerCheckpoint:
        obj = json.loads(text)
        config = obj.get("config")
        return cls(
            chunks=tuple(ChunkInfo.from_json_obj(c) for c in obj["chunks"]),
            config=None if config is None else DatasetConfig.from_json_obj(config),
            inputs_done=int(obj["inputs_done"]),
            samples_skip=int(obj["samples_skip"]),
            samples_written=int(obj["samples_written"]),
            next_chunk_index=int(obj["next_chunk_index"]),
        )


async def load_checkpoints(
    store: Store, node_rank: int, expected: RunConfig
) -> tuple[bool, dict[int, WorkerCheckpoint]]:
    """Read this node's checkpoints, or record ``expected`` for a first run.

    Returns:
        ``(resuming, checkpoints by global rank)``; ``(False, {})`` when there was no checkpoint (the
        run config is then written).

    Raises:
        ConfigurationError: the checkpoints were made with other workers, nodes or inputs.
    """
    try:
        saved = RunConfig.from_json(await store.get(_config_name(node_rank)))
    except ObjectNotFoundError:
        await store.put(_config_name(node_rank), expected.to_json().encode())
        return False, {}
    if saved != expected:
        what = (
            "inputs"
            if (saved.num_nodes, saved.num_workers) == (expected.num_nodes, expected.num_workers)
            else f"num_workers={saved.num_workers} on {saved.num_nodes} node(s)"
        )
        raise ConfigurationError(
            f"the checkpoints in {store.url}/{CHECKPOINT_DIR} are not compatible with this run: they were made "
            f"with other {what}; re-run with the same inputs, num_workers and nodes, or with mode='overwrite' "
            "to start over"
        )
    out: dict[int, WorkerCheckpoint] = {}
    for rank in expected.global_ranks:
        try:
            out[rank] = WorkerCheckpoint.from_json(await store.get(checkpoint_name(rank)))
        except ObjectNotFoundError:
            continue
    return True, out


async def clear_checkpoints(store: Store, node_rank: int | None = None, ranks: Sequence[int] = ()) -> None:
    """Delete checkpoint files: those of ``node_rank`` and ``ranks``, or all of them when ``node_rank`` is None."""
    if node_rank is None:
        for meta in await list_retrying(store, CHECKPOINT_DIR + "/"):
            await store.delete(meta.path)
    else:
        for rank in ranks:
            await store.delete(checkpoint_name(rank))
        await store.delete(_config_name(node_rank))
    remove_empty_folder(store, CHECKPOINT_DIR)  # a local directory outlives its files


class CommitTracker:
    """Turns "the writer stored another chunk" into a :class:`WorkerCheckpoint` for one worker.

    The job calls :meth:`start_input` before adding an input's samples and :meth:`end_input` after;
    the writer calls :meth:`committed` after each chunk is stored. Inputs are processed in order, so
    the committed sample count says which inputs are fully inside committed chunks.
    """

    def __init__(self, resume: WorkerCheckpoint) -> None:
        self._base = resume
        self._chunks: list[ChunkInfo] = list(resume.chunks)
        self._committed = resume.samples_written
        # Per input of this run (in order): sample count at its start and at its end (None while running).
        self._starts: list[int] = []
        self._ends: list[int | None] = []
        self._added = resume.samples_written - resume.samples_skip

    def start_input(self) -> None:
        self._starts.append(self._added)
        self._ends.append(None)

    def add_samples(self, count: int) -> None:
        self._added += count

    def end_input(self) -> None:
        self._ends[-1] = self._added

    def committed(self, chunk: ChunkInfo, next_chunk_index: int, config: DatasetConfig | None) -> WorkerCheckpoint:
        """Record ``chunk`` as stored and return the checkpoint to save."""
        self._chunks.append(chunk)
        self._committed += chunk.chunk_size
        done = 0
        for end in self._ends:
            if end is None or end > self._committed:
                break
            done += 1
        skip = 0
        if done < len(self._starts):
            skip = max(0, self._committed - self._starts[done])
        return WorkerCheckpoint(
            chunks=tuple(self._chunks),
            config=config if config is not None else self._base.config,
            inputs_done=self._base.inputs_done + done,
            samples_skip=skip,
            samples_written=self._committed,
            next_chunk_index=next_chunk_index,
        )
