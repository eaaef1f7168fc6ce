"""Multi-node optimize on one local directory: each "node" is a call with its own ``DATA_OPTIMIZER_*``
values (node 0 first; the last node merges), with two worker processes per node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from dataset_files import without_version_log
from litstream import OutputNotEmptyError, StorageError, StreamingDataset, optimize
from litstream.write.run._env import OptimizerEnv, optimizer_env

if TYPE_CHECKING:
    from pathlib import Path


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"n{i}"}


def run_node(monkeypatch: pytest.MonkeyPatch, rank: int, num_nodes: int, out: Path, n: int, **kwargs: Any) -> None:
    monkeypatch.setenv("DATA_OPTIMIZER_NUM_NODES", str(num_nodes))
    monkeypatch.setenv("DATA_OPTIMIZER_NODE_RANK", str(rank))
    kwargs.setdefault("chunk_size", 3)
    kwargs.setdefault("num_workers", 2)
    optimize(sample, list(range(n)), out, verbose=False, **kwargs)


def test_optimizer_env_defaults_and_values(monkeypatch: pytest.MonkeyPatch) -> None:
    assert optimizer_env() == OptimizerEnv(num_nodes=1, node_rank=0, timeout=300.0)
    monkeypatch.setenv("DATA_OPTIMIZER_NUM_NODES", "0")  # LitData: not inside a launched job
    assert optimizer_env().num_nodes == 1
    monkeypatch.setenv("DATA_OPTIMIZER_NUM_NODES", "4")
    monkeypatch.setenv("DATA_OPTIMIZER_NODE_RANK", "3")
    monkeypatch.setenv("DATA_OPTIMIZER_TIMEOUT", "2.5")
    assert optimizer_env() == OptimizerEnv(num_nodes=4, node_rank=3, timeout=2.5)
    assert optimizer_env().is_last_node


def test_three_nodes_write_one_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ds"
    run_node(monkeypatch, 0, 3, out, 40)
    # Node 0 merged its two workers into 0-index.json and left the final merge to the last node.
    assert sorted(p.name for p in out.iterdir() if "index" in p.name) == ["0-index.json"]
    run_node(monkeypatch, 1, 3, out, 40)
    run_node(monkeypatch, 2, 3, out, 40)
    index = json.loads((out / "index.json").read_text())
    # 40 inputs over 6 global ranks: [6, 6, 7, 7, 7, 7]; node k's workers are ranks 2k and 2k+1.
    names = [c["filename"] for c in index["chunks"]]
    assert names == [f"chunk-{r}-{n}.bin" for r in range(6) for n in range(2 if r < 2 else 3)]
    assert [s["i"] for s in StreamingDataset(out)] == list(range(40))
    assert sorted(p.name for p in out.iterdir() if "index" in p.name) == ["index.json"]


def test_two_nodes_with_checkpoints_clean_up_after_themselves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ds"
    run_node(monkeypatch, 0, 2, out, 12, use_checkpoint=True)
    # Node 0 is done: its checkpoints are gone, its share is in 0-index.json; its writer lease stays, marked
    # finished, until the last node has committed (so no other run can write into the output meanwhile).
    left = sorted(p.name for p in out.iterdir() if not p.name.startswith("chunk-"))
    assert left == [".litstream-writer-0.json", "0-index.json"]
    assert json.loads((out / ".litstream-writer-0.json").read_text())["state"] == "finished"
    run_node(monkeypatch, 1, 2, out, 12, use_checkpoint=True)
    assert [s["i"] for s in StreamingDataset(out)] == list(range(12))
    left = sorted(without_version_log(p.name for p in out.iterdir() if not p.name.startswith("chunk-")))
    assert left == ["index.json"]


def test_append_on_two_nodes_lists_the_old_chunks_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ds"
    for rank in range(2):
        run_node(monkeypatch, rank, 2, out, 8, chunk_size=2)
    for rank in range(2):
        run_node(monkeypatch, rank, 2, out, 8, chunk_size=2, mode="append")
    assert [s["i"] for s in StreamingDataset(out)] == [*range(8), *range(8)]
    names = [c["filename"] for c in json.loads((out / "index.json").read_text())["chunks"]]
    assert names == [f"chunk-{r}-{n}" + ".bin" for r in range(4) for n in (0,)] + [
        f"chunk-{r}-{n}.bin" for r in range(4) for n in (1,)
    ]


def test_a_node_refuses_its_own_leftovers_but_not_other_nodes_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "ds"
    run_node(monkeypatch, 0, 2, out, 10)
    with pytest.raises(OutputNotEmptyError, match="is not empty"):
        run_node(monkeypatch, 0, 2, out, 10)
    run_node(monkeypatch, 1, 2, out, 10)  # node 0's files are expected there
    assert [s["i"] for s in StreamingDataset(out)] == list(range(10))


def test_the_last_node_gives_up_after_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_OPTIMIZER_TIMEOUT", "0.5")
    out = tmp_path / "ds"
    with pytest.raises(StorageError, match=r"waited 0.5 s \(DATA_OPTIMIZER_TIMEOUT\) for 0-index.json"):
        run_node(monkeypatch, 1, 2, out, 10)
    # This node's share is complete and kept; once node 0 has run, re-running the last node finishes.
    assert sorted(p.name for p in out.iterdir()) == ["1-index.json", "chunk-2-0.bin", "chunk-3-0.bin"]
    assert not (out / "index.json").exists()
    run_node(monkeypatch, 0, 2, out, 10)
    run_node(monkeypatch, 1, 2, out, 10, mode="overwrite")
    assert [s["i"] for s in StreamingDataset(out)] == list(range(10))


_KEYED_NODE = """
import sys
import litstream
litstream.optimize(int, list(range(24)), sys.argv[1], chunk_size=4, num_workers=2, key_fn=lambda s: s, verbose=False)
"""


@pytest.mark.slow
def test_nodes_with_key_fn_start_in_any_order(tmp_path: Path) -> None:
    """Node 1 (the last) writes its share and keys first; node 0 starts after that and is not refused."""
    out = tmp_path / "ds"
    env = {**os.environ, "DATA_OPTIMIZER_NUM_NODES": "2", "DATA_OPTIMIZER_TIMEOUT": "120"}
    last = subprocess.Popen(
        [sys.executable, "-c", _KEYED_NODE, str(out)], env={**env, "DATA_OPTIMIZER_NODE_RANK": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (out / "1-index.json").exists():  # node 1's share and its keys files are stored
            assert last.poll() is None, last.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "node 1 did not store its share"
            time.sleep(0.05)  # polling a state node 1 reaches on its own; the outcome does not depend on timing
        assert sorted(p.name for p in out.glob("*.keys.parquet")) == ["2.keys.parquet", "3.keys.parquet"]
        first = subprocess.run(
            [sys.executable, "-c", _KEYED_NODE, str(out)], env={**env, "DATA_OPTIMIZER_NODE_RANK": "0"},
            capture_output=True, timeout=180,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr.decode()[-2000:]
        _, err = last.communicate(timeout=180)
        assert last.returncode == 0, err.decode()[-2000:]
    finally:
        if last.poll() is None:
            last.kill()
    ds = StreamingDataset(out)
    assert list(ds) == list(range(24))
    assert [ds.get_by_key(k) for k in (0, 13, 23)] == [0, 13, 23]
