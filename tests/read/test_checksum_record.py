"""A local dataset read in place is hashed once, not by every new process: a record of each intact chunk file
(device, inode, size, modification and status-change times, the recorded digest) goes into the cache root,
and a later process trusts a file that is exactly so. A byte flipped afterwards, even with the modification
time put back, changes the status-change time, so the next process checks the file again and raises.
Each read runs in a fresh process (``run_clean``), as a new training job would.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from clean_process import CleanProcessError, run_clean
from litstream import StreamingDataset, optimize

N = 30


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"value {i}"}


def _read(path: str, how: str) -> list[int]:
    ds = StreamingDataset(path)
    if how == "item":
        return [ds[i]["i"] for i in range(len(ds))]
    return [s["i"] for s in ds]


def _records() -> list[str]:
    root = os.path.join(os.environ["LITSTREAM_CACHE_DIR"], "verified")
    return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files)


@pytest.mark.parametrize("how", ["iterate", "item"])
def test_an_intact_chunk_is_recorded_and_a_later_flip_is_still_caught(tmp_path: Path, how: str) -> None:
    optimize(sample, range(N), str(tmp_path / "ds"), chunk_size=10, num_workers=1, verbose=False)
    assert run_clean(_read, str(tmp_path / "ds"), how) == list(range(N))
    records = _records()
    assert len(records) == 3  # one per chunk file
    name = "chunk-0-1.bin"
    stat = os.stat(tmp_path / "ds" / name)
    expected = f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ctime_ns} xxh3:"
    assert any(Path(r).read_text().startswith(expected) for r in records)
    assert run_clean(_read, str(tmp_path / "ds"), how) == list(range(N))  # a second process: same records
    assert _records() == records

    # flip one payload byte in place and put the modification time back (what a careful forger would do)
    path = tmp_path / "ds" / name
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0x01]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == stat.st_mtime_ns
    with pytest.raises(CleanProcessError, match=rf"ChecksumError: chunk {name} "):
        run_clean(_read, str(tmp_path / "ds"), how)
