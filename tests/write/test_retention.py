"""Retention and garbage collection of versions, the version log's parsers, and ``litstream versions`` / ``gc``."""

from __future__ import annotations

import itertools
import json
import math
import os
from typing import TYPE_CHECKING, Any

import pytest

import litstream
from litstream import ConfigurationError, FormatError, OutputLockedError, StreamingDataset
from litstream._cli._main import main
from litstream.format._version_log import MAX_RECORD_BYTES, Retention, VersionRecord, index_digest, record_key
from litstream.read.source._versions import VersionLog
from litstream.storage._store import LocalFileStore
from litstream.write._gc import expire_versions
from litstream.write._writer_lock import WriterLock

if TYPE_CHECKING:
    from pathlib import Path


def _commit(out: Path, inputs: list[int], mode: str | None) -> None:
    litstream.optimize(int, inputs, str(out), chunk_size=2, num_workers=1, mode=mode, verbose=False)


def _chunks(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("chunk-"))


def _five_versions(out: Path) -> None:
    _commit(out, [0, 1, 2], None)  # v1: chunk-0-0, chunk-0-1
    _commit(out, [3, 4], "append")  # v2: + chunk-0-2
    _commit(out, [5, 6], "overwrite")  # v3: chunk-0-3
    _commit(out, [7], "append")  # v4: + chunk-0-4
    _commit(out, [8, 9], "overwrite")  # v5: chunk-0-5


def test_the_default_keeps_superseded_versions_for_a_day(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    _five_versions(out)
    assert [v.number for v in litstream.list_versions(out)] == [1, 2, 3, 4, 5]
    assert _chunks(out) == [f"chunk-0-{n}.bin" for n in range(6)]
    versions = litstream.list_versions(out)
    assert all(math.isclose(v.expires_at or 0, (w.committed_at or 0) + 86400) for v, w in itertools.pairwise(versions))
    assert versions[-1].expires_at is None


def test_retention_removes_old_versions_and_only_their_files(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    _five_versions(out)
    (out / "README.txt").write_text("mine")
    log = VersionLog(LocalFileStore(str(out)))
    last = log.newest()
    assert last is not None
    with WriterLock(LocalFileStore(str(out)), "test").acquire():
        report = expire_versions(log, Retention(keep=2, grace=3600), now=last.committed_at + 10)
    assert report.expired == []  # every version was superseded less than an hour ago
    with WriterLock(LocalFileStore(str(out)), "test").acquire():
        report = expire_versions(log, Retention(keep=2, grace=0), now=last.committed_at + 10)
    assert (report.expired, report.kept) == ([1, 2, 3], [4, 5])
    assert _chunks(out) == ["chunk-0-3.bin", "chunk-0-4.bin", "chunk-0-5.bin"]  # v4 references chunk-0-3 and -4
    assert (out / "README.txt").read_text() == "mine"
    assert list(StreamingDataset(out, version=4)) == [5, 6, 7]
    with pytest.raises(litstream.VersionNotFoundError, match="kept versions, newest last: 4, 5"):
        len(StreamingDataset(out, version=3))


def test_collect_garbage_dry_run_save_and_the_lease(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    _five_versions(out)
    before = sorted(os.listdir(out))
    dry = litstream.collect_garbage(out, grace=0, dry_run=True)
    assert (dry.expired, dry.kept) == ([1, 2, 3, 4], [5])
    assert "chunk-0-0.bin" in dry.removed
    assert sorted(os.listdir(out)) == before  # nothing removed
    with WriterLock(LocalFileStore(str(out)), "optimize").acquire(), pytest.raises(OutputLockedError):
        litstream.collect_garbage(out, grace=0)
    report = litstream.collect_garbage(out, keep=2, grace=0, save=True)
    assert report.expired == [1, 2, 3]
    assert json.loads((out / ".litstream" / "retention.json").read_text()) == {"grace": 0, "keep": 2}
    _commit(out, [10], "overwrite")  # v6: the saved setting applies at every commit
    assert [v.number for v in litstream.list_versions(out)] == [5, 6]
    assert _chunks(out) == ["chunk-0-5.bin", "chunk-0-6.bin"]
    with pytest.raises(ConfigurationError, match="keep=0"):
        litstream.collect_garbage(out, keep=0)
    with pytest.raises(ConfigurationError, match="grace=-1"):
        litstream.collect_garbage(out, grace=-1)


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    _commit(out, [0, 1, 2], None)
    _commit(out, [3], "overwrite")
    assert main(["versions", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["version", "committed", "(UTC)", "writer", "samples", "chunks", "bytes"]
    assert lines[1].split()[0] == "1" and "expires" in lines[1]  # noqa: PT018
    assert lines[2].split()[0] == "2" and lines[2].endswith("latest")  # noqa: PT018
    assert main(["versions", str(out), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(v["number"], v["samples"], v["latest"]) for v in listed] == [(1, 3, False), (2, 1, True)]
    assert main(["gc", str(out), "--grace", "0", "--dry-run"]) == 0
    assert "would remove 4 files" in capsys.readouterr().out  # v1's record, index copy and two chunks
    assert main(["gc", str(out), "--grace", "0"]) == 0
    assert "versions expired: 1; kept: 2" in capsys.readouterr().out
    assert _chunks(out) == ["chunk-0-2.bin"]
    assert main(["versions", str(tmp_path / "nothing")]) == 1
    assert "holds no committed version" in capsys.readouterr().err


_GOOD: dict[str, Any] = {
    "number": 3, "committed_at": 1.5, "digest": index_digest(b"{}"), "operation": "optimize", "run_id": "ab",
    "host": "h", "pid": 7, "samples": 1, "chunks": 1, "bytes": 9,
}  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [
        {"number": 0},
        {"number": True},
        {"number": "3"},
        {"committed_at": float("nan")},
        {"committed_at": -1},
        {"digest": "sha256:00"},
        {"operation": "x" * 300},
        {"host": "a\nb"},
        {"pid": -1},
        {"samples": 2**63},
    ],
)
def test_a_record_that_is_not_ours_is_refused(change: dict[str, Any]) -> None:
    assert VersionRecord.from_json(json.dumps(_GOOD).encode(), "r").number == 3
    with pytest.raises(FormatError, match="r is not a litstream version record"):
        VersionRecord.from_json(json.dumps({**_GOOD, **change}).encode(), "r")


def test_stranger_files_in_the_log_are_refused_by_name(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    _commit(out, [0, 1], None)
    for junk in (b"[]", b"\xff", b"{", b" " * (MAX_RECORD_BYTES + 1)):
        (out / record_key(1)).write_bytes(junk)
        with pytest.raises(FormatError, match=r"0000000001\.json is not a litstream version record"):
            litstream.list_versions(out)
    (out / record_key(1)).write_bytes(json.dumps({**_GOOD, "number": 2}).encode())
    with pytest.raises(FormatError, match="is the record of version 2, not of 1"):
        litstream.list_versions(out)
    (out / ".litstream" / "retention.json").write_text('{"keep": 1}')
    with pytest.raises(FormatError, match="is not a litstream retention setting"):
        VersionLog(LocalFileStore(str(out))).retention()
