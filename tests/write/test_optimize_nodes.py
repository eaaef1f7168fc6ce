"""Multi-node optimize on one local directory: each "node" is a call with its own ``DATA_OPTIMIZER_*``
values (node 0 first; the last node merges), with two worker processes per node."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

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
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("chunk-")) == ["index.json"]


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
