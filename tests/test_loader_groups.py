"""``StreamingDataLoader`` fetches one group per batch from its dataset (``_collate.LoaderGroup``): columns of
flat dict samples collated without a sample per item, or lists of samples. Every batch must equal what torch's
own ``DataLoader`` builds from the same dataset sample by sample with ``default_collate``, whatever the
workers, shuffle, transform or collate function; and chunk boundaries fall inside batches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, default_collate

import litstream
from litstream._torch._collate import LoaderGroup, collate_columns, loader_groups
from litstream.format._batch_decode import ColumnBatch, rows_from_columns
from same_values import assert_same

ITEMS = 61
BATCH = 8  # chunks of 13 items: most chunk boundaries fall inside a batch


def _sample(i: int) -> dict[str, Any]:
    return {
        "image": np.full((2, 3), i, np.int16),
        "label": i - 30,
        "name": "n" * (i % 5),  # unevenly spaced items
        "score": i / 4,
        "flag": i % 3 == 0,
    }


def _with_total(sample: dict[str, Any]) -> dict[str, Any]:
    return {**sample, "total": int(sample["image"].sum())}


def _collate_as_list(samples: list[Any]) -> list[Any]:
    return [default_collate(samples)]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("groups") / "ds"
    litstream.optimize(fn=_sample, inputs=list(range(ITEMS)), output_dir=str(out), chunk_size=13, num_workers=1)
    return str(out)


def _dataset(data: str, shuffle: bool, transform: bool) -> litstream.StreamingDataset:
    return litstream.StreamingDataset(data, shuffle=shuffle, transform=_with_total if transform else None)


@pytest.mark.parametrize("batch", [BATCH, 30], ids=["batch8", "batch30"])  # 30: a batch spans three chunks
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("form", ["columns", "transform", "collate_fn"])
def test_batches_equal_torchs_sample_by_sample(data: str, workers: int, shuffle: bool, form: str, batch: int) -> None:
    collate = _collate_as_list if form == "collate_fn" else None
    loader = litstream.StreamingDataLoader(
        _dataset(data, shuffle, form == "transform"), batch_size=batch, num_workers=workers, collate_fn=collate
    )
    assert loader.batch_size == batch
    reference = _dataset(data, shuffle, form == "transform")
    reference.set_batch_size(batch)  # the same split between workers as StreamingDataLoader's
    reference.set_num_workers(workers)
    reference.set_epoch(1)
    expected = list(DataLoader(reference, batch_size=batch, num_workers=workers, collate_fn=collate or default_collate))
    got = list(loader)
    assert len(got) == len(expected) == len(loader)
    assert sum(len(b["label"] if isinstance(b, dict) else b[0]["label"]) for b in got) == ITEMS
    for a, b in zip(got, expected, strict=True):
        assert_same(a, b)


def _label_first(i: int) -> dict[str, Any]:
    return {"label": i, "image": np.full((4, 4), i % 251, np.uint8)}


def test_a_block_decoded_into_a_slot_is_not_overwritten_by_the_leaves_before_it(tmp_path: Any) -> None:
    # workers decode the image column straight into their next slot; the label, laid out before it in the
    # batch, must not land on it (it did: the first bytes of row 0 held the label)
    out = str(tmp_path / "ds")
    litstream.optimize(fn=_label_first, inputs=list(range(300)), output_dir=out, chunk_size=30, num_workers=1)
    batches = list(litstream.StreamingDataLoader(litstream.StreamingDataset(out), batch_size=4, num_workers=2))
    assert sum(len(b["label"]) for b in batches) == 300
    for batch in batches:
        expected = (batch["label"] % 251).to(torch.uint8)
        assert torch.equal(batch["image"][:, 0, 0], expected)
        assert torch.equal(batch["image"][:, 3, 3], expected)


def _columns(begin: int, end: int) -> ColumnBatch:
    ids = np.arange(begin, end)
    return ColumnBatch(("x", "i"), [np.stack([np.full(2, k) for k in ids]), ids.astype(np.int64)], end - begin)


def test_groups_cut_decode_batches_as_torch_cuts_samples() -> None:
    parts: list[Any] = [_columns(0, 5), _columns(5, 17), [{"x": np.full(2, 17), "i": 17}], _columns(18, 23)]
    groups = list(loader_groups((part for part in parts), 4))
    assert [g.size for g in groups] == [4, 4, 4, 4, 4, 3]
    # a batch inside one decode batch keeps its columns, as does one across column batches (joined) and the
    # short last one; a batch with a piece of samples is samples
    kinds = [type(g.part).__name__ for g in groups]
    assert kinds == ["ColumnBatch", "ColumnBatch", "ColumnBatch", "ColumnBatch", "list", "ColumnBatch"]
    ids = [int(s["i"]) for g in groups for s in g.samples()]
    assert ids == list(range(23))


def test_a_batch_across_decode_batches_joins_their_columns_or_falls_back_to_samples() -> None:
    three = list(loader_groups((part for part in [_columns(0, 2), _columns(2, 5), _columns(5, 9)]), 9))
    assert len(three) == 1
    assert isinstance(three[0].part, ColumnBatch)
    assert three[0].part.columns[0].flags.owndata  # one new array: the join's copy
    out = collate_columns(three[0].part)
    assert out is not None
    assert_same(out, default_collate(rows_from_columns(_columns(0, 9))))
    wider = ColumnBatch(("x", "i"), [np.zeros((2, 3), np.int64), np.arange(2, 4)], 2)  # another row shape
    other_dtype = ColumnBatch(("x", "i"), [np.zeros((2, 2), np.int32), np.arange(2, 4)], 2)
    as_list = ColumnBatch(("x", "i"), [np.zeros((2, 2), np.int64), [2, 3]], 2)  # another column kind
    other_keys = ColumnBatch(("y", "i"), [np.zeros((2, 2), np.int64), np.arange(2, 4)], 2)
    for second in (wider, other_dtype, as_list, other_keys):
        (group,) = loader_groups((part for part in [_columns(0, 2), second]), 4)
        assert type(group.part) is list
        assert [int(s["i"]) for s in group.samples()] == [0, 1, 2, 3]


def test_column_batch_collates_as_its_samples() -> None:
    batch = _columns(3, 9)
    rows = rows_from_columns(batch)
    assert rows[0]["i"] == 3
    assert type(rows[0]["i"]) is int
    rows[0]["x"][0] = -1  # each row is writable
    out = collate_columns(_columns(3, 9))
    assert out is not None
    assert_same(out, default_collate(rows_from_columns(_columns(3, 9))))
    group = LoaderGroup(batch.part(1, 4), 3)
    assert [s["i"] for s in group.samples()] == [4, 5, 6]


def test_a_dataset_subclass_with_its_own_iter_is_fetched_sample_by_sample(data: str) -> None:
    class Doubled(litstream.StreamingDataset):
        def __iter__(self) -> Any:
            for sample in super().__iter__():
                yield {**sample, "label": 2 * sample["label"]}

    batches = list(litstream.StreamingDataLoader(Doubled(data), batch_size=BATCH))
    labels = torch.cat([b["label"] for b in batches]).tolist()
    assert labels == [2 * (i - 30) for i in range(ITEMS)]


def test_the_dataset_iterates_samples_again_after_a_loader(data: str) -> None:
    dataset = litstream.StreamingDataset(data)
    assert len(list(litstream.StreamingDataLoader(dataset, batch_size=BATCH))) == 8
    samples = list(dataset)
    assert [s["label"] for s in samples] == [i - 30 for i in range(ITEMS)]
    assert isinstance(samples[0], dict)
