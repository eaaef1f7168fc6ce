"""optimize(..., checksum=...): digests in index.json, verified by every read path; a flipped byte is caught."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from litstream import ConfigurationError, FormatError, StreamingDataset, astream, optimize
from litstream.format._checksum import CHECKSUM_KEY, chunk_digest

if TYPE_CHECKING:
    from pathlib import Path

N = 40


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"sample number {i}"}


def _write(out: Path, *, compression: str | None = None, checksum: str | None = "sha256") -> list[dict[str, Any]]:
    optimize(
        fn=sample,
        inputs=range(N),
        output_dir=out,
        chunk_size=10,
        num_workers=2,
        verbose=False,
        compression=compression,
        checksum=checksum,
    )
    return list(json.loads((out / "index.json").read_text())["chunks"])


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("checksum", ["xxh3", "sha256", "blake2b"])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_index_records_the_digest_of_each_stored_file(tmp_path: Path, checksum: str, compression: str | None) -> None:
    chunks = _write(tmp_path, compression=compression, checksum=checksum)
    assert len(chunks) == 4
    for entry in chunks:
        stored = (tmp_path / entry["filename"]).read_bytes()
        assert entry[CHECKSUM_KEY] == chunk_digest([stored], checksum)
        assert entry[CHECKSUM_KEY].startswith(f"{checksum}:")
    assert sorted(s["i"] for s in StreamingDataset(tmp_path)) == list(range(N))


def test_without_checksum_the_index_is_unchanged(tmp_path: Path) -> None:
    chunks = _write(tmp_path, checksum=None)
    assert all(CHECKSUM_KEY not in entry for entry in chunks)


def test_bad_checksum_argument_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"checksum='md5' is not supported; .*'sha256', 'blake2b'"):
        optimize(fn=sample, inputs=range(3), output_dir=tmp_path, chunk_size=2, checksum="md5")
    assert not (tmp_path / "index.json").exists()


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_flipped_byte_in_a_local_chunk_is_detected(tmp_path: Path, compression: str | None) -> None:
    chunks = _write(tmp_path, compression=compression)
    name = chunks[2]["filename"]
    _flip(tmp_path / name, (tmp_path / name).stat().st_size - 3)  # inside the last item's bytes
    with pytest.raises(FormatError, match=rf"chunk {name} .* is corrupt: its sha256 is [0-9a-f]{{64}} but index.json"):
        list(StreamingDataset(tmp_path))
    with pytest.raises(FormatError, match=rf"chunk {name} .* is corrupt"):
        StreamingDataset(tmp_path)[25]  # random access checks the whole file once

    async def stream() -> list[int]:
        async with astream(tmp_path) as samples:
            return [s["i"] async for s in samples]

    with pytest.raises(FormatError, match=rf"chunk {name} .* is corrupt"):
        anyio.run(stream)
    intact = [c["filename"] for c in chunks if c["filename"] != name]
    assert intact  # the other chunks still read
    assert StreamingDataset(tmp_path)[0]["i"] == 0


def test_a_replaced_file_is_checked_again_in_the_same_process(tmp_path: Path) -> None:
    chunks = _write(tmp_path)
    ds = StreamingDataset(tmp_path)
    assert sorted(s["i"] for s in ds) == list(range(N))  # every file checked and found intact
    name = chunks[0]["filename"]
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    tmp = path.with_name(".replacement")
    tmp.write_bytes(bytes(data))
    tmp.replace(path)  # a new file (new inode), as a fresh download would be
    with pytest.raises(FormatError, match=rf"chunk {name} .* is corrupt"):
        list(StreamingDataset(tmp_path))


@pytest.mark.parametrize("value", ["sha256:abc", "md5:" + "0" * 32, 42, "sha256:" + "G" * 64])
def test_malformed_recorded_checksum_is_a_format_error(tmp_path: Path, value: object) -> None:
    _write(tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    index["chunks"][1][CHECKSUM_KEY] = value
    (tmp_path / "index.json").write_text(json.dumps(index, sort_keys=True))
    with pytest.raises(FormatError, match=rf"index.json records {CHECKSUM_KEY}=.* for chunk-"):
        list(StreamingDataset(tmp_path))
