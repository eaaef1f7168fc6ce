"""Versions and LitData 0.2.76, both ways.

* LitData reads every version litstream commits (a first write, an overwrite, an append), as it was the latest:
  ``index.json`` and the chunk names are LitData's, the version log a hidden folder it never opens.
* litstream reads a dataset LitData wrote, and after LitData appends to a litstream dataset it records LitData's
  ``index.json`` as a version of its own (``adopted``) at its next commit, keeping every earlier one readable.
"""

from __future__ import annotations

import gc
import shutil
from typing import TYPE_CHECKING

import litstream
from clean_litdata import litdata_optimize
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")


def _litdata_reads(directory: Path, copy: Path) -> list[int]:
    shutil.copytree(directory, copy)  # LitData writes into and deletes from a local dataset directory
    ds = litdata.StreamingDataset(str(copy))
    samples = [int(s) for s in ds]
    del ds
    gc.collect()
    return samples


def _write(out: Path, inputs: list[int], mode: str | None) -> None:
    litstream.optimize(int, inputs, str(out), chunk_size=4, num_workers=2, mode=mode, verbose=False)


def test_litdata_reads_every_committed_version(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    _write(out, list(range(10)), None)
    assert _litdata_reads(out, tmp_path / "v1") == list(range(10))
    _write(out, list(range(100, 107)), "overwrite")
    assert _litdata_reads(out, tmp_path / "v2") == list(range(100, 107))
    _write(out, list(range(200, 205)), "append")
    assert _litdata_reads(out, tmp_path / "v3") == [*range(100, 107), *range(200, 205)]
    # every version stays readable by litstream, and the latest is what LitData read
    assert [v.number for v in litstream.list_versions(out)] == [1, 2, 3]
    assert list(litstream.StreamingDataset(out, version=1)) == list(range(10))
    assert list(litstream.StreamingDataset(out, version=2)) == list(range(100, 107))


def test_a_version_litdata_committed_is_adopted(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    _write(out, list(range(10)), None)
    litdata_optimize(
        fn=int, inputs=list(range(50, 56)), output_dir=str(out), chunk_size=4, num_workers=1, mode="append"
    )
    assert list(litstream.StreamingDataset(out)) == [*range(10), *range(50, 56)]
    versions = litstream.list_versions(out)
    assert [(v.number, v.latest) for v in versions] == [(1, False), (None, True)]  # LitData's, not recorded yet
    _write(out, list(range(70, 73)), "append")
    versions = litstream.list_versions(out)
    assert [(v.number, v.operation) for v in versions] == [(1, "optimize"), (2, "adopted"), (3, "optimize")]
    assert list(litstream.StreamingDataset(out, version=2)) == [*range(10), *range(50, 56)]
    assert list(litstream.StreamingDataset(out)) == [*range(10), *range(50, 56), *range(70, 73)]
