"""Hard memory limits: a loader with 4 workers over chunks of tens of MB stays under a memory cap.

The cap is a child cgroup of this process's own (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``: the kernel
OOM-kills a process of the group that passes it), else ``RLIMIT_DATA`` set in the child process
(``tests/memory_cap.py`` picks; a failure's message names which). The
dataset's chunks are zstd-compressed (decompressed into private memory, so they cannot be reclaimed like a
mapped file's pages) and the reader asks for a deep prefetch (``max_pre_download=10``): without the budget
(``LITSTREAM_MAX_MEMORY=off``) the 4 workers hold about 1.4 GB and the run is killed (shown below); with
the budget learned from the limit, prefetch adapts and every sample comes exactly once.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from litstream import optimize
from litstream._core._errors import ConfigurationError
from litstream.read.engine._memory import MemoryLimit, check_max_memory, memory_limit, plan_read
from memory_cap import Cap, Unavailable, capped

MiB = 2**20
LIMIT = 1000 * MiB
SAMPLE = 2 * MiB  # bytes of one sample's array
SAMPLES = 12 * 4 * 12  # 12 chunks of 12 samples per worker

CHILD = """
import json, sys
import torch
from litstream import StreamingDataLoader, StreamingDataset

def main():
    directory, loader = sys.argv[1], sys.argv[2]
    ds = StreamingDataset(directory, max_pre_download=10)
    if loader == "StreamingDataLoader":
        batches = StreamingDataLoader(ds, batch_size=2, num_workers=4)
    else:
        ds.set_batch_size(2)
        batches = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=4)
    ids = []
    for batch in batches:
        assert batch["x"].shape[1] == {sample}
        ids.extend(int(i) for i in batch["i"])
        first = batch["x"][:, 0].tolist()
        assert first == [i % 251 for i in batch["i"].tolist()], first
    print(json.dumps(ids))

if __name__ == "__main__":
    main()
""".replace("{sample}", str(SAMPLE))


def _sample(i: int) -> dict[str, object]:
    return {"i": i, "x": np.full(SAMPLE, i % 251, dtype=np.uint8)}  # compresses to almost nothing on disk


@pytest.fixture(scope="module")
def cap() -> Cap:
    found = capped(LIMIT)
    if isinstance(found, Unavailable):
        pytest.skip(f"no way to cap memory on this machine: {found.reason}")
    return found


@pytest.fixture(scope="module")
def big_chunks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("memlimit") / "data"
    optimize(_sample, list(range(SAMPLES)), str(out), chunk_bytes=12 * SAMPLE + 4096, compression="zstd:1",
             num_workers=1)  # fmt: skip
    return out


def _run(cap: Cap, directory: Path, loader: str, setting: str | None, tmp_path: Path) -> tuple[list[int] | None, str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if k != "LITSTREAM_MAX_MEMORY"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"), *sys.path])
    if setting is not None:
        env["LITSTREAM_MAX_MEMORY"] = setting
    result = cap.run([sys.executable, str(script), str(directory), loader], env, timeout=240)
    if result.returncode != 0:
        failure = f"rc={result.returncode} oom_kills={result.oom_kills} peak={result.peak} under {cap.mechanism}"
        return None, f"{failure}\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.splitlines()[-1]), f"peak={result.peak} under {cap.mechanism}"


@pytest.mark.slow
@pytest.mark.parametrize("loader", ["StreamingDataLoader", "DataLoader"])
def test_four_workers_stay_under_the_limit(cap: Cap, big_chunks: Path, loader: str, tmp_path: Path) -> None:
    ids, report = _run(cap, big_chunks, loader, None, tmp_path)
    assert ids is not None, report
    assert sorted(ids) == list(range(SAMPLES)), report


@pytest.mark.slow
def test_without_the_budget_the_same_run_is_killed(cap: Cap, big_chunks: Path, tmp_path: Path) -> None:
    if not cap.mechanism.startswith("cgroup"):
        pytest.skip(
            f"{cap.mechanism}: RLIMIT_DATA binds each process alone and does not count shared memory, so four "
            "unbudgeted workers each fit under it; the run that fails without the budget needs a cgroup"
        )
    ids, report = _run(cap, big_chunks, "StreamingDataLoader", "off", tmp_path)
    assert ids is None, f"the unbudgeted run fit under {LIMIT} bytes: the test no longer shows the budget matters"
    assert "oom_kills=0" not in report, report  # the kernel killed a process of the group


@pytest.mark.slow
def test_a_chunk_that_cannot_fit_is_a_clear_error(big_chunks: Path, tmp_path: Path) -> None:
    from litstream import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(big_chunks, max_memory="60MB")
    with pytest.raises(ConfigurationError, match=r"memory limit: .*max_memory='60MB'.*fewer DataLoader workers"):
        next(iter(StreamingDataLoader(ds, batch_size=2, num_workers=2)))


# -- the budget's arithmetic and the limit's sources ------------------------------------------------------------


def test_the_plan_lowers_prefetch_until_the_buffers_fit() -> None:
    limit = MemoryLimit(800 * MiB, 400 * MiB, "test")
    asked = plan_read(limit, readers=1, chunk_bytes=10 * MiB, compressed=True, piece_size=None, max_pre_download=50)
    assert (asked.ahead, asked.handover) == (37, 1)  # (1 + 1 + 37) chunks + the compressed copy = 400 MiB
    assert asked.bytes == 40 * 10 * MiB
    shared = plan_read(limit, readers=4, chunk_bytes=10 * MiB, compressed=False, piece_size=8 * MiB,
                       max_pre_download=50)  # fmt: skip
    assert (shared.ahead, shared.download_bytes) == (6, 16 * MiB)  # 8 chunks + 2 pieces = 96 MiB <= 100 MiB
    loader = plan_read(limit, readers=4, chunk_bytes=20 * MiB, compressed=True, piece_size=None, max_pre_download=4,
                       batch_bytes=8 * MiB, prefetch_factor=2, fixed_prefetch=False)  # fmt: skip
    # pf=2 needs 3 chunks + copy (80) + 3 slots * 1.25 * 8 + 2 * 8 (46) > 100; pf=1: 80 + 20 + 16 = 116 > 100;
    # without the hand-over buffer: 60 + 46 = 106 > 100, then pf=1: 60 + 36 = 96
    assert (loader.ahead, loader.handover, loader.prefetch_factor, loader.bytes) == (1, 0, 1, 96 * MiB)


def test_a_share_too_small_for_one_chunk_names_the_limit_and_the_fixes() -> None:
    limit = MemoryLimit(100 * MiB, 50 * MiB, "the cgroup v1 memory.limit_in_bytes of /x (104857600 bytes)")
    with pytest.raises(ConfigurationError) as info:
        plan_read(limit, readers=4, chunk_bytes=20 * MiB, compressed=False, piece_size=None, max_pre_download=2)
    message = str(info.value)
    assert "4 readers may use only 13107200 bytes" in message
    assert "/x (104857600 bytes)" in message
    assert "re-optimize with a smaller chunk_bytes" in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [("800MB", 800_000_000), (5_000_000, 5_000_000), ("off", None), (False, None)],
)
def test_the_explicit_setting(value: object, expected: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITSTREAM_MAX_MEMORY", raising=False)
    found = memory_limit(check_max_memory(value))
    assert (found.budget if found else None) == expected
    monkeypatch.setenv("LITSTREAM_MAX_MEMORY", "off" if value is False else str(value))
    from_env = memory_limit(None)
    assert (from_env.budget if from_env else None) == expected


@pytest.mark.parametrize("value", [True, "lots", -3, 0, 1.5])
def test_a_bad_setting_is_refused(value: object, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="max_memory"):
        check_max_memory(value)
    monkeypatch.setenv("LITSTREAM_MAX_MEMORY", str(value))
    with pytest.raises(ConfigurationError, match="LITSTREAM_MAX_MEMORY"):
        memory_limit(None)


def test_the_limit_of_a_capped_child_is_detected(cap: Cap, tmp_path: Path) -> None:
    code = (
        "import json; from litstream.read.engine._memory import memory_limit; m = memory_limit('auto'); "
        "print(json.dumps([m.limit, m.budget, m.source, m.shared]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITSTREAM_MAX_MEMORY"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"), *sys.path])
    result = cap.run([sys.executable, "-c", code], env, timeout=120)
    assert result.returncode == 0, result.stderr
    limit, budget, source, shared = json.loads(result.stdout)
    assert limit == LIMIT
    if cap.mechanism.startswith("cgroup"):
        assert (budget, shared) == (LIMIT // 2, True)
        assert "memory.max" in source or "memory.limit_in_bytes" in source
    else:
        assert "RLIMIT_DATA" in source
        assert shared is False
        assert 0 < budget < LIMIT // 2
