"""optimize's default layout against LitData 0.2.76, both ways: with no ``chunk_format`` litstream writes dict
samples of JSON-like values as LitData's Arrow rows, where LitData's writer does (byte-identical chunks and
index), falls back to pytree where it does, and LitData reads every such dataset sample-identical.

Helpers and sample functions are ``test_arrow_compat``'s (the explicit ``chunk_format="arrow"`` tests).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from test_arrow_compat import CHUNK_SIZE, NUM, SCHEMAS, assert_rows, expected, litdata_items, mixed

import litstream
from clean_litdata import litdata_optimize
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from pathlib import Path

require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name='[^']*-litdata-copy\d+/:ResourceWarning")

MAGIC = b"LDARW01\0"


def scalars(i: int) -> dict[str, Any]:
    """Issue 30's scalar rows."""
    return {"i": i, "s": f"row-{i}", "x": i * 0.25, "ok": i % 2 == 0}


def switching(i: int) -> dict[str, Any]:
    """Lists of ints, then (from sample 400) of floats: LitData's fused type turns "json", Arrow stops."""
    return {"i": i, "s": str(i), "l": [i, i] if i < 400 else [i + 0.5]}


def arrow_chunks(directory: Path) -> list[bool]:
    files = sorted(p for p in directory.iterdir() if p.name.startswith("chunk-"))
    return [p.read_bytes()[-8:] == MAGIC for p in files]


@pytest.mark.parametrize("fn", [mixed, scalars], ids=["mixed", "scalars"])
def test_default_chunks_byte_identical_to_litdata(tmp_path: Path, fn: Any) -> None:
    litstream.optimize(  # no chunk_format: LitData's choice. checksum=None: the index LitData writes
        fn, list(range(NUM)), tmp_path / "ours", chunk_size=CHUNK_SIZE, num_workers=1, verbose=False, checksum=None,
    )  # fmt: skip
    litdata_optimize(
        fn=fn, inputs=list(range(NUM)), output_dir=str(tmp_path / "theirs"), chunk_size=CHUNK_SIZE, num_workers=1,
        verbose=False,
    )  # fmt: skip
    ours = json.loads((tmp_path / "ours" / "index.json").read_text())
    theirs = json.loads((tmp_path / "theirs" / "index.json").read_text())
    assert (ours["chunks"], ours["config"]) == (theirs["chunks"], theirs["config"])
    assert arrow_chunks(tmp_path / "ours") == [True, True, True]
    for chunk in theirs["chunks"]:
        name = chunk["filename"]
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes(), name


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_litdata_reads_the_default_layout(tmp_path: Path, name: str) -> None:
    fn = SCHEMAS[name]
    out = tmp_path / "ours"
    # two workers where their first samples share a data_format (LitData's merge rule, see test_arrow_compat)
    workers = 1 if name in ("mixed", "nones", "sparse") else 2
    litstream.optimize(fn, list(range(NUM)), out, chunk_size=CHUNK_SIZE, num_workers=workers, verbose=False)
    assert all(arrow_chunks(out))
    wanted = [expected(fn, i) for i in range(NUM)]
    ours = list(litstream.StreamingDataset(out, shuffle=False))
    assert_rows(sorted(ours, key=lambda s: s["i"]), wanted, "litstream reads ours")
    assert_rows(sorted(litdata_items(out), key=lambda s: s["i"]), wanted, "LitData reads ours")


def test_a_switch_to_pytree_mid_run_reads_the_same_in_both(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    litstream.optimize(switching, list(range(NUM)), ours, chunk_size=CHUNK_SIZE, num_workers=1, verbose=False)
    litdata_optimize(
        fn=switching, inputs=list(range(NUM)), output_dir=str(theirs), chunk_size=CHUNK_SIZE, num_workers=1,
        verbose=False,
    )  # fmt: skip
    # chunks of 300: the first was closed as Arrow rows before sample 400; the second and third are pytree
    assert arrow_chunks(ours) == [True, False, False]
    assert arrow_chunks(theirs) == [True, False, False]
    config = json.loads((ours / "index.json").read_text())["config"]
    assert config["types"]["l"] == json.loads((theirs / "index.json").read_text())["config"]["types"]["l"]
    wanted = [switching(i) for i in range(NUM)]
    assert_rows(list(litstream.StreamingDataset(ours, shuffle=False)), wanted, "litstream reads ours")
    assert_rows(litdata_items(ours), wanted, "LitData reads ours")
    assert_rows(list(litstream.StreamingDataset(theirs, shuffle=False)), wanted, "litstream reads theirs")


@pytest.mark.parametrize(("fmt", "compression"), [("pytree", None), ("pytree", "zstd"), (None, "zstd")])
def test_pytree_layouts_litdata_reads(tmp_path: Path, fmt: str | None, compression: str | None) -> None:
    """``chunk_format="pytree"``, and the default with compression, write the pytree layout LitData reads."""
    out = tmp_path / "ours"
    litstream.optimize(
        scalars, list(range(NUM)), out, chunk_size=CHUNK_SIZE, num_workers=1, verbose=False, chunk_format=fmt,
        compression=compression,
    )  # fmt: skip
    assert arrow_chunks(out) == [False, False, False]
    wanted = [scalars(i) for i in range(NUM)]
    assert_rows(litdata_items(out), wanted, "LitData reads ours")
    assert_rows(list(litstream.StreamingDataset(out, shuffle=False)), wanted, "litstream reads ours")
