"""An index that claims more items than its chunks hold: memory is bounded by what the chunk holds.

``index.json`` is a stranger's: a chunk may claim 2^32 - 1 items. The read plan must not turn that number
into one id per item (``list(range(n))``, a permutation of ``n``: 32 GiB and more) before the chunk has
been read and its own header checked; the read ends in a litstream error naming the chunk. Each read runs
in a fresh process (``tests/claimed_reader.py``) under an address-space limit, so a regression fails with
``MemoryError`` instead of taking the machine down, and reports its peak resident memory growth.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from dataset_files import data_files
from hostile import write_dataset
from litstream.format._chunk import pack_chunk
from litstream.storage._resolver import store_for
from servers import hub_http_server

if TYPE_CHECKING:
    from servers import S3Server

TESTS = Path(__file__).resolve().parents[1]
HUGE = 2**32 - 1  # the most a chunk header can count
AS_LIMIT = 8 << 30


def _claiming(directory: Path, items: int, compression: str | None) -> None:
    """A valid 6-item dataset whose first chunk's entry claims ``items`` items (and the bytes they need)."""
    obj = write_dataset(directory, [{"i": i} for i in range(6)], chunk_size=3, compression=compression)
    obj["chunks"][0]["chunk_size"] = items
    obj["chunks"][0]["chunk_bytes"] = 4 + 4 * (items + 1) + 64  # consistent with the claim (schema-valid)
    (directory / "index.json").write_text(json.dumps(obj))


def _read(config: dict[str, Any]) -> dict[str, Any]:
    """Run ``tests/claimed_reader.py`` on ``config``; its JSON report."""
    done = subprocess.run(
        [sys.executable, str(TESTS / "claimed_reader.py"), json.dumps({"as_limit": AS_LIMIT, **config})],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _assert_refused(report: dict[str, Any]) -> None:
    assert report["kind"] in ("FormatError", "StorageError"), report
    assert "chunk-0-0" in report["message"]  # names the chunk
    assert report["growth"] < 256 * 2**20  # nothing near one id per claimed item


@pytest.mark.parametrize("shuffle", [False, True, "window"])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_local_claim_is_refused_naming_the_chunk(tmp_path: Path, compression: str | None, shuffle: object) -> None:
    _claiming(tmp_path / "ds", HUGE, compression)
    _assert_refused(_read({"url": str(tmp_path / "ds"), "shuffle": shuffle}))


@pytest.mark.parametrize("shuffle", [False, True, "window"])
def test_an_elastic_resume_over_a_claim_is_refused_naming_the_chunk(tmp_path: Path, shuffle: object) -> None:
    """A checkpoint of 3 workers resumed by one: the remainder is re-cut from the recorded counts, lazily."""
    _claiming(tmp_path / "ds", HUGE, None)
    _assert_refused(_read({"url": str(tmp_path / "ds"), "shuffle": shuffle, "resume_workers": 3}))


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_an_http_claim_is_refused_naming_the_chunk(tmp_path: Path, compression: str | None, shuffle: bool) -> None:
    _claiming(tmp_path / "hub" / "static" / "ds", HUGE, compression)
    with hub_http_server(tmp_path / "hub") as hub:
        report = _read({"url": f"{hub.url}/static/ds", "shuffle": shuffle, "cache_dir": str(tmp_path / "cache")})
    _assert_refused(report)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_an_s3_claim_is_refused_naming_the_chunk(
    tmp_path: Path, s3_server: S3Server, obstore_in_process: None, compression: str | None, shuffle: bool
) -> None:
    _claiming(tmp_path / "ds", HUGE, compression)
    url = f"s3://{s3_server.bucket}/claimed-{compression}-{shuffle}"
    store = store_for(url, s3_server.options())

    async def upload() -> None:
        for file in data_files(tmp_path / "ds"):
            await store.put(file.name, file.read_bytes())

    anyio.run(upload)
    report = _read(
        {"url": url, "shuffle": shuffle, "storage_options": s3_server.options(), "cache_dir": str(tmp_path / "c")}
    )
    _assert_refused(report)


@pytest.mark.parametrize("resume_workers", [0, 3])
@pytest.mark.parametrize("shuffle", [False, True, "window"])
def test_a_claim_of_2_26_items_in_a_256_mib_chunk_stays_within_the_documented_bound(
    tmp_path: Path, shuffle: object, resume_workers: int
) -> None:
    """docs/security.md: the plan never takes more than twice the recorded ``chunk_bytes``. The chunk file
    really is that large (sparse: it costs no disk), so the index passes every size check; only the chunk's
    own header (3 items) contradicts the claim."""
    items = 2**26
    ds = tmp_path / "ds"
    _claiming(ds, items, None)
    obj = json.loads((ds / "index.json").read_text())
    chunk_bytes = obj["chunks"][0]["chunk_bytes"]
    assert 256 * 2**20 < chunk_bytes < 257 * 2**20
    header = pack_chunk([b"a", b"b", b"c"])
    with open(ds / "chunk-0-0.bin", "wb") as f:
        f.write(header)
        f.truncate(chunk_bytes)  # sparse
    report = _read({"url": str(ds), "shuffle": shuffle, "resume_workers": resume_workers})
    assert report["claimed"] == items + 3
    assert report["kind"] == "FormatError"
    assert "chunk-0-0.bin holds 3 items but index.json records 67108864" in report["message"]
    assert report["growth"] < 2 * chunk_bytes  # the documented bound (before: 2.5-3 GB)
