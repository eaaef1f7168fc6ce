"""``list_media_folder``, ``iter_webdataset_tar`` and ``litdata_collate`` give LitData 0.2.76's results."""

from __future__ import annotations

import io
import tarfile
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch

import litstream
from peer import require_peer
from pyg_block import block_torch_geometric
from same_values import assert_same

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")


def _tree(root: Path) -> None:
    """A class-folder tree with every kind of file, upper-case extensions, nesting and stray files."""
    files = [
        "cat/a.jpg", "cat/B.PNG", "cat/notes.txt", "dog/c.jpeg", "dog/deep/d.webp", "e.gif", "f.tiff",
        "audio/x.wav", "audio/y.FLAC", "scan/brain.nii.gz", "scan/head.nii", "scan/other.gz", "docs/r.pdf",
        "docs/readme.md", "mesh/m.glb", "clips/v.MP4", "no_extension", ".hidden.png",
    ]  # fmt: skip
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode())


@pytest.mark.litdata
@pytest.mark.parametrize("kind", ["image", "text", "audio", "video", "mesh", "pdf", "nifti"])
@pytest.mark.parametrize("drop_labels", [False, True])
def test_list_media_folder_matches_litdata(tmp_path: Path, kind: str, drop_labels: bool) -> None:
    _tree(tmp_path)
    ours = litstream.list_media_folder(str(tmp_path), kind=kind, drop_labels=drop_labels)
    assert ours == litdata.list_media_folder(str(tmp_path), kind=kind, drop_labels=drop_labels)
    assert ours  # every kind has at least one file in the tree


def test_list_media_folder_labels_and_kind_error(tmp_path: Path) -> None:
    _tree(tmp_path)
    items = litstream.list_media_folder(str(tmp_path / "cat"))
    assert items == [
        {"path": str(tmp_path / "cat" / "B.PNG"), "label": None},
        {"path": str(tmp_path / "cat" / "a.jpg"), "label": None},
    ]
    with pytest.raises(litstream.ConfigurationError, match=r"kind='images'.*'image'"):
        litstream.list_media_folder(str(tmp_path), kind="images")


def _webdataset_tar(path: Path) -> None:
    """A shard in WebDataset layout: keys with several suffixes, folders, a directory and stray members."""
    members = [
        ("shard/000.jpg", b"jpeg-0"), ("shard/000.cls", b"3"), ("shard/000.seg.png", b"seg-0"),
        ("shard/001.jpg", b"jpeg-1"), ("shard/001.json", b'{"a": 1}'), ("README", b"no dot"),
        ("other/001.txt", b"same key, other folder"), ("shard/002.cls", b""), ("shard/000.cls", b"key again"),
    ]  # fmt: skip
    with tarfile.open(path, "w") as archive:
        folder = tarfile.TarInfo("shard")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@pytest.mark.litdata
def test_iter_webdataset_tar_matches_litdata(tmp_path: Path) -> None:
    shard = tmp_path / "shard-000.tar"
    _webdataset_tar(shard)
    ours = list(litstream.iter_webdataset_tar(str(shard)))
    assert ours == list(litdata.iter_webdataset_tar(str(shard)))
    assert [s["__key__"] for s in ours] == ["000", "001", "002", "000"]
    assert ours[0] == {"jpg": b"jpeg-0", "cls": b"3", "seg.png": b"seg-0", "__key__": "000", "__url__": str(shard)}


def test_iter_webdataset_tar_feeds_optimize(tmp_path: Path) -> None:
    shard = tmp_path / "shard.tar"
    _webdataset_tar(shard)
    samples = list(litstream.iter_webdataset_tar(str(shard)))

    litstream.optimize(_key_and_first, samples, tmp_path / "out", chunk_bytes="1MB", num_workers=1, verbose=False)
    ds = litstream.StreamingDataset(tmp_path / "out", shuffle=False)
    assert [ds[i] for i in range(len(ds))] == [_key_and_first(s) for s in samples]


def _key_and_first(sample: dict[str, Any]) -> dict[str, Any]:
    fields = sorted(k for k in sample if not k.startswith("__"))
    return {"key": sample["__key__"], "first": sample[fields[0]] if fields else b""}


def test_iter_webdataset_tar_refuses_a_non_tar(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar archive" * 40)
    with pytest.raises(litstream.FormatError, match=r"bad.tar.*not a readable tar archive"):
        list(litstream.iter_webdataset_tar(str(bad)))


@pytest.mark.litdata
@pytest.mark.parametrize(
    "batch",
    [
        [],
        [{"x": np.arange(3), "y": 1, "s": "a"}, {"x": np.arange(3) + 1, "y": 2, "s": "b"}],
        [(torch.ones(2), 1.5), (torch.zeros(2), 2.5)],
        [np.eye(2, dtype=np.float32), np.ones((2, 2), dtype=np.float32)],
        [b"raw", b"bytes"],
    ],
)
def test_litdata_collate_matches_litdata_on_plain_batches(batch: list[Any]) -> None:
    assert_same(litstream.litdata_collate(batch), litdata.litdata_collate(batch))


@pytest.mark.litdata
def test_litdata_collate_batches_graphs_like_litdata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without torch-geometric, both return the graphs as a list; dict samples are collated per key."""
    block_torch_geometric(monkeypatch)  # the path without PyG
    ours_graphs = [litstream.Graph(x=torch.ones(2, 1) * i, edge_index=torch.tensor([[0], [1]])) for i in range(2)]
    theirs_graphs = [litdata.Graph(x=g.x, edge_index=g.edge_index) for g in ours_graphs]
    assert litstream.litdata_collate(ours_graphs) is ours_graphs
    assert litdata.litdata_collate(theirs_graphs) is theirs_graphs
    ours = litstream.litdata_collate([{"g": g, "id": i} for i, g in enumerate(ours_graphs)])
    theirs = litdata.litdata_collate([{"g": g, "id": i} for i, g in enumerate(theirs_graphs)])
    assert ours["g"] == ours_graphs
    assert theirs["g"] == theirs_graphs
    assert_same(ours["id"], theirs["id"])
    assert torch.equal(ours["id"], torch.tensor([0, 1]))


def test_streaming_dataloader_defaults_to_litdata_collate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block_torch_geometric(monkeypatch)  # the path without PyG
    litstream.optimize(_graph_sample, list(range(4)), tmp_path / "g", chunk_bytes="1MB", num_workers=1, verbose=False)
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(tmp_path / "g", shuffle=False), batch_size=2)
    batches = list(loader)
    assert [b["id"].tolist() for b in batches] == [[0, 1], [2, 3]]
    assert [[type(g).__name__ for g in b["graph"]] for b in batches] == [["Graph", "Graph"]] * 2
    assert torch.equal(batches[1]["graph"][1].x, torch.full((2, 1), 3.0))


def _graph_sample(i: int) -> dict[str, Any]:
    return {"graph": litstream.Graph(x=torch.full((2, 1), float(i)), edge_index=torch.tensor([[0], [1]])), "id": i}
