"""Reading Arrow chunks through every face without the LitData peer: chunks written by
``optimize(..., chunk_format="arrow")``, datasets mixing Arrow and pytree chunks, S3, and an index whose
pytree ``data_format`` litstream cannot set up (the LitData side is tests/compat/test_arrow_compat.py)."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

import litstream
from dataset_files import data_files
from litstream import FormatError
from litstream.format.arrow._write import pack_arrow_chunk

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

N = 90


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "s": f"row {i}", "l": [i] * (i % 3), "n": None if i % 4 else i / 2, "d": {"k": i % 5}}


def plain(i: int) -> dict[str, Any]:
    return {"i": i, "s": f"row {i}"}


def _keep(batch: list[Any]) -> list[Any]:
    return batch


@pytest.fixture(scope="module", params=[None, "zstd"], ids=["raw", "zstd"])
def arrow_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("arrow") / "data"
    litstream.optimize(
        sample, list(range(N)), out, chunk_size=20, compression=request.param, num_workers=1, verbose=False,
        chunk_format="arrow",
    )  # fmt: skip
    return out


def test_index_and_files(arrow_dir: Path) -> None:
    index = json.loads((arrow_dir / "index.json").read_text())
    assert [c["chunk_size"] for c in index["chunks"]] == [20, 20, 20, 20, 10]
    assert all(c["filename"].endswith(".bin") and ".zstd" not in c["filename"] for c in index["chunks"])
    assert index["config"]["compression"] is None
    assert index["config"]["types"]["n"] == {"type": "float", "optional": True}
    for chunk in index["chunks"]:
        data = (arrow_dir / chunk["filename"]).read_bytes()
        assert len(data) == chunk["chunk_bytes"]
        assert data.endswith(b"LDARW01\0")


def test_every_face(arrow_dir: Path) -> None:
    wanted = [sample(i) for i in range(N)]
    ds = litstream.StreamingDataset(arrow_dir)
    assert list(ds) == wanted
    assert [ds[i] for i in reversed(range(N))] == wanted[::-1]
    shuffled = list(litstream.StreamingDataset(arrow_dir, shuffle="window", shuffle_window=3, seed=1))
    assert shuffled != wanted
    assert sorted(shuffled, key=lambda s: s["i"]) == wanted
    loader = litstream.StreamingDataLoader(ds, batch_size=7, num_workers=2, collate_fn=_keep)
    assert sorted((s for b in loader for s in b), key=lambda s: s["i"]) == wanted


@pytest.mark.anyio
async def test_astream(arrow_dir: Path, anyio_backend: str) -> None:
    async with litstream.astream(arrow_dir, shuffle=True, seed=5) as samples:
        got = [s async for s in samples]
    assert sorted(got, key=lambda s: s["i"]) == [sample(i) for i in range(N)]


def test_resume_mid_chunk(arrow_dir: Path) -> None:
    ds = litstream.StreamingDataset(arrow_dir)
    loader = litstream.StreamingDataLoader(ds, batch_size=6, collate_fn=_keep)
    seen: list[Any] = []
    for batch in loader:
        seen += batch
        if len(seen) == 30:
            break
    state = loader.state_dict()
    again = litstream.StreamingDataLoader(litstream.StreamingDataset(arrow_dir), batch_size=6, collate_fn=_keep)
    again.load_state_dict(state)
    rest = [s for b in again for s in b]
    assert seen + rest == [sample(i) for i in range(N)]


def test_arrow_and_pytree_chunks_in_one_dataset(tmp_path: Path) -> None:
    """LitData decides per chunk; so does the reader (a window shuffle mixes both kinds in one work)."""
    out = tmp_path / "mixed"
    litstream.optimize(plain, list(range(N)), out, chunk_size=30, num_workers=1, verbose=False)
    index = json.loads((out / "index.json").read_text())
    second = index["chunks"][1]
    arrow = pack_arrow_chunk([plain(i) for i in range(30, 60)], None)
    (out / second["filename"]).write_bytes(arrow)
    second["chunk_bytes"] = len(arrow)
    del second["litstream_checksum"]  # the digest of the file replaced above
    (out / "index.json").write_text(json.dumps(index, sort_keys=True))
    wanted = [plain(i) for i in range(N)]
    ds = litstream.StreamingDataset(out)
    assert list(ds) == wanted
    assert [ds[i] for i in range(N)] == wanted
    for shuffle in (True, "window"):
        got = list(litstream.StreamingDataset(out, shuffle=shuffle, shuffle_window=3, seed=2))
        assert sorted(got, key=lambda s: s["i"]) == wanted


def test_unknown_pytree_format_with_types_still_reads_arrow(tmp_path: Path, arrow_dir: Path) -> None:
    """LitData records a pytree ``data_format`` for Arrow chunks that its reader never uses; one that
    litstream lacks must not stop the Arrow rows from being read (it would for a plain chunk)."""
    out = tmp_path / "copy"
    out.mkdir()
    for path in data_files(arrow_dir):
        (out / path.name).write_bytes(path.read_bytes())
    index = json.loads((out / "index.json").read_text())
    index["config"]["data_format"] = ["made_up_serializer"] * len(index["config"]["data_format"])
    (out / "index.json").write_text(json.dumps(index, sort_keys=True))
    assert list(litstream.StreamingDataset(out)) == [sample(i) for i in range(N)]
    del index["config"]["types"]
    (out / "index.json").write_text(json.dumps(index, sort_keys=True))
    with pytest.raises(FormatError, match="made_up_serializer"):
        litstream.StreamingDataset(out)[0]


def test_s3_write_iterate_and_getitem(s3_server: S3Server, tmp_path: Path) -> None:
    """On a remote store ``ds[i]`` reads an item's span first; an Arrow chunk's is empty, so the reader
    fetches the chunk once and keeps it."""
    url = f"s3://{s3_server.bucket}/arrow-{uuid.uuid4().hex[:10]}"
    options = s3_server.options()
    litstream.optimize(
        sample, list(range(N)), url, chunk_size=25, compression="zstd", num_workers=1, verbose=False,
        storage_options=options, chunk_format="arrow",
    )  # fmt: skip
    wanted = [sample(i) for i in range(N)]
    ds = litstream.StreamingDataset(url, storage_options=options, cache_dir=str(tmp_path / "cache"))
    assert list(ds) == wanted
    fresh = litstream.StreamingDataset(url, storage_options=options)
    assert [fresh[i] for i in (89, 0, 26, 50, 51, 3)] == [wanted[i] for i in (89, 0, 26, 50, 51, 3)]


def test_writer_rejects_samples_arrow_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(litstream.WorkerError, match="is a int in one sample and a str in another"):
        litstream.optimize(
            lambda i: {"v": i if i < 3 else str(i)}, list(range(6)), tmp_path / "bad", chunk_size=2,
            num_workers=1, verbose=False, chunk_format="arrow",
        )  # fmt: skip
    with pytest.raises(litstream.ConfigurationError, match="chunk_format must be"):
        litstream.optimize(plain, [1], tmp_path / "x", chunk_size=2, verbose=False, chunk_format="feather")
    with pytest.raises(litstream.ConfigurationError, match="TokensLoader"):
        litstream.optimize(
            plain, [1], tmp_path / "y", chunk_size=2, verbose=False, chunk_format="arrow",
            item_loader=litstream.TokensLoader(),
        )  # fmt: skip


def test_chunk_bytes_counts_row_estimates(tmp_path: Path) -> None:
    out = tmp_path / "sized"
    # a row counts 8 for "i" plus len("row i"): 13 bytes for i < 10, 14 after; a chunk closes before
    # the row that would pass 100 bytes: rows 0-6 (91), 7-13 (95), 14-19 (84)
    litstream.optimize(plain, list(range(20)), out, chunk_bytes=100, num_workers=1, verbose=False, chunk_format="arrow")
    index = json.loads((out / "index.json").read_text())
    assert [c["chunk_size"] for c in index["chunks"]] == [7, 7, 6]
    assert list(litstream.StreamingDataset(out)) == [plain(i) for i in range(20)]


_SHARED: dict[str, Any] = {"i": 0, "l": []}


def shared(i: int) -> dict[str, Any]:
    """Returns one module-level dict, mutated on every call."""
    _SHARED["i"] = i
    _SHARED["l"].append(i)
    return _SHARED


def test_samples_are_kept_as_fn_returned_them(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    litstream.optimize(shared, list(range(7)), out, chunk_size=5, num_workers=1, verbose=False, chunk_format="arrow")
    assert list(litstream.StreamingDataset(out)) == [{"i": i, "l": list(range(i + 1))} for i in range(7)]
