"""The read session (``read/plan/_session.py``) and the checkpoint format (``read/plan/_checkpoint.py``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from dataset_files import write_ints
from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset
from litstream.read.engine._decode import iter_work
from litstream.read.engine._engine import split_head
from litstream.read.engine._pump import open_now as _open_now
from litstream.read.plan._checkpoint import CompositeCheckpoint, CycleCarry, DatasetCheckpoint
from litstream.read.plan._pieces import ReadPlanArgs, plan_pieces
from litstream.read.plan._resume import Level, Topology
from litstream.read.plan._session import open_session, resume_plan
from litstream.storage._local import LocalFileStore

if TYPE_CHECKING:
    from pathlib import Path

    from litstream.read.plan._pieces import Piece
    from litstream.read.source._source import DatasetSource


@pytest.fixture(scope="module")
def ints_40(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ints(tmp_path_factory.mktemp("ints40"), 40, 6)


@pytest.fixture
def source(ints_40: Path) -> DatasetSource:
    opened = _open_now(LocalFileStore(ints_40), None, None)
    assert opened is not None
    return opened


def _flat(pieces: list[Piece]) -> list[tuple[int, int]]:
    """(chunk, chunk-local item) of every item the pieces serve, in order."""
    return [(piece.chunk_index, i) for piece, order in pieces for i in order]


def _state(ints_40: Path, *, batches: int, batch_size: int = 2, shuffle: bool = True, **kwargs: Any) -> dict[str, Any]:
    loader = StreamingDataLoader(StreamingDataset(ints_40, shuffle=shuffle, **kwargs), batch_size=batch_size)
    it = iter(loader)
    for _ in range(batches):
        next(it)
    state: dict[str, Any] = loader.state_dict()["dataset"]
    it.close()
    return state


# ------------------------------------------------------------------------------ the checkpoint format


def test_a_dataset_state_round_trips_through_the_frozen_value(ints_40: Path) -> None:
    state = _state(ints_40, batches=3)
    checkpoint = DatasetCheckpoint.from_state(state)
    assert checkpoint.worker_samples_yielded == (6,)
    assert checkpoint.topology == Topology(1, 1, 2)
    assert checkpoint.to_state() == state
    json.dumps(checkpoint.to_state())


def test_a_litdata_state_reads_with_defaults(ints_40: Path) -> None:
    litdata_keys = (
        "num_samples_yielded", "num_workers", "batch_size", "current_epoch", "input_dir_path", "input_dir_url",
        "item_loader", "drop_last", "seed", "world_size", "shuffle",
    )  # fmt: skip
    state = {key: value for key, value in _state(ints_40, batches=2).items() if key in litdata_keys}
    checkpoint = DatasetCheckpoint.from_state(state)
    assert (checkpoint.rank, checkpoint.worker_samples_yielded, checkpoint.resume_levels) == (0, None, ())
    assert checkpoint.config["seed"] == 42
    again = checkpoint.to_state()
    assert again["resume_mode"] == "strict"
    assert again["sample_in_epoch"] == 4


def test_levels_make_an_elastic_state() -> None:
    level = Level(Topology(2, 1, 3), (6, 6))
    checkpoint = DatasetCheckpoint({"seed": 1}, 4, 2, 2, 3, 1, resume_levels=(level,))
    state = checkpoint.to_state()
    assert state["resume_mode"] == "elastic"
    assert (state["initial_world_size"], state["initial_num_workers"], state["initial_batch_size"]) == (2, 1, 3)
    assert state["sample_in_epoch"] == 12 + 4
    again = DatasetCheckpoint.from_state(state)
    assert again.to_state() == state  # stable through a round trip (LitData's config keys are filled in once)
    assert again.config["seed"] == 1
    assert again.resume_levels == checkpoint.resume_levels


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"batch_size": "2"}, r"checkpoint has batch_size='2'; expected an int >= 0"),
        ({"resume_levels": [{"world_size": 1, "num_workers": 1, "batch_size": 2, "consumed": [1, 2]}]}, "per global"),
    ],
)
def test_a_malformed_state_is_refused(ints_40: Path, edit: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        DatasetCheckpoint.from_state({**_state(ints_40, batches=1), **edit})
    with pytest.raises(ConfigurationError, match="checkpoint has no 'current_epoch' key"):
        DatasetCheckpoint.from_state({k: v for k, v in _state(ints_40, batches=1).items() if k != "current_epoch"})


def test_a_composite_state_round_trips() -> None:
    composite = CompositeCheckpoint(
        kind="parallel",
        config={"length": 9, "seed": 42, "resume": True, "reset_rngs": False},
        members=({"seed": 1}, {"seed": 2}),
        worker_samples_yielded=(3, 2),
        num_workers=2,
        batch_size=1,
        current_epoch=2,
        world_size=1,
        carry=(9, 0),
    )
    state = composite.to_state()
    assert state["composite"]["num_samples_yielded"] == 5
    assert state["composite"]["num_datasets"] == 2
    assert CompositeCheckpoint.from_state(state["composite"], [state["0"], state["1"]]) == composite


def test_the_cycle_carry_advances_by_what_each_worker_served() -> None:
    carry = CycleCarry(3, Topology(1, 2, 4), (10, 20))
    following = carry.advance([5, 6])
    assert following == CycleCarry(4, Topology(1, 2, 4), (15, 26))
    assert following.at(4, Topology(1, 2, 4)) == (15, 26)
    assert following.at(4, Topology(2, 2, 4)) is None
    assert following.at(3, Topology(1, 2, 4)) is None


# ------------------------------------------------------------------------------ the session decisions


def test_a_fresh_session_serves_the_plan(source: DatasetSource) -> None:
    args = ReadPlanArgs(batch_size=2, shuffle=True, epoch=3)
    session = open_session(source, args, None, None)
    assert (session.epoch, session.served, session.levels, session.restarted) == (3, 0, (), False)
    assert session.pieces == plan_pieces(source, args)


def test_a_strict_resume_skips_what_was_served(ints_40: Path, source: DatasetSource) -> None:
    state = _state(ints_40, batches=4)
    plan = resume_plan(state, source, None, rank=0, topology=Topology(1, 1, 2), shuffle_window=8)
    session = open_session(source, ReadPlanArgs(batch_size=2, shuffle=True, epoch=9), None, plan)
    assert (session.epoch, session.served, session.levels) == (1, 8, ())
    full = plan_pieces(source, ReadPlanArgs(batch_size=2, shuffle=True, epoch=1))
    assert _flat(session.pieces) == _flat(full)[8:]


def test_an_elastic_resume_closes_a_level(ints_40: Path, source: DatasetSource) -> None:
    state = _state(ints_40, batches=4)
    plan = resume_plan(state, source, None, rank=1, topology=Topology(2, 1, 3), shuffle_window=8)
    session = open_session(source, ReadPlanArgs(rank=1, world_size=2, batch_size=3, shuffle=True), None, plan)
    assert session.levels == (Level(Topology(1, 1, 2), (8,)),)
    assert session.served == 0
    assert session.epoch == 1


def test_a_finished_checkpoint_starts_the_next_epoch(ints_40: Path, source: DatasetSource) -> None:
    state = _state(ints_40, batches=20)
    plan = resume_plan(state, source, None, rank=0, topology=Topology(1, 1, 2), shuffle_window=8)
    assert plan.finished
    session = open_session(source, ReadPlanArgs(batch_size=2, shuffle=True, epoch=1), None, plan)
    assert session.restarted
    assert session.epoch == 2
    assert session.pieces == plan_pieces(source, ReadPlanArgs(batch_size=2, shuffle=True, epoch=2))


def test_the_head_of_a_local_chunk_is_served_without_a_loop(source: DatasetSource) -> None:
    pieces = plan_pieces(source, ReadPlanArgs(shuffle=True))
    head, rest = split_head(source, pieces, 4)
    assert head is not None
    served = list(iter_work(source, head, None))
    assert len(served) == 4
    assert _flat(pieces) == [(head.chunk_index, i) for i in head.items] + _flat(rest)


# ------------------------------------------------------------------------------ opening without a loop


class _FailingStore(LocalFileStore):
    """A local store whose ``url`` fails: a fault in the first step of opening (not a missing loop)."""

    @property
    def url(self) -> str:
        raise RuntimeError("url lookup failed")


def test_opening_a_local_dataset_now_raises_the_errors_of_its_first_step(ints_40: Path) -> None:
    with pytest.raises(RuntimeError, match="url lookup failed"):
        _open_now(_FailingStore(ints_40), None, None)


async def _no_loop_needed(ints_40: Path) -> DatasetSource | None:
    return _open_now(LocalFileStore(ints_40), None, None)


def test_opening_inside_a_running_loop_still_works(ints_40: Path) -> None:
    assert anyio.run(_no_loop_needed, ints_40) is not None
