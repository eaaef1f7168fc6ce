"""LitData 0.2.76 temporal array datasets (TemporalArrayLoader) read by litstream exactly as by LitData."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch

import litstream
from clean_litdata import litdata_optimize
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = pytest.mark.litdata


def track(i: int) -> dict[str, Any]:
    frames = 3 + i
    return {
        "features": np.arange(frames * 2, dtype=np.float32).reshape(frames, 2) + i,
        "score": torch.full((frames,), float(i), dtype=torch.float64),
        "valid": np.arange(frames) % 2 == 0,
        "ids": np.arange(frames * 6, dtype=np.int16).reshape(frames, 3, 2),
    }


def _same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert list(ours) == list(theirs)
    for name in ours:
        assert type(ours[name]) is type(theirs[name]), name
        assert ours[name].dtype == theirs[name].dtype, name
        assert ours[name].shape == theirs[name].shape, name
        assert np.array_equal(np.asarray(ours[name]), np.asarray(theirs[name])), name


def test_litdata_temporal_dataset_reads_identically(tmp_path: Path) -> None:
    out = str(tmp_path / "tracks")
    litdata_optimize(
        fn=track,
        inputs=list(range(7)),
        output_dir=out,
        chunk_bytes=300,
        num_workers=1,
        verbose=False,
        item_loader=litdata.TemporalArrayLoader(field_groups=[["score", "valid"]]),
    )
    theirs = list(litdata.StreamingDataset(out, item_loader=litdata.TemporalArrayLoader()))
    ours = list(litstream.StreamingDataset(out, item_loader=litstream.TemporalArrayLoader()))
    assert len(ours) == len(theirs) == 7
    for mine, peer in zip(ours, theirs, strict=True):
        _same(mine, peer)
    assert isinstance(ours[2]["score"], torch.Tensor)
    assert ours[2]["features"].shape == (5, 2)
    _same(litstream.StreamingDataset(out)[6], theirs[6])  # the index names the layout; ds[i] reads ranges
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(out), batch_size=1, num_workers=1)
    assert [int(batch["ids"].shape[1]) for batch in loader] == [3 + i for i in range(7)]


def test_temporal_loader_arguments(tmp_path: Path) -> None:
    with pytest.raises(litstream.ConfigurationError, match="field_groups must be"):
        litstream.TemporalArrayLoader(field_groups=[["a"], ["a"]])
    with pytest.raises(litstream.ConfigurationError, match="field_groups must be"):
        litstream.TemporalArrayLoader(field_groups=["ab"])
    with pytest.raises(litstream.ConfigurationError, match="TemporalArrayLoader"):
        litstream.optimize(
            fn=track,
            inputs=[1],
            output_dir=str(tmp_path / "o"),
            chunk_size=1,
            item_loader=litstream.TemporalArrayLoader(),
        )
    assert not (tmp_path / "o" / "index.json").exists()


def test_damaged_temporal_record_is_a_format_error() -> None:
    from litstream.format._temporal import TemporalDecoder

    schema = {
        "version": 1,
        "field_order": ["a"],
        "fields": {"a": {"dtype": "<f4", "shape": [], "tensor": False}},
        "groups": [["a"]],
    }
    decoder = TemporalDecoder(schema)
    good = (2).to_bytes(4, "little") + np.array([1.5, 2.5], dtype="<f4").tobytes()
    assert decoder.decode(good)["a"].tolist() == [1.5, 2.5]
    with pytest.raises(litstream.FormatError, match="does not hold 3 frames"):
        decoder.decode((3).to_bytes(4, "little") + good[4:])
    with pytest.raises(litstream.FormatError, match="every field"):
        TemporalDecoder({**schema, "groups": [["a"], ["a"]]})
    with pytest.raises(litstream.FormatError, match="version-1"):
        TemporalDecoder({**schema, "version": 2})
