"""Trust travels: a dataset written from data published by others is not unpickled by a default local read.

``merge_datasets`` of ``http://`` datasets, or ``optimize`` over a reader of one, writes a local dataset
that a reader would trust by its location. The writer records the untrusted sources in ``index.json``
(``litstream_untrusted_sources``, a key LitData ignores) and a reader whose pickle decision was left to the
location refuses the pickled leaves (``PickleRefusedError``), on every read path, ``len()`` included; an
explicit ``allow_pickle=True`` (or ``set_allow_pickle(True)``) still reads them. The pickled leaf is a
payload whose unpickling creates a marker file, so the marker's absence proves ``pickle.loads`` never ran.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest

import litstream
from hostile import Marker, write_dataset
from litstream import (
    PickleRefusedError,
    StreamingDataLoader,
    StreamingDataset,
    astream,
    merge_datasets,
    optimize,
)
from litstream.format._trust_marker import UNTRUSTED_KEY
from peer import require_peer
from servers import hub_http_server

if TYPE_CHECKING:
    from pathlib import Path


pytestmark = pytest.mark.usefixtures("no_global_pickle_setting")


def _pickled(directory: Path, marker: Path) -> None:
    write_dataset(directory, [{"i": i, "x": Marker(marker)} for i in range(4)], chunk_size=2)


async def _astream(ds: Path) -> list[Any]:
    async with astream(ds) as samples:
        return [s async for s in samples]


def _read(ds: Path, path: str, **kwargs: Any) -> Any:
    if path == "iterate":
        return list(StreamingDataset(str(ds), **kwargs))
    if path == "getitem":
        return StreamingDataset(str(ds), **kwargs)[1]
    if path == "len":
        return len(StreamingDataset(str(ds), **kwargs))
    return anyio.run(_astream, ds)


@pytest.fixture
def merged_from_http(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """Two pickled datasets served over http://, merged into a local directory: (merged, marker, urls)."""
    marker = tmp_path / "unpickled"
    for name in ("a", "b"):
        _pickled(tmp_path / "hub" / "static" / name, marker)
    with hub_http_server(tmp_path / "hub") as hub:
        urls = [f"{hub.url}/static/a", f"{hub.url}/static/b"]
        merge_datasets(urls, str(tmp_path / "merged"))
    return tmp_path / "merged", marker, urls


@pytest.mark.parametrize("path", ["iterate", "getitem", "len", "astream"])
def test_a_merge_of_http_datasets_is_refused_by_a_default_local_read(
    merged_from_http: tuple[Path, Path, list[str]], path: str
) -> None:
    merged, marker, urls = merged_from_http
    assert json.loads((merged / "index.json").read_text())[UNTRUSTED_KEY] == urls
    with pytest.raises(PickleRefusedError, match="marks as untrusted") as info:
        _read(merged, path)
    assert urls[0] in str(info.value)
    assert not marker.exists()


def test_an_explicit_choice_still_reads_a_marked_dataset(merged_from_http: tuple[Path, Path, list[str]]) -> None:
    merged, marker, _ = merged_from_http
    assert [s["i"] for s in StreamingDataset(str(merged), allow_pickle=True)] == [0, 1, 2, 3] * 2
    assert marker.exists()
    marker.unlink()
    litstream.set_allow_pickle(True)
    assert len(list(StreamingDataset(str(merged)))) == 8
    assert marker.exists()


def test_the_mark_travels_through_a_second_merge(
    merged_from_http: tuple[Path, Path, list[str]], tmp_path: Path
) -> None:
    merged, marker, urls = merged_from_http
    _pickled(tmp_path / "local", marker)
    merge_datasets([str(merged), str(tmp_path / "local")], str(tmp_path / "again"))
    assert json.loads((tmp_path / "again" / "index.json").read_text())[UNTRUSTED_KEY] == urls
    with pytest.raises(PickleRefusedError):
        list(StreamingDataset(str(tmp_path / "again")))
    assert not marker.exists()


def test_a_merge_of_local_datasets_carries_no_mark(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    for name in ("a", "b"):
        _pickled(tmp_path / name, marker)
    merge_datasets([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "merged"))
    assert UNTRUSTED_KEY not in json.loads((tmp_path / "merged" / "index.json").read_text())
    assert len(list(StreamingDataset(str(tmp_path / "merged")))) == 8  # LitData's default: allowed
    assert marker.exists()


@pytest.mark.litdata
def test_litdata_ignores_the_mark(merged_from_http: tuple[Path, Path, list[str]]) -> None:
    litdata = require_peer("litdata")
    merged, _, _ = merged_from_http
    assert len(litdata.StreamingDataset(str(merged))) == 8


@pytest.mark.parametrize("url", ["http", "hf"])
def test_len_of_a_remote_pickled_dataset_refuses_like_iteration(tmp_path: Path, url: str) -> None:
    marker = tmp_path / "unpickled"
    with hub_http_server(tmp_path / "hub") as hub:
        _pickled(tmp_path / "hub" / "static" / "p", marker)
        _pickled(hub.dataset_dir("org/p"), marker)
        location = f"{hub.url}/static/p" if url == "http" else "hf://datasets/org/p"
        ds = StreamingDataset(location, storage_options={"endpoint": hub.url} if url == "hf" else None)
        with pytest.raises(PickleRefusedError):
            len(ds)
        with pytest.raises(PickleRefusedError):
            list(StreamingDataset(location, storage_options={"endpoint": hub.url} if url == "hf" else None))
    assert not marker.exists()


def _with_bytearray(batch: dict[str, Any]) -> dict[str, Any]:
    return {"i": int(batch["i"][0]), "x": bytearray(b"only pickle stores a bytearray")}


@pytest.mark.parametrize("remote", [True, False])
def test_optimize_over_a_remote_reader_marks_its_output(tmp_path: Path, remote: bool) -> None:
    write_dataset(tmp_path / "hub" / "static" / "ints", [{"i": i} for i in range(6)], chunk_size=3)
    with hub_http_server(tmp_path / "hub") as hub:
        location = f"{hub.url}/static/ints" if remote else str(tmp_path / "hub" / "static" / "ints")
        loader = StreamingDataLoader(StreamingDataset(location, cache_dir=str(tmp_path / "cache")), batch_size=1)
        optimize(  # the pytree layout pickles the bytearray (Arrow rows, the default here, would store bytes)
            _with_bytearray, inputs=loader, output_dir=str(tmp_path / "out"), chunk_size=2, num_workers=1,
            chunk_format="pytree",
        )  # fmt: skip
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    if remote:
        assert index[UNTRUSTED_KEY] == [location]
        with pytest.raises(PickleRefusedError, match="marks as untrusted"):
            list(StreamingDataset(str(tmp_path / "out")))
        assert len(list(StreamingDataset(str(tmp_path / "out"), allow_pickle=True))) == 6
    else:
        assert UNTRUSTED_KEY not in index
        assert len(list(StreamingDataset(str(tmp_path / "out")))) == 6
