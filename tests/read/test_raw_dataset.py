"""StreamingRawDataset on a local folder: map-style, iterable, async, with torch's DataLoader, against LitData."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from litstream import ConfigurationError, FormatError, StreamingRawDataset
from litstream._torch._raw_dataset import FileIndexer, FileMetadata

if TYPE_CHECKING:
    from pathlib import Path

N = 40


def make_files(root: Path, n: int = N) -> dict[str, bytes]:
    """``n`` files of distinct sizes and contents in two sub-folders; returns path -> bytes."""
    out: dict[str, bytes] = {}
    for i in range(n):
        path = root / ("a" if i % 2 else "b") / f"f{i:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = bytes((i * 7 + k) % 256 for k in range(50 + 13 * i))
        path.write_bytes(data)
        out[str(path)] = data
    return out


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "data"
    return root, make_files(root)


def test_len_getitem_slices_and_iteration(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = folder
    ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache")
    assert len(ds) == N
    paths = [f.path for f in ds.files]
    assert paths == sorted(files)
    for i in (0, 7, N - 1):
        assert ds[i] == files[paths[i]]
    assert ds[3:9] == [files[p] for p in paths[3:9]]
    assert list(ds) == [files[p] for p in paths]
    with pytest.raises(IndexError):
        ds[N]
    with pytest.raises(IndexError):
        ds[-1]


def test_index_is_cached_and_reused(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, _files = folder
    cache = tmp_path / "cache"
    first = StreamingRawDataset(str(root), cache_dir=cache)
    (root / "a" / "late.bin").write_bytes(b"late")  # not seen: the cached index is reused
    assert len(StreamingRawDataset(str(root), cache_dir=cache)) == len(first) == N
    assert len(list(cache.rglob("index.json.zstd"))) == 1
    again = StreamingRawDataset(str(root), cache_dir=cache, recompute_index=True)
    assert len(again) == N + 1


def test_corrupt_cached_index_is_a_format_error(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, _ = folder
    cache = tmp_path / "cache"
    StreamingRawDataset(str(root), cache_dir=cache)
    (index,) = cache.rglob("index.json.zstd")
    index.write_bytes(b"not zstd")
    with pytest.raises(FormatError, match="recompute_index"):
        StreamingRawDataset(str(root), cache_dir=cache)


def test_setup_groups_transform_and_extensions(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = folder
    (root / "b" / "note.txt").write_text("skip me")

    class Pairs(StreamingRawDataset):
        def setup(self, files: list[FileMetadata]) -> list[list[FileMetadata]]:
            return [files[i : i + 2] for i in range(0, len(files), 2)]

    def sizes(group: list[bytes]) -> list[int]:  # a group's transform gets the list
        return [len(b) for b in group]

    ds = Pairs(str(root), cache_dir=tmp_path / "c", indexer=FileIndexer(extensions=[".BIN"]), transform=sizes)
    paths = sorted(files)
    assert len(ds) == N // 2
    assert ds[1] == [len(files[paths[2]]), len(files[paths[3]])]


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_yields_every_file_once(folder: tuple[Path, dict[str, bytes]], tmp_path: Path, workers: int) -> None:
    from torch.utils.data import DataLoader

    root, files = folder
    ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", max_prefetch=4)
    loader = DataLoader(ds, batch_size=3, num_workers=workers, shuffle=True, collate_fn=list)
    for _ in range(2):  # two epochs
        seen = [item for batch in loader for item in batch]
        assert sorted(seen) == sorted(files.values())


def _collect(ds: StreamingRawDataset, **kwargs: Any) -> Any:
    async def run() -> tuple[list[bytes], list[bytes]]:
        plain = [item async for item in ds.astream(**kwargs)]
        async with ds.astream(window=5, **kwargs) as items:
            managed = [item async for item in items]
        return plain, managed

    return run()


@pytest.mark.anyio
async def test_astream_yields_every_file_once(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = folder
    ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache", transform=bytes.upper)
    plain, managed = await _collect(ds)
    expected = [files[p].upper() for p in sorted(files)]
    assert plain == managed == expected
    shuffled, again = await _collect(ds, shuffle=True, epoch=3)
    assert shuffled == again != expected
    assert sorted(shuffled) == sorted(expected)
    stats = ds.statistics()
    assert stats.objects >= 4 * N
    assert stats.in_flight == 0
    assert stats.bytes >= 4 * sum(map(len, files.values()))


@pytest.mark.anyio
async def test_astream_leaving_early_cancels_cleanly(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = folder
    ds = StreamingRawDataset(str(root), cache_dir=tmp_path / "cache")
    async with ds.astream(window=4) as items:
        async for item in items:
            assert item == files[sorted(files)[0]]
            break
    assert ds.statistics().in_flight == 0


def test_bad_arguments_name_the_argument(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, _ = folder
    with pytest.raises(ConfigurationError, match="item_type"):
        StreamingRawDataset(str(root), item_type="text")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cache_files=True"):
        StreamingRawDataset(str(root), item_type="path")
    with pytest.raises(ConfigurationError, match="transform"):
        StreamingRawDataset(str(root), transform=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="no files"):
        StreamingRawDataset(str(tmp_path / "empty"), cache_dir=tmp_path / "c")
    with pytest.raises(ConfigurationError, match="hedge_delay"):
        StreamingRawDataset(str(root), hedge_delay="soon")  # type: ignore[arg-type]


def test_hostile_index_names_are_refused(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    from litstream.index._raw import encode_index, index_cache_dir

    root, _ = folder
    cache = tmp_path / "cache"
    target = index_cache_dir(cache, str(root)) / "index.json.zstd"
    target.parent.mkdir(parents=True)
    target.write_bytes(encode_index([FileMetadata(f"{root}/../secret", 3)], str(root)))
    with pytest.raises(FormatError, match="not a plain relative name"):
        StreamingRawDataset(str(root), cache_dir=cache)


@pytest.mark.litdata
def test_same_items_and_len_as_litdata(folder: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    """LitData 0.2.76 and litstream list the same files and read the same bytes; either reuses the other's index."""
    from litdata import StreamingRawDataset as LitDataRaw

    root, files = folder
    ours = StreamingRawDataset(str(root), cache_dir=tmp_path / "ours")  # lists first: sorted by path
    theirs = LitDataRaw(str(root), cache_dir=str(tmp_path / "litdata"), max_prefetch=0)
    assert len(ours) == len(theirs) == N
    assert sorted(f.path for f in theirs.files) == [f.path for f in ours.files]
    by_path = {f.path: i for i, f in enumerate(ours.files)}
    for i, meta in enumerate(theirs.files):
        assert theirs[i] == ours[by_path[meta.path]] == files[meta.path]
    # LitData leaves its index next to the data (and in its cache); litstream reuses it as is, so the
    # order, len and ds[i] are LitData's exactly.
    assert (root / "index.json.zstd").is_file()
    for cache in (tmp_path / "fresh", tmp_path / "litdata"):
        shared = StreamingRawDataset(str(root), cache_dir=cache)
        assert [f.path for f in shared.files] == [f.path for f in theirs.files]
        assert [shared[i] for i in range(N)] == [theirs[i] for i in range(N)]
        assert os.path.isfile(os.path.join(shared.cache_dir, "index.json.zstd"))
