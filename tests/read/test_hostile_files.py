"""Hostile files on disk: links out of a dataset and special files end in a litstream error naming the file.

Every layout of ``hostile.HOSTILE_LAYOUTS`` is read through every read path. A link leads to a VALID copy
of the file it replaces, so a reader that followed it would serve samples; a FIFO would block a reader
that opened it for reading (pytest-timeout turns a hang into a failure); a device would never end. The
audit hook checks that no file outside the dataset (and its cache) was opened.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any, Literal

import anyio
import pytest

from hostile import HOSTILE_LAYOUTS, hostile_layout, hostile_raw_folder, opened_files, outside, write_dataset
from litstream import LitstreamError, LocalFileStore, StorageError, StreamingDataset, StreamingRawDataset, astream
from litstream.storage._safe_files import UnsafeFileError

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(60)


async def _astream(ds: Any) -> list[Any]:
    async with astream(ds) as samples:
        return [s async for s in samples]


def _read(ds: Path, path: str) -> Any:
    if path == "iterate":
        return [s for s in StreamingDataset(str(ds))]
    if path == "getitem":
        return StreamingDataset(str(ds))[1]
    if path == "len":
        return len(StreamingDataset(str(ds)))
    return anyio.run(_astream, ds)


@pytest.mark.parametrize("layout", HOSTILE_LAYOUTS)
@pytest.mark.parametrize("path", ["iterate", "getitem", "astream"])
def test_hostile_layouts_end_in_a_litstream_error_naming_the_file(tmp_path: Path, layout: str, path: str) -> None:
    ds, name = hostile_layout(tmp_path, layout)
    with opened_files() as opened, pytest.raises(LitstreamError) as info:
        _read(ds, path)
    assert name in str(info.value)
    assert outside(opened, ds) == []


@pytest.mark.parametrize("layout", ["index_links_out", "index_is_fifo"])
def test_len_refuses_a_hostile_index(tmp_path: Path, layout: str) -> None:
    ds, name = hostile_layout(tmp_path, layout)
    with pytest.raises(StorageError, match=r"not a regular file|outside the dataset directory") as info:
        _read(ds, "len")
    assert name in str(info.value)


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("chunk_links_out", "outside the dataset directory"),
        ("folder_links_out", "outside the dataset directory"),
        ("chunk_is_fifo", "is a FIFO"),
        ("chunk_is_socket", "is a socket"),
        ("chunk_is_directory", "is a directory"),
    ],
)
def test_the_message_says_what_the_file_is_and_how_to_fix_it(tmp_path: Path, layout: str, message: str) -> None:
    ds, name = hostile_layout(tmp_path, layout)
    with pytest.raises(UnsafeFileError, match=message) as info:
        _read(ds, "iterate")
    assert isinstance(info.value, StorageError)
    assert name in str(info.value)


def test_links_inside_the_dataset_are_followed(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    write_dataset(ds, [{"i": i} for i in range(6)], chunk_size=3)
    (ds / "store").mkdir()
    shutil.move(ds / "chunk-0-1.bin", ds / "store" / "chunk-0-1.bin")
    (ds / "chunk-0-1.bin").symlink_to("store/chunk-0-1.bin")  # relative, inside the dataset
    assert [s["i"] for s in StreamingDataset(str(ds))] == [0, 1, 2, 3, 4, 5]
    assert StreamingDataset(str(ds))[4] == {"i": 4}


@pytest.mark.parametrize("layout", ["chunk_links_out", "folder_links_out"])
def test_follow_symlinks_is_an_explicit_opt_in(tmp_path: Path, layout: str) -> None:
    ds, _ = hostile_layout(tmp_path, layout)

    async def read(store: LocalFileStore) -> list[Any]:
        return [s["i"] async for s in astream(store)]

    assert anyio.run(read, LocalFileStore(ds, follow_symlinks=True)) == [0, 1, 2, 3, 4, 5]
    assert [s["i"] for s in StreamingDataset(LocalFileStore(ds, follow_symlinks=True))] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(UnsafeFileError):
        anyio.run(read, LocalFileStore(ds))
    with pytest.raises(UnsafeFileError):
        [s for s in StreamingDataset(LocalFileStore(ds))]


def test_follow_symlinks_still_refuses_special_files(tmp_path: Path) -> None:
    ds, _name = hostile_layout(tmp_path, "chunk_links_to_device")

    async def read() -> list[Any]:
        return [s async for s in astream(LocalFileStore(ds, follow_symlinks=True))]

    with pytest.raises(UnsafeFileError, match="character device"):
        anyio.run(read)


def test_follow_symlinks_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(LitstreamError, match="follow_symlinks must be True or False"):
        LocalFileStore(tmp_path, follow_symlinks="yes")  # type: ignore[arg-type]


def _raw(folder: Path, tmp_path: Path, item_type: Literal["bytes", "path"]) -> StreamingRawDataset:
    return StreamingRawDataset(
        str(folder), cache_dir=str(tmp_path / "cache"), item_type=item_type, cache_files=item_type == "path"
    )


@pytest.mark.parametrize("layout", ["link_out", "fifo", "socket"])
@pytest.mark.parametrize("item_type", ["bytes", "path"])
def test_raw_datasets_refuse_hostile_files(tmp_path: Path, layout: str, item_type: Literal["bytes", "path"]) -> None:
    folder, name = hostile_raw_folder(tmp_path, layout)
    ds = _raw(folder, tmp_path, item_type)
    with opened_files() as opened, pytest.raises(UnsafeFileError) as info:
        [ds[i] for i in range(len(ds))]
    assert name in str(info.value)
    assert outside(opened, folder, tmp_path / "cache") == []
    assert ds[0] in (b"hello", str(folder / "a.txt"))  # the good file still reads


@pytest.mark.parametrize("item_type", ["bytes", "path"])
def test_raw_datasets_do_not_descend_into_linked_folders(tmp_path: Path, item_type: Literal["bytes", "path"]) -> None:
    folder, _ = hostile_raw_folder(tmp_path, "folder_link_out")
    ds = _raw(folder, tmp_path, item_type)
    with opened_files() as opened:
        got = [ds[i] for i in range(len(ds))]
    assert got in ([b"hello"], [str(folder / "a.txt")])
    assert outside(opened, folder, tmp_path / "cache") == []


def _sample(i: int) -> dict[str, int]:
    return {"i": i}


@pytest.mark.parametrize("path", ["iterate", "getitem"])
def test_a_fifo_chunk_of_a_dataset_with_checksums_is_refused_not_hashed(tmp_path: Path, path: str) -> None:
    """Checked chunks are hashed as files first: the hash must not open a FIFO either."""
    from litstream import optimize

    ds = tmp_path / "ds"
    optimize(_sample, list(range(6)), output_dir=str(ds), chunk_size=3, num_workers=1, checksum="sha256")
    (ds / "chunk-0-0.bin").unlink()
    os.mkfifo(ds / "chunk-0-0.bin")
    with pytest.raises(UnsafeFileError, match="is a FIFO") as info:
        _read(ds, path)
    assert str(ds / "chunk-0-0.bin") in str(info.value)
