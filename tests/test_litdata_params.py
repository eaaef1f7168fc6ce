"""LitData-only parameters: speed knobs accepted without effect, behaviour switches refused unless default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import litstream


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


def _write(path: Path, **kwargs: Any) -> str:
    out = str(path)
    litstream.optimize(fn=_sample, inputs=list(range(6)), output_dir=out, chunk_size=2, num_workers=1, **kwargs)
    return out


def test_write_knobs_are_accepted_and_change_nothing(tmp_path: Path) -> None:
    plain = _write(tmp_path / "plain")
    tuned = _write(tmp_path / "tuned", num_downloaders=4, num_uploaders=2, optimize_dns=True, keep_data_ordered=False)
    assert list(litstream.StreamingDataset(tuned)) == list(litstream.StreamingDataset(plain))
    tuned_index = json.loads((Path(tuned) / "index.json").read_text())
    plain_index = json.loads((Path(plain) / "index.json").read_text())
    assert tuned_index["chunks"] == plain_index["chunks"]
    assert tuned_index["config"] == plain_index["config"]
    for chunk in plain_index["chunks"]:
        assert (Path(tuned) / chunk["filename"]).read_bytes() == (Path(plain) / chunk["filename"]).read_bytes()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("num_nodes", 2),
        ("machine", "A10G"),
        ("reader", object()),
        ("broadcast_paths", True),
    ],
)
def test_write_switches_are_refused_unless_default(tmp_path: Path, name: str, value: Any) -> None:
    with pytest.raises(litstream.ConfigurationError, match=f"{name}=.*not supported"):
        _write(tmp_path / "out", **{name: value})
    assert not (tmp_path / "out" / "index.json").exists()


def test_map_switches_are_refused_and_knobs_accepted(tmp_path: Path) -> None:
    def fn(item: int, output_dir: str) -> None:
        Path(output_dir, f"{item}.txt").write_text(str(item))

    with pytest.raises(litstream.ConfigurationError, match=r"reader=.*not supported"):
        litstream.map(fn, [1], str(tmp_path / "a"), reader=object())
    with pytest.raises(litstream.ConfigurationError, match="num_downloaders must be None or an int"):
        litstream.map(fn, [1], str(tmp_path / "a"), num_downloaders=0)
    litstream.map(fn, [1, 2], str(tmp_path / "b"), num_workers=1, num_uploaders=3, keep_data_ordered=True)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["1.txt", "2.txt"]


def test_dataset_knobs_and_switches(tmp_path: Path) -> None:
    data = _write(tmp_path / "ds")
    expected = [{"x": i} for i in range(6)]
    ds = litstream.StreamingDataset(data, batch_decode=0, window_direct_io=False, session_options={})
    assert list(ds) == expected
    refused: dict[str, Any] = {"session_options": {"profile_name": "x"}}
    for name, value in refused.items():
        with pytest.raises(litstream.ConfigurationError, match=f"{name}="):
            litstream.StreamingDataset(data, **{name: value})
    # honoured with LitData's meaning (tests/compat/test_litdata_state_export.py); bad types refused
    assert list(litstream.StreamingDataset(data, force_override_state_dict=True, num_canonical_nodes=2)) == expected
    with pytest.raises(litstream.ConfigurationError, match="force_override_state_dict must be True or False"):
        litstream.StreamingDataset(data, force_override_state_dict="yes")  # type: ignore[arg-type]
    with pytest.raises(litstream.ConfigurationError, match="batch_decode must be"):
        litstream.StreamingDataset(data, batch_decode=-1)
    with pytest.raises(litstream.ConfigurationError, match="window_direct_io must be"):
        litstream.StreamingDataset(data, window_direct_io="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "window"),
    [
        (None, 256),
        ("auto", 256),
        (True, 256),
        (0, 0),
        (False, 0),
        ("full", 0),
        ("all", 0),
        ("off", 0),
        (16, 16),
        ("7", 7),
    ],
)
def test_item_shuffle_window_values_are_litdatas(tmp_path: Path, value: Any, window: int) -> None:
    """The values LitData 0.2.76 accepts, resolved to its block size (see read._assign)."""
    ds = litstream.StreamingDataset(_write(tmp_path / "ds"), shuffle=True, item_shuffle_window=value)
    assert ds._reader.spec.item_shuffle_window == window
    assert ds.state_dict(0, 1, 1)["item_shuffle_window"] == window
    assert sorted(s["x"] for s in ds) == list(range(6))


@pytest.mark.parametrize(
    ("value", "match"), [(-1, "must be >= 0, got -1"), ("chunk", "'chunk' is not understood"), (2.5, "float")]
)
def test_bad_item_shuffle_window_is_refused(tmp_path: Path, value: Any, match: str) -> None:
    with pytest.raises(
        litstream.ConfigurationError, match=rf"item_shuffle_window.*{match}|{match}.*item_shuffle_window"
    ):
        litstream.StreamingDataset(_write(tmp_path / "ds"), item_shuffle_window=value)


def test_loader_prefetch_factor_passed_on(tmp_path: Path) -> None:
    ds = litstream.StreamingDataset(_write(tmp_path / "ds"))
    loader = litstream.StreamingDataLoader(ds, batch_size=2, num_workers=1, prefetch_factor=3)
    assert loader.prefetch_factor == 3
    assert litstream.StreamingDataLoader(ds, batch_size=2).prefetch_factor is None
