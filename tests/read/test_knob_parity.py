"""Knob parity: every ``StreamingDataset`` argument that changes content, order or cache has an ``astream``
spelling with the same meaning (issue 26), checked from the two signatures against one table."""

from __future__ import annotations

import inspect

import pytest

from litstream import StreamingDataset, astream

# StreamingDataset argument -> its astream spelling. Both build one read._spec.ReadSpec from them.
READ_KNOBS = {
    "input_dir": "input_dir",
    "shuffle": "shuffle",
    "seed": "seed",
    "drop_last": "drop_last",
    "max_pre_download": "max_pre_download",
    "transform": "transform",
    "serializers": "serializers",
    "item_loader": "item_loader",
    "shuffle_window": "shuffle_window",
    "storage_options": "storage_options",
    "cache_dir": "cache_dir",
    "max_cache_size": "max_cache_size",
    "hedge_delay": "hedge_delay",
    "cache_chunks": "cache_chunks",
    "subsample": "subsample",
    "index_path": "index_path",
    "encryption": "encryption",
    "item_shuffle_window": "item_shuffle_window",
    "allow_pickle": "allow_pickle",
    "version": "version",
}

# LitData's arguments that change nothing a reader serves (speed knobs, refused behaviour switches), and
# max_memory: a memory budget for the loader's buffers (prefetch depth), never what is served or its order.
NOT_READ_KNOBS = {"session_options", "force_override_state_dict", "num_canonical_nodes", "batch_decode",
                  "window_direct_io", "max_memory"}  # fmt: skip

# Defaults that differ, and why the meaning is still the same.
DIFFERENT_DEFAULTS = {
    # StreamingDataset: None = True above one rank (LitData); astream names its world_size, default 1.
    "drop_last": (None, False),
}


def _parameters(function: object) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_every_streaming_dataset_argument_is_classified() -> None:
    names = set(_parameters(StreamingDataset.__init__)) - {"self"}
    assert names == set(READ_KNOBS) | NOT_READ_KNOBS, "classify a new StreamingDataset argument in this table"


@pytest.mark.parametrize(("dataset_name", "astream_name"), sorted(READ_KNOBS.items()))
def test_astream_has_the_knob_with_the_same_default(dataset_name: str, astream_name: str) -> None:
    ours = _parameters(StreamingDataset.__init__)[dataset_name]
    theirs = _parameters(astream).get(astream_name)
    assert theirs is not None, f"astream has no {astream_name} (StreamingDataset's {dataset_name})"
    assert theirs.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    expected = DIFFERENT_DEFAULTS.get(dataset_name, (ours.default, ours.default))
    assert (ours.default, theirs.default) == expected
    assert ours.annotation == theirs.annotation or dataset_name in {"input_dir", "drop_last"}, (
        f"{dataset_name}: {ours.annotation} vs {theirs.annotation}"
    )
