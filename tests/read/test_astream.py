from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import anyio
import pytest

import litstream
from litstream import ConfigurationError, DatasetNotFoundError, FormatError, StreamingDataset, astream, optimize
from running import litstream_frames

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def ints_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ints")
    optimize(
        fn=lambda i: {"i": i, "s": str(i)}, inputs=range(50), output_dir=d, chunk_size=7, num_workers=1, verbose=False
    )
    return d


# The package's own directory, by identity (not a path fragment: a clone directory or a virtual
# environment may be called "litstream" too, and anyio's idle threads live there).
_PACKAGE_DIR = os.path.dirname(os.path.abspath(litstream.__file__)) + os.sep


async def test_plain_async_for_yields_every_sample_in_order(ints_dir: Path) -> None:
    assert [s["i"] async for s in astream(ints_dir)] == list(range(50))


async def test_async_with_form_matches_the_dataset_order_when_shuffled(ints_dir: Path) -> None:
    async with astream(ints_dir, shuffle=True, seed=3, epoch=2) as samples:
        got = [s["i"] async for s in samples]
    ds = StreamingDataset(ints_dir, shuffle=True, seed=3)
    ds.set_epoch(2)
    assert got == [s["i"] for s in ds]
    assert sorted(got) == list(range(50))
    assert got != list(range(50))


async def test_ranks_split_the_dataset(ints_dir: Path) -> None:
    parts = []
    for r in range(3):
        parts.append([s["i"] async for s in astream(ints_dir, rank=r, world_size=3)])
    assert sorted(parts[0] + parts[1] + parts[2]) == list(range(50))
    assert [len(p) for p in parts] == [16, 16, 18]


async def test_transform_runs_on_each_sample(ints_dir: Path) -> None:
    got = [s async for s in astream(ints_dir, transform=lambda s: s["i"] * 2)]
    assert got == [2 * i for i in range(50)]


@pytest.mark.parametrize("form", ["plain", "with"])
@pytest.mark.parametrize("how", ["break", "exception", "cancel"])
async def test_leaving_early_leaves_nothing_running(ints_dir: Path, form: str, how: str) -> None:
    tasks_before = len(anyio.get_running_tasks())
    threads_before = {t.ident for t in threading.enumerate()}
    seen: list[int] = []

    async def consume() -> None:
        if form == "plain":
            async for s in astream(ints_dir, max_pre_download=3):
                seen.append(s["i"])
                if len(seen) == 10:
                    await stop()
        else:
            async with astream(ints_dir, max_pre_download=3) as samples:
                async for s in samples:
                    seen.append(s["i"])
                    if len(seen) == 10:
                        await stop()

    class Stop(Exception):
        pass

    async def stop() -> None:
        if how == "exception":
            raise Stop
        if how == "cancel":
            await anyio.sleep_forever()

    if how == "break":
        # `break` out of both forms
        if form == "plain":
            async for s in astream(ints_dir):
                seen.append(s["i"])
                if len(seen) == 10:
                    break
        else:
            async with astream(ints_dir) as samples:
                async for s in samples:
                    seen.append(s["i"])
                    if len(seen) == 10:
                        break
    elif how == "exception":
        with pytest.raises(Stop):
            await consume()
    else:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            while len(seen) < 10:
                await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert seen == list(range(10))
    await anyio.wait_all_tasks_blocked()
    assert len(anyio.get_running_tasks()) == tasks_before
    assert litstream_frames(threads_before) == []
    # Only the backend's idle thread-pool workers may have appeared; none runs litstream code.
    new = [t for t in threading.enumerate() if t.ident not in threads_before]
    assert all(("AnyIO" in t.name or "Trio" in t.name or "trio" in t.name) for t in new), [t.name for t in new]


async def test_entering_twice_is_an_error(ints_dir: Path) -> None:
    stream = astream(ints_dir)
    async with stream:
        with pytest.raises(RuntimeError, match="already entered"):
            await stream.__aenter__()


async def test_missing_dataset_raises_on_first_iteration(tmp_path: Path) -> None:
    stream = astream(tmp_path)
    with pytest.raises(DatasetNotFoundError, match=r"holds no index\.json"):
        await stream.__anext__()


async def test_truncated_chunk_fails_the_iteration_clearly(tmp_path: Path) -> None:
    optimize(fn=lambda i: i, inputs=range(10), output_dir=tmp_path, chunk_size=5, num_workers=1, verbose=False)
    chunk = tmp_path / "chunk-0-1.bin"
    chunk.write_bytes(chunk.read_bytes()[:-3])
    with pytest.raises(FormatError, match=r"chunk-0-1.bin holds \d+ bytes but index.json records chunk_bytes="):
        async with astream(tmp_path) as samples:
            async for _ in samples:
                pass


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shuffle": "yes"}, "shuffle must be True or False, got 'yes'"),
        ({"seed": -1}, r"seed must be an int in \[0, 2\*\*32\), got -1"),
        ({"max_pre_download": 0}, "max_pre_download must be an int >= 1"),
        ({"transform": 5}, "transform must be a callable or a list of callables, got int 5"),
    ],
)
def test_bad_arguments_are_rejected_at_call(ints_dir: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        astream(ints_dir, **kwargs)


def _unused() -> Iterator[None]:  # keeps Iterator import used for type checkers
    yield None
