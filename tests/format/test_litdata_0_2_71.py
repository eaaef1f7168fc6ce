"""Datasets written by LitData 0.2.71 (committed fixtures) still read back exactly with litstream.

The fixtures come from ``tests/data/make_litdata_0_2_71.py``; the expected values are computed here from
the same sample functions, so the files are checked against the rule that produced them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import litstream

DATA = Path(__file__).parent.parent / "data"
FIXTURES = DATA / "litdata-0.2.71"


def _maker() -> Any:
    spec = importlib.util.spec_from_file_location("make_litdata_0_2_71", DATA / "make_litdata_0_2_71.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _maker()


def _same(actual: Any, expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        assert list(actual) == list(expected), where
        for key in expected:
            _same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list):
        assert isinstance(actual, list), where
        assert len(actual) == len(expected), where
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _same(a, e, f"{where}[{k}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), where
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), where
        assert np.array_equal(actual, expected), where
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), where
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), where
        assert torch.equal(actual, expected), where
    else:
        assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


@pytest.mark.parametrize("name", ["pytree", "pytree-zstd"])
def test_pytree_fixture_reads_back(name: str) -> None:
    directory = FIXTURES / name
    config = json.loads((directory / "index.json").read_text())["config"]
    assert "types" not in config  # written before LitData 0.2.76
    assert config["compression"] == (None if name == "pytree" else "zstd")
    expected = [MAKER.pytree_sample(i) for i in range(MAKER.NUM)]
    ds = litstream.StreamingDataset(directory, shuffle=False)
    assert len(ds) == MAKER.NUM
    for i, sample in enumerate(ds):
        _same(sample, expected[i], f"{name} iteration {i}")
    for i in reversed(range(MAKER.NUM)):
        _same(ds[i], expected[i], f"{name} ds[{i}]")


def test_token_fixture_reads_back() -> None:
    directory = FIXTURES / "tokens"
    tokens = np.concatenate([MAKER.token_sample(i) for i in range(MAKER.NUM)])
    index = json.loads((directory / "index.json").read_text())
    assert sum(chunk["dim"] for chunk in index["chunks"]) == len(tokens)
    block = 5
    # windows never span chunks: cut each chunk's tokens into whole blocks
    expected: list[np.ndarray] = []
    start = 0
    for chunk in index["chunks"]:
        part = tokens[start : start + chunk["dim"]]
        expected += [part[k * block : (k + 1) * block] for k in range(len(part) // block)]
        start += chunk["dim"]
    ds = litstream.StreamingDataset(directory, item_loader=litstream.TokensLoader(block_size=block), shuffle=False)
    assert len(ds) == len(expected)
    for i, window in enumerate(ds):
        assert np.array_equal(np.asarray(window), expected[i]), f"window {i}"
        assert np.array_equal(np.asarray(ds[i]), expected[i]), f"ds[{i}]"


def test_append_to_a_0_2_71_dataset(tmp_path: Path) -> None:
    target = tmp_path / "data"
    shutil.copytree(FIXTURES / "pytree", target)
    more = list(range(MAKER.NUM, MAKER.NUM + 3))
    litstream.optimize(MAKER.pytree_sample, more, target, chunk_size=4, num_workers=1, mode="append", verbose=False)
    config = json.loads((target / "index.json").read_text())["config"]
    assert config["data_format"][-1] == "int"  # the 0.2.71 layout (nested list flattened) is kept
    ds = litstream.StreamingDataset(target, shuffle=False)
    assert len(ds) == MAKER.NUM + 3
    for i in range(len(ds)):
        _same(ds[i], MAKER.pytree_sample(i), f"ds[{i}]")
