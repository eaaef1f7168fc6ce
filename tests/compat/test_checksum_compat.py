"""LitData reads a dataset that litstream wrote (a checksum by default, or ``checksum=``): it ignores the extra key."""

from __future__ import annotations

import gc
import json
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from litstream.format._checksum import CHECKSUM_KEY
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name='[^']*-litdata-copy/:ResourceWarning")


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"item-{i}", "x": np.arange(i, i + 3, dtype=np.int64)}


@pytest.mark.parametrize("checksum", ["default", "sha256"])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_litdata_reads_a_checksummed_dataset(tmp_path: Path, compression: str | None, checksum: str) -> None:
    out = tmp_path / "ds"
    litstream.optimize(
        fn=_sample,
        inputs=range(25),
        output_dir=out,
        chunk_size=6,
        num_workers=1,
        verbose=False,
        compression=compression,
        **({} if checksum == "default" else {"checksum": checksum}),  # type: ignore[arg-type]
    )
    chunks = json.loads((out / "index.json").read_text())["chunks"]
    algorithm = "xxh3" if checksum == "default" else checksum  # a default litstream dataset carries xxh3
    assert all(entry[CHECKSUM_KEY].startswith(f"{algorithm}:") for entry in chunks)
    copy = tmp_path / "ds-litdata-copy"  # LitData's reader writes into a local dataset directory
    shutil.copytree(out, copy)
    ds = litdata.StreamingDataset(str(copy))
    theirs = list(ds)
    by_index = [ds[i] for i in (0, 13, 24)]
    del ds
    gc.collect()  # LitData's leaked chunk handles are closed here, inside this test
    assert [s["i"] for s in theirs] == list(range(25))
    assert [s["name"] for s in by_index] == ["item-0", "item-13", "item-24"]
    assert all(np.array_equal(s["x"], np.arange(s["i"], s["i"] + 3)) for s in theirs)
