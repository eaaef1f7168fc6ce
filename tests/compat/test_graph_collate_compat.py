"""Graph batching with PyTorch Geometric installed, against LitData 0.2.76's ``litdata_collate``.

``Graph`` wrappers, PyG ``Data`` and ``HeteroData`` samples and dicts holding graphs are batched by
litstream's ``litdata_collate`` and by LitData's on the same inputs, and on datasets each library wrote
(decoded to PyG objects by each reader); the ``Batch`` objects must hold equal tensors. Graphs are
synthetic (small chains with features made from the sample number).

PyG 2.8 calls ``torch.jit.script`` at import, which torch 2.13 deprecates; that one warning is
ignored here (``filterwarnings = error`` elsewhere).
"""

from __future__ import annotations

import gc
import shutil
import warnings
from typing import TYPE_CHECKING, Any

import pytest
import torch

import litstream
from peer import litdata_marks, require_dev, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="`torch.jit.script` is deprecated", category=DeprecationWarning)
    pyg = require_dev("torch_geometric.data")
from litdata.streaming.collate import litdata_collate as their_collate  # noqa: E402

pytestmark = litdata_marks("ignore:`torch.jit.script` is deprecated:DeprecationWarning")


def _fields(i: int) -> dict[str, torch.Tensor]:
    nodes = 2 + i % 3
    chain = torch.arange(nodes - 1)
    return {
        "x": torch.arange(nodes * 4, dtype=torch.float32).reshape(nodes, 4) + 10 * i,
        "edge_index": torch.stack([chain, chain + 1]),
        "edge_attr": torch.full((nodes - 1, 2), float(i)),
        "y": torch.tensor([i % 2]),
    }


def _hetero(i: int) -> Any:
    data = pyg.HeteroData()
    data["paper"].x = torch.ones(2 + i, 3) * i
    data["author"].x = torch.zeros(1 + i, 2)
    data["author", "writes", "paper"].edge_index = torch.tensor([[0], [1]])
    return data


def _assert_same_batch(ours: Any, theirs: Any) -> None:
    assert type(ours) is type(theirs)
    assert isinstance(ours, pyg.Batch)
    assert ours.num_graphs == theirs.num_graphs
    mine, other = ours.to_dict(), theirs.to_dict()
    assert sorted(map(str, mine)) == sorted(map(str, other))
    for key, value in mine.items():
        if isinstance(value, dict):
            assert value.keys() == other[key].keys()
            for name, tensor in value.items():
                assert torch.equal(tensor, other[key][name]), (key, name)
        else:
            assert torch.equal(value, other[key]), key


@pytest.mark.parametrize("kind", ["wrapper", "data", "hetero"])
def test_graph_batches_equal_litdatas(kind: str) -> None:
    def make(lib: Any, i: int) -> Any:
        if kind == "wrapper":
            return lib.Graph(**_fields(i))
        return pyg.Data(**_fields(i)) if kind == "data" else _hetero(i)

    ours = litstream.litdata_collate([make(litstream, i) for i in range(4)])
    theirs = their_collate([make(litdata, i) for i in range(4)])
    _assert_same_batch(ours, theirs)
    if kind != "hetero":
        assert torch.equal(ours.batch, torch.repeat_interleave(torch.arange(4), torch.tensor([2, 3, 4, 2])))
        assert torch.equal(ours.edge_index[:, :3], torch.tensor([[0, 2, 3], [1, 3, 4]]))  # offsets by graph


def test_dicts_with_graphs_collate_per_key() -> None:
    ours = litstream.litdata_collate([{"g": litstream.Graph(**_fields(i)), "id": i} for i in range(3)])
    theirs = their_collate([{"g": litdata.Graph(**_fields(i)), "id": i} for i in range(3)])
    _assert_same_batch(ours["g"], theirs["g"])
    assert torch.equal(ours["id"], theirs["id"])
    assert torch.equal(ours["id"], torch.arange(3))


def _litstream_sample(i: int) -> dict[str, Any]:
    return {"graph": litstream.Graph(**_fields(i)), "id": i}


def _litdata_sample(i: int) -> dict[str, Any]:
    return {"graph": litdata.Graph(**_fields(i)), "id": i}


def test_loaders_batch_each_others_graph_datasets_alike(tmp_path: Path) -> None:
    litstream.optimize(_litstream_sample, list(range(6)), tmp_path / "ls", chunk_size=3, num_workers=1, verbose=False)
    litdata.optimize(_litdata_sample, list(range(6)), str(tmp_path / "ld"), chunk_size=3, num_workers=1)
    for name in ("ls", "ld"):
        copy = tmp_path / f"{name}-litdata-read"
        shutil.copytree(tmp_path / name, copy)
        theirs = list(litdata.StreamingDataLoader(litdata.StreamingDataset(str(copy)), batch_size=3, num_workers=0))
        ours = list(litstream.StreamingDataLoader(litstream.StreamingDataset(tmp_path / name), batch_size=3))
        assert len(ours) == len(theirs) == 2
        for mine, other in zip(ours, theirs, strict=True):
            assert isinstance(litstream.StreamingDataset(tmp_path / name)[0]["graph"], pyg.Data)
            _assert_same_batch(mine["graph"], other["graph"])
            assert torch.equal(mine["id"], other["id"])
        expected = their_collate([pyg.Data(**_fields(i)) for i in range(3)])
        _assert_same_batch(ours[0]["graph"], expected)
        del theirs
        gc.collect()
