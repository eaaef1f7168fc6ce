"""StreamingRawDataset on a local folder: custom indexers, the list kept next to the data, item_type="path"."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_raw_dataset import N, make_files

from litstream import ConfigurationError, StreamingRawDataset
from litstream._torch._raw_dataset import BaseIndexer, FileIndexer, FileMetadata
from litstream.index._raw import decode_index, index_cache_dir


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "data"
    return root, make_files(root)


class OnlyA(BaseIndexer):
    """The files of sub-folder ``a``, largest first (a custom order)."""

    def __init__(self) -> None:
        self.calls = 0

    def discover_files(self, input_dir: str, storage_options: dict[str, Any] | None) -> list[FileMetadata]:
        self.calls += 1
        found = [
            FileMetadata(os.path.join(d, name), os.path.getsize(os.path.join(d, name)))
            for d, _, names in os.walk(os.path.join(input_dir, "a"))
            for name in names
        ]
        return sorted(found, key=lambda f: -f.size)


def test_a_custom_indexer_chooses_the_files_and_their_order(
    folder: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, files = folder
    indexer = OnlyA()
    ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", indexer=indexer)
    expected = sorted((p for p in files if "/a/" in p), key=lambda p: -len(files[p]))
    assert len(ds) == N // 2
    assert [f.path for f in ds.files] == expected
    assert list(ds) == [files[p] for p in expected]
    # the list is kept: a second dataset does not ask the indexer again
    again = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", indexer=indexer)
    assert indexer.calls == 1
    assert [f.path for f in again.files] == expected


def test_a_custom_indexer_must_return_files_below_input_dir(
    folder: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, _ = folder

    class Outside(BaseIndexer):
        def discover_files(self, input_dir: str, storage_options: dict[str, Any] | None) -> list[FileMetadata]:
            return [FileMetadata(str(tmp_path / "elsewhere.bin"), 3)]

    class NotAList(BaseIndexer):
        def discover_files(self, input_dir: str, storage_options: dict[str, Any] | None) -> list[FileMetadata]:
            return "a.bin"  # type: ignore[return-value]

    with pytest.raises(ConfigurationError, match="not inside the dataset"):
        StreamingRawDataset(str(root), cache_dir=tmp_path / "c1", indexer=Outside())
    with pytest.raises(ConfigurationError, match="return a list of FileMetadata"):
        StreamingRawDataset(str(root), cache_dir=tmp_path / "c2", indexer=NotAList())
    with pytest.raises(ConfigurationError, match="indexer="):
        StreamingRawDataset(str(root), cache_dir=tmp_path / "c3", indexer="all")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_depth"):
        FileIndexer(max_depth=0)


def test_file_indexer_subclass_filters_with_should_include_file(
    folder: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, files = folder

    class EvenOnly(FileIndexer):  # LitData's override point
        def _should_include_file(self, file_path: str) -> bool:
            return super()._should_include_file(file_path) and int(file_path[-7:-4]) % 2 == 0

    ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", indexer=EvenOnly())
    assert [f.path for f in ds.files] == sorted(p for p in files if "/b/" in p)


def test_the_list_is_kept_next_to_the_data_and_reused(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = folder
    StreamingRawDataset(str(root), cache_dir=tmp_path / "first")
    kept = root / "index.json.zstd"
    assert [f.path for f in decode_index(kept.read_bytes(), str(kept))] == sorted(files)
    (root / "a" / "late.bin").write_bytes(b"late")
    # another cache (another machine): the kept list is used, so the late file is not seen
    other = StreamingRawDataset(str(root), cache_dir=tmp_path / "second")
    assert len(other) == N
    assert (index_cache_dir(tmp_path / "second", str(root)) / "index.json.zstd").is_file()
    fresh = StreamingRawDataset(str(root), cache_dir=tmp_path / "third", recompute_index=True)
    assert len(fresh) == N + 1
    assert len(decode_index(kept.read_bytes(), str(kept))) == N + 1  # the kept list was replaced


def test_a_refused_write_next_to_the_data_warns_and_keeps_the_local_list(
    folder: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, _ = folder
    (root / "index.json.zstd").mkdir()  # an (empty) folder where the list would go: the write fails
    with pytest.warns(UserWarning, match="could not keep its file list"):
        ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", recompute_index=True)
    assert len(ds) == N
    assert os.path.isfile(os.path.join(ds.cache_dir, "index.json.zstd"))


def test_item_type_path_yields_the_local_files(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = folder
    ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", cache_files=True, item_type="path")
    assert ds[0] == sorted(files)[0]
    assert list(ds) == sorted(files)  # a local folder is read in place: its own paths, nothing copied
    assert os.listdir(ds.cache_dir) == ["index.json.zstd"]
    as_bytes = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", cache_files=True)
    assert as_bytes[3] == files[sorted(files)[3]]


@pytest.mark.litdata
def test_indexers_and_paths_match_litdata(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    """LitData 0.2.76 and litstream, the same indexer arguments (and LitData's own FileIndexer): same items."""
    from litdata import StreamingRawDataset as LitDataRaw
    from litdata.raw.indexer import FileIndexer as LitDataIndexer

    root, files = folder
    (root / "b" / "note.txt").write_text("not a .bin")
    theirs = LitDataRaw(str(root), cache_dir=str(tmp_path / "l"), indexer=LitDataIndexer(extensions=[".BIN"]))
    for indexer in (FileIndexer(extensions=[".BIN"]), LitDataIndexer(extensions=[".BIN"])):
        ours = StreamingRawDataset(
            str(root), cache_dir=tmp_path / f"o{id(indexer)}", indexer=indexer, recompute_index=True
        )
        assert len(ours) == len(theirs) == N
        assert sorted(f.path for f in ours.files) == sorted(f.path for f in theirs.files) == sorted(files)
    by_path = {f.path: i for i, f in enumerate(ours.files)}
    assert [ours[by_path[f.path]] for f in theirs.files] == [theirs[i] for i in range(N)]
    # item_type="path": LitData copies local files into its cache, litstream reads them in place; same bytes
    their_paths = LitDataRaw(str(root), cache_dir=str(tmp_path / "lp"), cache_files=True, item_type="path")
    our_paths = StreamingRawDataset(str(root), cache_dir=tmp_path / "op", cache_files=True, item_type="path")
    assert len(their_paths) == len(our_paths)
    theirs_read = sorted(Path(their_paths[i]).read_bytes() for i in range(len(their_paths)))
    assert sorted(Path(p).read_bytes() for p in our_paths) == theirs_read
