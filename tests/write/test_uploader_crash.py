"""A process running AsyncUploader killed with SIGKILL loses only the samples added since its last
commit: index.json still describes fully uploaded chunks only (local disk and SeaweedFS)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import pytest
from write_targets import TARGETS, Target, make_target

from dataset_files import without_version_log
from litstream import AsyncUploader, complete_dataset

if TYPE_CHECKING:
    from pathlib import Path

CHILD = """
import json, sys
import anyio
from litstream import AsyncUploader

location, options = sys.argv[1], json.loads(sys.argv[2])

async def main() -> None:
    async with AsyncUploader(location, chunk_size=4, storage_options=options) as up:
        for i in range(10):
            await up.add({"i": i, "s": f"s{i}"})
        await up.flush()
        print("committed", flush=True)
        for i in range(10, 19):  # chunks 3 (10..13) and 4 (14..17) are closed; 18 stays buffered
            await up.add({"i": i, "s": f"s{i}"})
        while up.statistics().chunks_uploaded < 5:
            await anyio.sleep(0.01)
        print("uploaded", flush=True)
        await anyio.sleep_forever()

anyio.run(main, backend=sys.argv[3])
"""


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return make_target(request.param, request, tmp_path)


def test_sigkill_after_a_flush_keeps_exactly_the_committed_samples(target: Target) -> None:
    backend = "asyncio" if target.name == "local" else "trio"  # each child costs seconds (imports): one each
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, target.location, json.dumps(target.options), backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip(), proc.stdout.readline().strip()]
        if lines != ["committed", "uploaded"]:
            proc.kill()
            pytest.fail(f"child said {lines}; stderr:\n{proc.communicate()[1]}")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    index = json.loads(target.read("index.json"))
    assert [c["filename"] for c in index["chunks"]] == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin"]
    assert {"chunk-0-3.bin", "chunk-0-4.bin"} <= set(target.files())  # uploaded, never committed
    assert [s["i"] for s in target.dataset()] == list(range(10))

    # The dataset is complete as committed: complete_dataset leaves it alone.
    before = target.read("index.json")
    complete_dataset(target.location, storage_options=target.options)
    assert target.read("index.json") == before

    async def resume() -> None:
        async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
            await up.add({"i": 100, "s": "s100"})

    anyio.run(resume)
    index = json.loads(target.read("index.json"))
    # The next writer removed the killed process's uncommitted chunks first, then numbered its own after the rest.
    assert index["chunks"][-1]["filename"] == "chunk-0-3.bin"
    assert without_version_log(target.files()) == [*(f"chunk-0-{n}.bin" for n in range(4)), "index.json"]
    assert [s["i"] for s in target.dataset()] == [*range(10), 100]
