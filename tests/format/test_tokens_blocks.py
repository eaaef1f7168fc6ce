"""``TokenLayout.decode_blocks``: many token blocks decoded at once equal the blocks decoded one by one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from litstream import FormatError, TokensLoader
from litstream.format._chunk import ChunkView, pack_chunk
from litstream.format._index import ChunkInfo, DatasetConfig
from litstream.format._tokens import TokenLayout, check_item_loader


def _layout(data_format: str, tokens: int, block: int) -> TokenLayout:
    config = DatasetConfig(data_format=(data_format,), data_spec=None, chunk_size=10, item_loader="TokensLoader")
    layout = check_item_loader("d", config, [ChunkInfo("chunk-0-0.bin", 2, 0, dim=tokens)], TokensLoader(block))
    assert layout is not None
    return layout


@pytest.mark.parametrize(
    ("data_format", "kind"), [("no_header_numpy:2", np.ndarray), ("no_header_tensor:16", torch.Tensor)]
)
@pytest.mark.parametrize("items", [range(0, 6), range(2, 5), [1, 2, 3], [4, 0, 2], [5, 5], [3]])
def test_blocks_decoded_together_equal_blocks_decoded_one_by_one(
    data_format: str, kind: type[Any], items: object
) -> None:
    tokens = np.arange(1000, 1020, dtype="<i4")  # 20 tokens: 6 blocks of 3, 2 tokens of tail
    layout = _layout(data_format, len(tokens), 3)
    view = layout.view(0, ChunkView(pack_chunk([tokens[:7].tobytes(), tokens[7:].tobytes()])))
    ids = list(items)  # type: ignore[call-overload]
    together: list[Any] = layout.decode_blocks(view, items)  # type: ignore[arg-type]
    alone: list[Any] = [layout.decode(view.item(i)) for i in ids]
    assert [np.asarray(b).tolist() for b in together] == [np.asarray(b).tolist() for b in alone]
    assert [np.asarray(b).tolist() for b in together] == [tokens[3 * i : 3 * i + 3].tolist() for i in ids]
    assert all(type(b) is kind and b.dtype == a.dtype and b.shape == (3,) for a, b in zip(alone, together, strict=True))
    together[0][0] = -1  # writable, and not shared with the chunk or another block
    assert int(together[0][0]) == -1
    assert all(int(b[0]) != -1 for b in together[1:])
    assert np.frombuffer(view.item(ids[0]), dtype="<i4")[0] == tokens[3 * ids[0]]


def test_a_block_outside_the_chunk_is_the_per_block_error() -> None:
    layout = _layout("no_header_tensor:16", 20, 3)
    view = layout.view(0, ChunkView(pack_chunk([np.arange(20, dtype="<i4").tobytes()])))
    with pytest.raises(FormatError, match="block 6 is outside this chunk of 6 blocks"):
        layout.decode_blocks(view, range(4, 7))
