"""Resume inside an epoch: the pure logic of ``litstream.read.plan._resume`` and the loader's checkpoints.

Layers: hypothesis properties of the pure functions (torch's delivery order, the restripe budgets,
exactly-once over random chains of resumes on random topologies), the law helper
(``tests/resume_law.py``) over a grid of loaders and over elastic resumes, the reported cases B09
and B11, a resume in a fresh process, and the errors.
"""

from __future__ import annotations

import itertools
import json
import pickle
import subprocess
import sys
import textwrap
from collections import Counter
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dataset_files import write_ints
from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset
from litstream.format._version_log import index_digest
from litstream.read.plan._pieces import ChunkWindow, ReadPlanArgs, plan_pieces
from litstream.read.plan._plan import ChunkSlice
from litstream.read.plan._resume import (
    EpochSpec,
    Level,
    ResumePlan,
    Topology,
    level_streams,
    resolve_resume,
    round_robin,
    stripe_budgets,
)
from resume_law import as_items, assert_resume_law, rank_env

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from litstream.read.plan._pieces import Piece


def _flat(batches: Any) -> list[int]:
    return [int(x) for batch in batches for x in as_items(batch)]


# ------------------------------------------------------------------------------------- pure: helpers


def _torch_order(lengths: Sequence[int], batch_size: int) -> list[tuple[int, int]]:
    """(worker, batch size) in the order torch delivers an IterableDataset's batches (in_order=True)."""
    left = list(lengths)
    out: list[tuple[int, int]] = []
    while any(left):
        for w, n in enumerate(left):
            if n:
                out.append((w, min(n, batch_size)))
                left[w] -= min(n, batch_size)
    return out


def _expand(pieces: Sequence[Piece], chunk_sizes: Sequence[int]) -> list[tuple[int, int]]:
    """``(chunk, chunk-local item)`` pairs that ``pieces`` serve, in order."""
    out: list[tuple[int, int]] = []
    for piece, order in pieces:
        if isinstance(piece, ChunkWindow):
            for item in order:
                j = max(i for i, base in enumerate(piece.bases) if base <= item)
                out.append((piece.chunks[j], item - piece.bases[j]))
        else:
            out += [(piece.chunk_index, item) for item in order]
    return out


def _state(
    spec: EpochSpec, topology: Topology, *, rank: int, counts: Sequence[int], levels: Sequence[Level]
) -> dict[str, Any]:
    """A dataset state as ``StreamingDataset.state_dict`` writes it (only the keys resolution reads)."""
    return {
        "shuffle": spec.shuffle,
        "seed": spec.seed,
        "drop_last": spec.drop_last,
        "current_epoch": spec.epoch,
        "world_size": topology.world_size,
        "num_workers": topology.num_workers,
        "batch_size": topology.batch_size,
        "num_samples_yielded": sum(counts),
        "rank": rank,
        "worker_samples_yielded": list(counts),
        "resume_levels": [level.as_dict() for level in levels],
    }


# ------------------------------------------------------------------------------------- pure: properties


@given(
    lengths=st.lists(st.integers(0, 30), min_size=1, max_size=5),
    batch_size=st.integers(1, 6),
    data=st.data(),
)
def test_round_robin_matches_torch_delivery(lengths: list[int], batch_size: int, data: st.DataObject) -> None:
    order = _torch_order(lengths, batch_size)
    batches = data.draw(st.integers(0, len(order) + 2))
    counts, nxt = round_robin(lengths, batch_size, batches)
    expected = [0] * len(lengths)
    for w, n in order[:batches]:
        expected[w] += n
    assert counts == expected
    if 0 < batches < len(order):
        # torch's next batch comes from the first worker at or after `nxt` (cyclically) that has items left
        left = [n - c for n, c in zip(lengths, expected, strict=True)]
        rotated = [(nxt + j) % len(lengths) for j in range(len(lengths))]
        assert next(w for w in rotated if left[w]) == order[batches][0]


@given(total=st.integers(0, 500), world=st.integers(1, 5), workers=st.integers(1, 4), batch=st.integers(1, 9))
def test_stripe_budgets_serve_everything_in_near_equal_batches(
    total: int, world: int, workers: int, batch: int
) -> None:
    budgets = stripe_budgets(total, Topology(world, workers, batch))
    assert sum(budgets) == total
    assert len(budgets) == world * workers
    assert sum(b % batch for b in budgets) == total % batch  # a single short batch at most
    rank_batches = [sum(-(-b // batch) for b in budgets[r * workers : (r + 1) * workers]) for r in range(world)]
    assert max(rank_batches) - min(rank_batches) <= 1
    for r in range(world):
        row = [-(-b // batch) for b in budgets[r * workers : (r + 1) * workers]]
        assert max(row) - min(row) <= 1
        lengths = budgets[r * workers : (r + 1) * workers]
        if lengths and any(b % batch for b in lengths):  # the short batch is the rank's last delivery
            assert _torch_order(lengths, batch)[-1][1] == total % batch


_SHUFFLES: list[Any] = [False, True, "window"]


@st.composite
def _chains(draw: st.DrawFn) -> dict[str, Any]:
    sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=12))
    topologies = draw(
        st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 5)), min_size=1, max_size=4)
    )
    return {
        "spec": EpochSpec(
            chunk_sizes=tuple(sizes),
            shuffle=draw(st.sampled_from(_SHUFFLES)),
            seed=draw(st.integers(0, 2**32 - 1)),
            epoch=draw(st.integers(1, 4)),
            drop_last=draw(st.booleans()),
            shuffle_window=draw(st.integers(1, 4)),
        ),
        "topologies": [Topology(*t) for t in topologies],
        "fractions": draw(st.lists(st.floats(0, 1), min_size=len(topologies), max_size=len(topologies))),
        "saver": draw(st.integers(0, 3)),
    }


_ROTATION_CASE = {
    # two lock-step sessions on one topology, then elastic: rank 1's counts are derived from rank 0's
    # batch count, which is exact only because resumed sessions continue torch's round-robin
    "spec": EpochSpec(chunk_sizes=(1, 1, 1, 1, 2, 12), shuffle=False, seed=0, epoch=1, drop_last=False),
    "topologies": [Topology(2, 2, 3), Topology(2, 2, 3), Topology(1, 1, 1)],
    "fractions": [0.5, 0.5, 0.0],
    "saver": 0,
}


@settings(max_examples=300, deadline=None)
@example(chain=_ROTATION_CASE)
@given(chain=_chains())
def test_any_chain_of_resumes_serves_every_item_exactly_once(chain: dict[str, Any]) -> None:
    """Lock-step ranks stop after the same number of batches on each topology; the saver's state is
    resolved on every rank of the next one. Over the whole chain every item of the epoch is served
    exactly once, and a strict resume continues the saver's exact counts."""
    spec: EpochSpec = chain["spec"]
    first: Topology = chain["topologies"][0]
    expected = Counter(
        item for g in range(first.world_size * first.num_workers) for item in _stream_items(spec, first, g)
    )
    served: Counter[tuple[int, int]] = Counter()
    plans = [ResumePlan(spec, (), first, r, (0,) * first.num_workers, 0, False) for r in range(first.world_size)]
    chunk_sizes = spec.chunk_sizes
    for step, topology in enumerate(chain["topologies"]):
        workers, batch = topology.num_workers, topology.batch_size
        remaining = [[_expand(plan.pieces(w), chunk_sizes) for w in range(workers)] for plan in plans]
        # torch worker j serves logical worker (start + j) % K
        orders = [
            _torch_order([len(per_worker[(plan.start + j) % workers]) for j in range(workers)], batch)
            for plan, per_worker in zip(plans, remaining, strict=True)
        ]
        last = step == len(chain["topologies"]) - 1
        # lock-step: every rank stops after the same number of batches (at most what the shortest holds)
        stop = max(len(o) for o in orders) if last else int(chain["fractions"][step] * min(len(o) for o in orders))
        counts: list[list[int]] = []
        for r, plan in enumerate(plans):
            taken = [0] * workers
            for torch_worker, size in orders[r][:stop]:
                w = (plan.start + torch_worker) % workers
                served.update(remaining[r][w][taken[w] : taken[w] + size])
                taken[w] += size
            counts.append([c + t for c, t in zip(plan.consumed, taken, strict=True)])
        if last:
            break
        saver = chain["saver"] % topology.world_size
        state = _state(spec, topology, rank=saver, counts=counts[saver], levels=plans[0].levels)
        nxt: Topology = chain["topologies"][step + 1]
        plans = [
            resolve_resume(state, chunk_sizes=chunk_sizes, rank=r, topology=nxt, shuffle_window=spec.shuffle_window)
            for r in range(nxt.world_size)
        ]
        if plans[0].finished:
            break
        if nxt == topology:
            for r, plan in enumerate(plans):
                assert list(plan.consumed) == counts[r]  # derived counts equal what the rank really did
    if not plans[0].finished:
        assert served == expected
    else:
        assert all(n == 1 for n in served.values())
        assert set(served) <= set(expected)


def _stream_items(spec: EpochSpec, topology: Topology, g: int) -> list[tuple[int, int]]:
    """The items global worker ``g`` serves in a level-0 epoch, in order."""
    rank, worker = divmod(g, topology.num_workers)
    plan = ResumePlan(spec, (), topology, rank, (0,) * topology.num_workers, 0, False)
    return _expand(plan.pieces(worker), spec.chunk_sizes)


@settings(max_examples=150, deadline=None)
@given(chain=_chains(), data=st.data())
def test_level_zero_streams_are_the_engines_plan(chain: dict[str, Any], data: st.DataObject) -> None:
    """Elastic resume computes what level 0 consumed from its own streams: they must be the engine's."""
    spec: EpochSpec = chain["spec"]
    top: Topology = chain["topologies"][0]
    source = SimpleNamespace(
        chunk_sizes=list(spec.chunk_sizes),
        index=SimpleNamespace(chunks=[SimpleNamespace(chunk_bytes=0) for _ in spec.chunk_sizes]),
    )
    for g in range(top.world_size * top.num_workers):
        mine = _stream_items(spec, top, g)
        skip = data.draw(st.integers(0, len(mine)))
        args = ReadPlanArgs(
            rank=g // top.num_workers,
            world_size=top.world_size,
            worker=g % top.num_workers,
            num_workers=top.num_workers,
            batch_size=top.batch_size,
            drop_last=spec.drop_last,
            shuffle=spec.shuffle,
            seed=spec.seed,
            epoch=spec.epoch,
            skip=skip,
            shuffle_window=spec.shuffle_window,
        )
        assert _expand(plan_pieces(source, args), spec.chunk_sizes) == mine[skip:]  # type: ignore[arg-type]


def test_restripe_keeps_chunks_together() -> None:
    """A new worker gets a contiguous run of the remainder, so it fetches few distinct chunks."""
    spec = EpochSpec(chunk_sizes=(10,) * 20, shuffle=True, seed=3, epoch=1, drop_last=False)
    old = Topology(2, 2, 4)
    consumed = (8, 8, 4, 4)
    streams = level_streams(spec, (Level(old, consumed),), Topology(1, 3, 5))
    assert sum(len(seg) for stream in streams for seg in stream) == 200 - 24
    for stream in streams:
        chunks = [seg.unit.chunk_index for seg in stream if isinstance(seg.unit, ChunkSlice)]
        assert len(chunks) <= 60 // 10 + 3


# ------------------------------------------------------------------------------------- the law, loaders


_STOPS: dict[str, Callable[[int], int]] = {
    "0": lambda n: 0,
    "1": lambda n: 1,
    "middle": lambda n: n // 2,
    "last-1": lambda n: n - 1,
    "all": lambda n: n,
}


def _loader(d: Path, *, shuffle: bool, workers: int, batch: int, **kwargs: Any) -> Callable[[], StreamingDataLoader]:
    def make() -> StreamingDataLoader:
        return StreamingDataLoader(
            StreamingDataset(d, shuffle=shuffle, **kwargs), batch_size=batch, num_workers=workers
        )

    return make


@pytest.mark.parametrize("stop", list(_STOPS))
@pytest.mark.parametrize("batch", [1, 4, 7])
@pytest.mark.parametrize("shuffle", [False, True])
def test_law_without_workers(ints_100: Path, shuffle: bool, batch: int, stop: str) -> None:
    assert_resume_law(_loader(ints_100, shuffle=shuffle, workers=0, batch=batch), stop_after=_STOPS[stop])


# Every num_workers > 0 with every batch size, each shuffle value twice per num_workers and batch size
# across the grid: worker processes cost ~0.15 s an epoch, so the full cross product would be slow.
_WORKER_GRID = [(w, b, (w + b) % 2 == 0) for w, b in itertools.product([1, 2, 3], [1, 4, 7])]


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "batch", "shuffle"), _WORKER_GRID)
def test_law_with_workers(ints_100: Path, workers: int, batch: int, shuffle: bool) -> None:
    make = _loader(ints_100, shuffle=shuffle, workers=workers, batch=batch)
    for stop in _STOPS.values():
        assert_resume_law(make, stop_after=stop)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("new_world", "new_workers", "new_batch", "stop"),
    [(1, 3, 4, "1"), (1, 3, 5, "middle"), (4, 0, 4, "middle"), (4, 0, 3, "last-1"), (4, 0, 4, "0"), (1, 3, 4, "all")],
)
@pytest.mark.parametrize("shuffle", [False, True])
def test_elastic_law(
    ints_100: Path, shuffle: bool, new_world: int, new_workers: int, new_batch: int, stop: str
) -> None:
    """The issue's "Done when": (world 2, workers 2) resumed on (world 1, workers 3) and on (world 4,
    workers 0) serves every remaining sample exactly once, then a clean epoch."""
    outcome = assert_resume_law(
        _loader(ints_100, shuffle=shuffle, workers=2, batch=4),
        make_resumed_loader=_loader(ints_100, shuffle=shuffle, workers=new_workers, batch=new_batch),
        stop_after=_STOPS[stop],
        world_size=2,
        resumed_world_size=new_world,
    )
    if stop not in ("0", "all"):
        assert outcome.state["dataset"]["resume_mode"] == "strict"
        assert outcome.state["dataset"]["world_size"] == 2
        assert sum(len(r) for r in outcome.rest) > 0


@pytest.mark.slow
def test_strict_multi_rank_from_rank_zero_state(ints_100: Path) -> None:
    """DDP strict resume: every rank loads rank 0's state and derives its own position exactly."""
    for stop in ("1", "last-1"):
        assert_resume_law(_loader(ints_100, shuffle=True, workers=2, batch=3), stop_after=_STOPS[stop], world_size=2)
    assert_resume_law(
        _loader(ints_100, shuffle=True, workers=0, batch=2), stop_after=_STOPS["middle"], world_size=3, saver_rank=2
    )


def _run_chain(d: Path, shuffle: Any, steps: Sequence[tuple[int, int, int, int | None]]) -> dict[str, Any]:
    """Run ``(world, workers, batch, stop)`` steps in one epoch, each resuming rank 0's last state."""
    served: list[int] = []
    state: dict[str, Any] | None = None
    for world, workers, batch, stop in steps:
        saved: dict[str, Any] = {}
        for rank in range(world):
            with rank_env(rank, world):
                loader = StreamingDataLoader(
                    StreamingDataset(d, shuffle=shuffle, drop_last=False), batch_size=batch, num_workers=workers
                )
                if state is not None:
                    loader.load_state_dict(pickle.loads(pickle.dumps(state)))
                it = iter(loader)
                served += _flat(itertools.islice(it, stop))
                new_state = loader.state_dict()
                it.close()
                saved = saved or new_state
        state = saved
    assert state is not None
    assert sorted(served) == list(range(100)), (shuffle, steps)
    return state


@pytest.mark.parametrize("shuffle", [True, "window"])
def test_elastic_chain(ints_100: Path, shuffle: Any) -> None:
    """Two elastic resumes in one epoch (W2,B4 -> W3,B5 -> W1,B2) with a strict one between."""
    state = _run_chain(ints_100, shuffle, [(2, 0, 4, 3), (3, 0, 5, 2), (3, 0, 5, 1), (1, 0, 2, None)])
    assert state["dataset"]["resume_mode"] == "elastic"
    assert len(state["dataset"]["resume_levels"]) == 2


@pytest.mark.slow
def test_strict_twice_with_workers_then_elastic(ints_100: Path) -> None:
    """Rank 1's position after two sessions is derived from rank 0's batch count: exact because a
    resumed session continues torch's round-robin (torch worker j serves logical worker start + j)."""
    _run_chain(ints_100, True, [(2, 2, 3, 1), (2, 2, 3, 1), (1, 3, 4, None)])


# ------------------------------------------------------------------------------------- reported cases


@pytest.mark.slow
def test_b09_resume_after_a_finished_epoch_and_partial_resume_is_not_replayed(tmp_path: Path) -> None:
    d = write_ints(tmp_path, 100, 10)

    def loader() -> StreamingDataLoader:
        return StreamingDataLoader(StreamingDataset(d, shuffle=True), batch_size=4, num_workers=2)

    # (a) a state taken after a complete epoch: the next iteration is a normal next epoch
    one = loader()
    e1 = _flat(one)
    assert one.current_epoch == 1
    one.load_state_dict(one.state_dict())
    e2 = _flat(one)
    assert sorted(e1) == sorted(e2) == list(range(100))
    assert one.current_epoch == 2
    assert e1 != e2

    # (b) a partial epoch resumed in place is finished once, and the epoch after is full
    two = loader()
    first: list[int] = []
    for i, batch in enumerate(two):
        first += batch.tolist()
        if i == 10:
            break
    assert len(first) == 44
    two.load_state_dict(two.state_dict())
    rest = _flat(two)
    nxt = _flat(two)
    assert not set(first) & set(rest)
    assert sorted(first + rest) == list(range(100))
    assert sorted(nxt) == list(range(100))
    assert two.current_epoch == 2


@pytest.mark.parametrize("via", ["pickle", "torch.save"])
def test_b11_a_brand_new_loader_continues_from_the_saved_sample(tmp_path: Path, via: str) -> None:
    d = write_ints(tmp_path, 20, 4)
    first = StreamingDataLoader(StreamingDataset(d, shuffle=False), batch_size=1, num_workers=0)
    got = _flat(itertools.islice(iter(first), 5))
    assert got == [0, 1, 2, 3, 4]
    state = first.state_dict()
    if via == "pickle":
        state = pickle.loads(pickle.dumps(state))
    else:
        path = tmp_path / "ckpt.pt"
        torch.save(state, path)
        state = torch.load(path, weights_only=True)
    second = StreamingDataLoader(StreamingDataset(d, shuffle=False), batch_size=1, num_workers=0)
    second.load_state_dict(state)
    assert _flat(second) == list(range(5, 20))


@pytest.mark.slow
def test_b11_with_workers_and_shuffle(tmp_path: Path) -> None:
    d = write_ints(tmp_path, 20, 4)

    def loader() -> StreamingDataLoader:
        return StreamingDataLoader(StreamingDataset(d, shuffle=True), batch_size=1, num_workers=2)

    first = loader()
    it = iter(first)
    got = _flat(itertools.islice(it, 5))
    state = pickle.loads(pickle.dumps(first.state_dict()))
    it.close()
    second = loader()
    second.load_state_dict(state)
    rest = _flat(second)
    assert len(rest) == 15
    assert not set(got) & set(rest)
    assert sorted(got + rest) == list(range(20))


_CHILD = """
import json, pickle, sys
from litstream import StreamingDataLoader, StreamingDataset
loader = StreamingDataLoader(StreamingDataset(sys.argv[1], shuffle=True), batch_size=4, num_workers=2)
it = iter(loader)
seen = [int(x) for _, batch in zip(range(6), it) for x in batch]
with open(sys.argv[2], "wb") as f:
    pickle.dump(loader.state_dict(), f)
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_resume_in_a_fresh_process(ints_100: Path, tmp_path: Path) -> None:
    """The checkpoint is written by another interpreter; this one finishes the epoch from it."""
    ckpt = tmp_path / "state.pkl"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD), str(ints_100), str(ckpt)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(seen) == 24
    loader = StreamingDataLoader(StreamingDataset(ints_100, shuffle=True), batch_size=4, num_workers=2)
    loader.load_state_dict(pickle.loads(ckpt.read_bytes()))
    rest = _flat(loader)
    assert sorted(seen + rest) == list(range(100))
    clean = StreamingDataLoader(StreamingDataset(ints_100, shuffle=True), batch_size=4, num_workers=2)
    clean.current_epoch = 1
    assert [b.tolist() for b in loader] == [b.tolist() for b in clean]


# ------------------------------------------------------------------------------------- errors


def _mid_state(d: Path, **kwargs: Any) -> dict[str, Any]:
    loader = StreamingDataLoader(StreamingDataset(d, shuffle=True, **kwargs), batch_size=4)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    it.close()
    return state


@pytest.mark.parametrize(
    ("saved", "now", "match"),
    [
        ({"seed": 1}, {"seed": 2}, r"checkpoint has seed=1 but this dataset has seed=2; build the dataset with seed=1"),
        ({}, {"shuffle": False}, r"checkpoint has shuffle=True but this dataset has shuffle=False; build the dataset"),
        ({"drop_last": True}, {"drop_last": False}, r"checkpoint has drop_last=True but this dataset has drop_last=F"),
        ({}, {"shuffle": "window"}, r"checkpoint has shuffle=True but this dataset has shuffle='window'"),
    ],
)
def test_a_checkpoint_of_another_configuration_is_refused(
    ints_100: Path, saved: dict[str, Any], now: dict[str, Any], match: str
) -> None:
    state = _mid_state(ints_100, **saved)
    kwargs = {"shuffle": True, **now}
    other = StreamingDataLoader(StreamingDataset(ints_100, **kwargs), batch_size=4)
    with pytest.raises(ConfigurationError, match=match):
        other.load_state_dict(state)


def test_a_checkpoint_of_another_input_dir_is_refused(ints_100: Path, tmp_path: Path) -> None:
    state = _mid_state(ints_100)
    other_dir = write_ints(tmp_path, 100, 7)
    other = StreamingDataLoader(StreamingDataset(other_dir, shuffle=True), batch_size=4)
    with pytest.raises(
        ConfigurationError, match=r"checkpoint has input_dir_path=.* but this dataset has input_dir_path="
    ):
        other.load_state_dict(state)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"num_samples_yielded": 101}, r"num_samples_yielded=101 but rank 0 serves only 100 samples in epoch 1"),
        ({"worker_samples_yielded": [101]}, r"worker 0 of rank 0 yielded 101 samples but it serves only 100"),
        ({"worker_samples_yielded": [1, 2]}, r"lists 2 worker counts for num_workers=1"),
        ({"rank": 3}, r"checkpoint has rank=3 but world_size=1"),
        ({"num_samples_yielded": -1}, r"checkpoint has num_samples_yielded=-1; expected an int >= 0"),
    ],
)
def test_a_checkpoint_beyond_its_epoch_is_refused(ints_100: Path, edit: dict[str, Any], match: str) -> None:
    state = _mid_state(ints_100)
    state["dataset"].update(edit)
    other = StreamingDataLoader(StreamingDataset(ints_100, shuffle=True), batch_size=4)
    with pytest.raises(ConfigurationError, match=match):
        other.load_state_dict(state)


def test_a_malformed_level_is_refused(ints_100: Path) -> None:
    state = _mid_state(ints_100)
    state["dataset"]["resume_levels"] = [{"world_size": 1, "num_workers": 1, "batch_size": 4, "consumed": [500]}]
    other = StreamingDataLoader(StreamingDataset(ints_100, shuffle=True), batch_size=4)
    with pytest.raises(ConfigurationError, match=r"global worker 0 consumed 500 samples but it serves only 100"):
        other.load_state_dict(state)


# ------------------------------------------------------------------------------------- the state itself


def test_state_dict_format(ints_100: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(ints_100, shuffle=True), batch_size=4)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    it.close()
    assert set(state) == {"dataset", "current_epoch", "num_samples_yielded", "latest_worker_idx"}
    assert (state["current_epoch"], state["num_samples_yielded"], state["latest_worker_idx"]) == (1, 12, 0)
    ds = state["dataset"]
    assert ds == {
        "input_dir_path": str(ints_100),
        "input_dir_url": None,
        "item_loader": None,  # LitData's spelling of the default loader
        "drop_last": False,  # resolved, as LitData writes it
        "seed": 42,
        "shuffle": True,
        "cache_dir_path": None,  # LitData's keys (a local dataset has no cache)
        "subsampled_files": [f"chunk-0-{i}.bin" for i in range(len(ds["subsampled_files"]))],
        "region_of_interest": ds["region_of_interest"],
        "num_canonical_nodes": 1,
        "initial_num_nodes": 1,
        "shuffle_window": 8,
        "item_shuffle_window": 256,
        "num_samples_yielded": 12,
        "num_workers": 1,
        "batch_size": 4,
        "current_epoch": 1,
        "world_size": 1,
        "state_version": 2,
        "sample_in_epoch": 12,
        "initial_world_size": 1,
        "initial_num_workers": 1,
        "initial_batch_size": 4,
        "resume_mode": "strict",
        "rank": 0,
        "worker_samples_yielded": [12],
        "resume_levels": [],
        "dataset_version": index_digest((ints_100 / "index.json").read_bytes()),  # the version it was saved on
    }
    json.dumps(state)  # plain values only


def test_dataset_alone_resumes_from_a_litdata_style_state(ints_100: Path) -> None:
    """Without per-worker counts (LitData's format) the split is derived from num_samples_yielded."""
    ds = StreamingDataset(ints_100, shuffle=True)
    full = list(ds)
    state = ds.state_dict(30, 0, 1, current_epoch=1)
    assert state["worker_samples_yielded"] is None
    again = StreamingDataset(ints_100, shuffle=True)
    again.load_state_dict(state)
    assert list(again) == full[30:]
