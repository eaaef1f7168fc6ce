"""``allow_pickle=False``: no read path runs ``pickle.loads`` on a dataset's pickled leaves.

The dataset's pickled leaf is a payload whose unpickling creates a marker file: the marker's absence
proves that ``pickle.loads`` never ran, whatever the error path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

import litstream
from dataset_files import data_files
from hostile import Marker, write_dataset
from litstream import (
    CombinedStreamingDataset,
    ConfigurationError,
    ParallelStreamingDataset,
    PickleRefusedError,
    StreamingDataset,
    WorkerError,
    astream,
    optimize,
)
from litstream.format._index import DatasetConfig
from litstream.format._loaders import SampleDecoder
from litstream.read._trust import resolve_allow_pickle
from servers import hub_http_server

if TYPE_CHECKING:
    from pathlib import Path


pytestmark = pytest.mark.usefixtures("no_global_pickle_setting")


@pytest.fixture
def marked(tmp_path: Path) -> tuple[Path, Path]:
    """A dataset whose ``x`` leaf is pickled: unpickling it creates ``marker``."""
    marker = tmp_path / "unpickled"
    ds = tmp_path / "ds"
    write_dataset(ds, [{"i": i, "x": Marker(marker)} for i in range(4)], chunk_size=2)
    return ds, marker


async def _plain(ds: Any) -> list[Any]:
    return [s async for s in astream(ds, allow_pickle=False)]


async def _with(ds: Any) -> list[Any]:
    async with astream(ds, allow_pickle=False) as samples:
        return [s async for s in samples]


async def _composite(ds: Any) -> list[Any]:
    async with ds.astream() as samples:
        return [s async for s in samples]


@pytest.mark.parametrize(
    "path", ["iterate", "getitem", "slice", "astream", "astream_with", "astream_of_dataset", "loader"]
)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_every_single_dataset_read_path_refuses_before_unpickling(
    marked: tuple[Path, Path], path: str, backend: str
) -> None:
    ds, marker = marked
    with pytest.raises(PickleRefusedError, match=r"leaf 1 \('pickle'\).*allow_pickle=True"):
        if path == "iterate":
            list(StreamingDataset(ds, allow_pickle=False))
        elif path == "getitem":
            StreamingDataset(ds, allow_pickle=False)[1]
        elif path == "slice":
            StreamingDataset(ds, allow_pickle=False)[0:2]
        elif path == "astream":
            anyio.run(_plain, ds, backend=backend)
        elif path == "astream_with":
            anyio.run(_with, ds, backend=backend)
        elif path == "astream_of_dataset":
            anyio.run(_plain, StreamingDataset(ds, allow_pickle=False), backend=backend)
        else:
            list(litstream.StreamingDataLoader(StreamingDataset(ds, allow_pickle=False), batch_size=2))
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["combined", "parallel"])
@pytest.mark.parametrize("form", ["iterate", "astream"])
def test_composite_wrappers_refuse_for_every_member(marked: tuple[Path, Path], kind: str, form: str) -> None:
    ds, marker = marked
    members = [StreamingDataset(ds), StreamingDataset(ds)]  # local data: allowed by default ...
    wrapper: Any = (
        CombinedStreamingDataset(members, allow_pickle=False)  # ... until the wrapper refuses for all
        if kind == "combined"
        else ParallelStreamingDataset(members, allow_pickle=False)
    )
    assert [m.allow_pickle for m in members] == [False, False]
    with pytest.raises(PickleRefusedError):
        if form == "iterate":
            list(wrapper)
        else:
            anyio.run(_composite, wrapper)
    assert not marker.exists()


def test_allowed_reads_unpickle_as_litdata_does(marked: tuple[Path, Path]) -> None:
    ds, marker = marked
    samples = list(StreamingDataset(ds))  # local: allowed by default (LitData's behaviour)
    assert [s["i"] for s in samples] == [0, 1, 2, 3]
    assert marker.exists()  # the payload ran: exactly what allow_pickle=False prevents


def test_the_global_switch_and_the_environment(marked: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ds, marker = marked
    monkeypatch.setenv("LITSTREAM_ALLOW_PICKLE", "0")
    with pytest.raises(PickleRefusedError):
        StreamingDataset(ds)[0]
    litstream.set_allow_pickle(True)  # code beats the environment
    assert StreamingDataset(ds, allow_pickle=False).allow_pickle is False  # the argument beats both
    assert StreamingDataset(ds).allow_pickle is True
    litstream.set_allow_pickle(False)
    with pytest.raises(PickleRefusedError):
        list(StreamingDataset(ds))
    assert not marker.exists()
    monkeypatch.setenv("LITSTREAM_ALLOW_PICKLE", "maybe")
    litstream.set_allow_pickle(None)
    with pytest.raises(ConfigurationError, match="LITSTREAM_ALLOW_PICKLE='maybe'"):
        StreamingDataset(ds)
    with pytest.raises(ConfigurationError, match="allow_pickle must be True, False or None"):
        StreamingDataset(ds, allow_pickle="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("/data/ds", True),
        ("s3://bucket/ds", True),
        ("gs://bucket/ds", True),
        ("hf://datasets/org/name/ds", False),
        ("https://example.com/ds", False),
        ("HTTP://example.com/ds", False),
    ],
)
def test_default_by_location(url: str, allowed: bool) -> None:
    assert resolve_allow_pickle(None, url) is allowed
    assert resolve_allow_pickle(True, url) is True
    assert resolve_allow_pickle(False, url) is False


def test_hub_datasets_refuse_pickle_by_default(marked: tuple[Path, Path], tmp_path: Path) -> None:
    ds, marker = marked
    with hub_http_server(tmp_path / "hub") as hub_server:
        _check_hub(ds, marker, hub_server)


def _check_hub(ds: Path, marker: Path, hub_server: Any) -> None:
    target = hub_server.dataset_dir("org/pickled")
    for file in data_files(ds):
        (target / file.name).write_bytes(file.read_bytes())
    url = "hf://datasets/org/pickled"
    options = {"endpoint": hub_server.url}
    with pytest.raises(PickleRefusedError, match="hf://datasets/org/pickled"):
        list(StreamingDataset(url, storage_options=options))
    assert not marker.exists()
    got = list(StreamingDataset(url, storage_options=options, allow_pickle=True))
    assert [s["i"] for s in got] == [0, 1, 2, 3]
    assert marker.exists()


def test_defaultdict_factories_from_other_modules_are_refused_without_pickle() -> None:
    spec = (
        '[1, {"type": "collections.defaultdict", "context": {"default_factory_module": "antigravity", '
        '"default_factory_name": "geohash", "dict_context": ["a"]}, "children_spec": '
        '[{"type": null, "context": null, "children_spec": []}]}]'
    )
    config = DatasetConfig(data_format=("int",), data_spec=spec)
    with pytest.raises(PickleRefusedError, match="antigravity"):
        SampleDecoder(config, allow_pickle=False)
    builtin = spec.replace('"antigravity"', '"builtins"').replace('"geohash"', '"list"')
    SampleDecoder(DatasetConfig(data_format=("int",), data_spec=builtin), allow_pickle=False)


def _pickled_sample(i: int) -> dict[str, Any]:
    return {"i": i, "x": bytearray(b"only pickle stores a bytearray")}


def test_optimize_refuses_to_write_pickled_leaves(tmp_path: Path) -> None:
    with pytest.raises(WorkerError) as info:
        optimize(  # the pytree layout pickles a bytearray (the default's Arrow rows store it as bytes)
            _pickled_sample, list(range(3)), tmp_path / "out", chunk_size=2, num_workers=1, allow_pickle=False,
            chunk_format="pytree",
        )  # fmt: skip
    assert isinstance(info.value.__cause__, PickleRefusedError)
    assert "leaf 1 of the first sample is a bytearray" in str(info.value)
    assert not (tmp_path / "out" / "index.json").exists()
    with pytest.raises(ConfigurationError, match="allow_pickle must be True or False"):
        optimize(_pickled_sample, [0], tmp_path / "o2", chunk_size=2, allow_pickle=None)  # type: ignore[arg-type]
