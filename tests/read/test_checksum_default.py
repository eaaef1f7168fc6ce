"""Integrity by default: every writer records an xxh3 checksum per chunk, and a corrupt chunk is never decoded.

A local dataset read in place raises ``ChecksumError`` naming the chunk; a dataset read through the chunk
cache (``Dir(path=cache, url=local_dir)``, LitData's "local remote") drops a corrupt cached copy and
downloads it again, in this process and in a new one; a corrupt source raises and leaves no copy behind.
The S3 cases are in ``tests/storage/test_checksum_cache.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import anyio
import pytest
import xxhash

from litstream import (
    AsyncUploader,
    ChecksumError,
    Dir,
    StreamingDataset,
    astream,
    merge_datasets,
    optimize,
)
from litstream.format._checksum import CHECKSUM_KEY, DEFAULT_CHECKSUM, chunk_digest

if TYPE_CHECKING:
    from pathlib import Path

N = 30


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"sample number {i}"}


def _write(out: Path, **kwargs: Any) -> list[dict[str, Any]]:
    optimize(fn=sample, inputs=range(N), output_dir=str(out), chunk_size=10, num_workers=1, verbose=False, **kwargs)
    return _chunks(out)


def _chunks(out: Path) -> list[dict[str, Any]]:
    return list(json.loads((out / "index.json").read_text())["chunks"])


def _flip_last_byte(path: Path) -> None:
    """Flip one bit of the last payload byte (the last item's text): decoded, it would be a wrong value."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def _cached(cache: Path, name: str) -> list[Path]:
    return [p for p in cache.rglob(name) if ".locks" not in p.parts]


def _assert_default_digests(out: Path, chunks: list[dict[str, Any]]) -> None:
    assert chunks
    for entry in chunks:
        stored = (out / entry["filename"]).read_bytes()
        assert entry[CHECKSUM_KEY] == f"xxh3:{xxhash.xxh3_64(stored).hexdigest()}"
        assert entry[CHECKSUM_KEY] == chunk_digest([stored], DEFAULT_CHECKSUM)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_optimize_records_an_xxh3_digest_by_default(tmp_path: Path, compression: str | None) -> None:
    _assert_default_digests(tmp_path, _write(tmp_path, compression=compression))


def test_checksum_none_records_none_and_explicit_values_still_work(tmp_path: Path) -> None:
    assert all(CHECKSUM_KEY not in e for e in _write(tmp_path / "none", checksum=None))
    for algorithm in ("xxh3", "sha256", "blake2b"):
        chunks = _write(tmp_path / algorithm, checksum=algorithm)
        assert all(e[CHECKSUM_KEY].startswith(f"{algorithm}:") for e in chunks)
        assert sorted(s["i"] for s in StreamingDataset(tmp_path / algorithm)) == list(range(N))


@pytest.mark.anyio
async def test_async_uploader_records_the_default_digest(tmp_path: Path) -> None:
    async with AsyncUploader(str(tmp_path), chunk_size=10) as up:
        for i in range(N):
            await up.add(sample(i))
    _assert_default_digests(tmp_path, _chunks(tmp_path))
    async with AsyncUploader(str(tmp_path / "off"), chunk_size=10, checksum=None) as up:
        await up.add(sample(0))
    assert all(CHECKSUM_KEY not in e for e in _chunks(tmp_path / "off"))


def test_merge_checks_recorded_digests_and_adds_the_default(tmp_path: Path) -> None:
    _write(tmp_path / "a", checksum=None)
    _write(tmp_path / "b", checksum="sha256")
    merge_datasets([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out"))
    chunks = _chunks(tmp_path / "out")
    assert [e[CHECKSUM_KEY].split(":")[0] for e in chunks] == ["xxh3"] * 3 + ["sha256"] * 3
    assert sorted(s["i"] for s in StreamingDataset(tmp_path / "out")) == sorted(list(range(N)) * 2)
    # a corrupt input chunk is refused by name, and nothing is left in the output
    name = _chunks(tmp_path / "b")[1]["filename"]
    _flip_last_byte(tmp_path / "b" / name)
    with pytest.raises(ChecksumError, match=rf"chunk {name} \(.*b/{name}\) is corrupt"):
        merge_datasets([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out2"))
    assert not [p for p in (tmp_path / "out2").rglob("*") if p.is_file()]


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_corrupt_local_chunk_read_in_place_raises_naming_it(tmp_path: Path, compression: str | None) -> None:
    name = _write(tmp_path, compression=compression)[1]["filename"]
    _flip_last_byte(tmp_path / name)
    with pytest.raises(ChecksumError, match=rf"chunk {name} \(.*{name}\) is corrupt: its xxh3 is [0-9a-f]{{16}}"):
        list(StreamingDataset(tmp_path))
    with pytest.raises(ChecksumError, match=rf"chunk {name} "):
        StreamingDataset(tmp_path)[N - 11]
    assert (tmp_path / name).exists()  # the dataset's own file is the user's: reported, never deleted


@pytest.mark.anyio
async def test_astream_of_a_corrupt_local_chunk_raises_naming_it(tmp_path: Path) -> None:
    name = _write(tmp_path)[2]["filename"]
    _flip_last_byte(tmp_path / name)
    seen: list[int] = []
    with pytest.raises(ChecksumError, match=rf"chunk {name} "):
        async with astream(tmp_path) as samples:
            seen.extend([s["i"] async for s in samples])
    assert not [i for i in seen if i >= 20]  # no item of the corrupt chunk was served


def _read_through_cache(source: Path, cache: Path) -> list[dict[str, Any]]:
    return list(StreamingDataset(Dir(path=str(cache), url=str(source))))


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_corrupt_cached_copy_is_dropped_and_downloaded_again(tmp_path: Path, compression: str | None) -> None:
    source, cache = tmp_path / "data", tmp_path / "cache"
    name = _write(source, compression=compression)[0]["filename"]
    assert sorted(s["i"] for s in _read_through_cache(source, cache)) == list(range(N))
    (copy,) = _cached(cache, name)
    _flip_last_byte(copy)
    assert copy.read_bytes() != (source / name).read_bytes()
    samples = _read_through_cache(source, cache)  # a new dataset object: the copy is checked, dropped, fetched
    assert sorted(samples, key=lambda s: s["i"]) == [sample(i) for i in range(N)]
    (copy,) = _cached(cache, name)
    assert copy.read_bytes() == (source / name).read_bytes()  # the corrupt copy is not left behind


_CHILD = """
import sys
from litstream import Dir, StreamingDataset
samples = list(StreamingDataset(Dir(path=sys.argv[2], url=sys.argv[1])))
print(sorted((s["i"], s["text"]) for s in samples) == [(i, f"sample number {i}") for i in range(int(sys.argv[3]))])
"""


def test_a_new_process_drops_a_corrupt_cached_copy(tmp_path: Path) -> None:
    source, cache = tmp_path / "data", tmp_path / "cache"
    name = _write(source)[2]["filename"]
    _read_through_cache(source, cache)
    (copy,) = _cached(cache, name)
    _flip_last_byte(copy)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(source), str(cache), str(N)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr[-2000:]
    (copy,) = _cached(cache, name)
    assert copy.read_bytes() == (source / name).read_bytes()


def test_a_corrupt_source_raises_naming_the_chunk_and_leaves_no_copy(tmp_path: Path) -> None:
    source, cache = tmp_path / "data", tmp_path / "cache"
    name = _write(source)[1]["filename"]
    _flip_last_byte(source / name)
    with pytest.raises(ChecksumError, match=rf"chunk {name} .* is corrupt: .*a fresh download from .*{name} differs"):
        _read_through_cache(source, cache)
    assert _cached(cache, name) == []  # the corrupt copy is not left behind
    with pytest.raises(ChecksumError, match=rf"chunk {name} "):  # and every later read says so again
        _read_through_cache(source, cache)


def test_litdata_ignores_nothing_it_needs(tmp_path: Path) -> None:
    """The checksum is one extra key per chunk entry; the keys LitData reads are unchanged."""
    plain = _write(tmp_path / "plain", checksum=None)
    default = _write(tmp_path / "default")
    assert [{k: v for k, v in e.items() if k != CHECKSUM_KEY} for e in default] == plain
    assert anyio.run(_count, tmp_path / "default") == N


async def _count(path: Path) -> int:
    async with astream(path) as samples:
        return sum([1 async for _ in samples])
