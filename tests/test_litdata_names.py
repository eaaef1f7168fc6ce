"""The LitData 0.2.76 names litstream adds for drop-in use: completeness check, errors, pdb, NUMA plans."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import litstream
from litstream._torch._affinity import parse_id_list
from peer import require_peer


def test_is_complete_dataset_checks_for_index_json(tmp_path: Path) -> None:
    assert litstream.is_complete_dataset(str(tmp_path / "missing")) is False
    assert litstream.is_complete_dataset(str(tmp_path)) is False
    (tmp_path / "index.json").write_text("{}")
    assert litstream.is_complete_dataset(str(tmp_path)) is True
    assert litstream.is_complete_dataset(litstream.Dir(path=str(tmp_path))) is True


@pytest.mark.litdata
def test_is_complete_dataset_agrees_with_litdata(tmp_path: Path) -> None:
    litdata = require_peer("litdata")

    litstream.optimize(fn=lambda i: {"x": i}, inputs=list(range(5)), output_dir=str(tmp_path / "ds"), chunk_size=2)
    for path in (tmp_path / "ds", tmp_path / "nothing", tmp_path):
        assert litstream.is_complete_dataset(str(path)) == litdata.is_complete_dataset(str(path))
    assert litstream.is_complete_dataset(str(tmp_path / "ds")) is True


def test_chunk_wait_timeout_error_both_constructions() -> None:
    err = litstream.ChunkWaitTimeoutError("/cache/chunk-0-0.bin", 12.4)
    assert isinstance(err, FileNotFoundError)
    assert isinstance(err, litstream.StorageError)
    assert err.path == "/cache/chunk-0-0.bin"
    assert err.waited_s == 12.4
    assert "12s" in str(err)
    assert "/cache/chunk-0-0.bin" in str(err)
    plain = litstream.ChunkWaitTimeoutError("a message")
    assert str(plain) == "a message"
    assert plain.path is None
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is litstream.ChunkWaitTimeoutError
    assert str(again) == str(err)


def test_parse_id_list() -> None:
    assert parse_id_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_id_list("") == set()
    for bad in ("3-1", "a", "1-2-3", "-1"):
        with pytest.raises(ValueError, match="invalid CPU or NUMA node list entry"):
            parse_id_list(bad)


_HAS_NUMA = sys.platform == "linux" and Path("/sys/devices/system/node/node0/cpulist").exists()


@pytest.mark.skipif(not _HAS_NUMA, reason="needs Linux NUMA topology in /sys")
@pytest.mark.litdata
def test_numa_plan_matches_litdata_and_binds() -> None:
    litdata = require_peer("litdata")

    plan = litstream.get_numa_affinity(0, bind_memory=False)
    peer = litdata.get_numa_affinity(0, bind_memory=False)
    assert (plan.numa_node, plan.cpus, plan.bind_memory) == (peer.numa_node, peer.cpus, peer.bind_memory)
    assert set(plan.cpus) <= os.sched_getaffinity(0)
    assert pickle.loads(pickle.dumps(plan)) == plan
    saved = os.sched_getaffinity(0)
    one = litstream.NumaAffinity(0, plan.cpus[:1], bind_memory=False)
    try:
        one(0)  # the worker_init_fn form
        assert os.sched_getaffinity(0) == {plan.cpus[0]}
    finally:
        os.sched_setaffinity(0, saved)


def test_numa_plan_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="numa_node must be an int"):
        litstream.get_numa_affinity(-1)
    if _HAS_NUMA:
        with pytest.raises(ValueError, match="cpus must be a non-empty tuple"):
            litstream.NumaAffinity(0, (), bind_memory=False).bind()
        with pytest.raises(RuntimeError, match="NUMA node 100000"):
            litstream.get_numa_affinity(100000)


def test_breakpoint_prompts_in_a_forked_worker() -> None:
    script = textwrap.dedent(
        """
        import multiprocessing
        import litstream

        def work():
            value = 6 * 7
            litstream.breakpoint()
            print("after", value, flush=True)

        if __name__ == "__main__":
            proc = multiprocessing.get_context("fork").Process(target=work)
            proc.start()
            proc.join()
            print("exit", proc.exitcode, flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", script], input="p value + 1\nc\n", capture_output=True, text=True, timeout=120, env=env
    )
    assert "43" in done.stdout, done.stdout + done.stderr
    assert "after 42" in done.stdout
    assert "exit 0" in done.stdout
