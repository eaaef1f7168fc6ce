"""The token layout (``format._tokens``) and writing it with ``optimize(..., item_loader=TokensLoader())``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from litstream import ConfigurationError, FormatError, StreamingDataset, TokensLoader, WorkerError, optimize
from litstream.format._chunk import ChunkView, pack_chunk
from litstream.format._index import ChunkInfo, DatasetConfig
from litstream.format._tokens import TokenBlocks, TokenEncoder, check_item_loader

if TYPE_CHECKING:
    from pathlib import Path


def test_encoder_strips_the_size_header_and_counts_tokens() -> None:
    encoder = TokenEncoder()
    item, dim = encoder.encode_item(np.array([1, 2, 3], dtype=np.int32))
    assert item == np.array([1, 2, 3], dtype="<i4").tobytes()
    assert dim == 3
    assert encoder.data_format == ("no_header_numpy:2",)
    item, dim = encoder.encode_item(np.array([7], dtype=np.int32))
    assert (item, dim) == (b"\x07\x00\x00\x00", 1)


def test_a_single_array_inside_a_container_is_its_token_array() -> None:
    """As in LitData: the sample's one leaf is the token array, whatever the container."""
    item, dim = TokenEncoder().encode_item({"ids": np.arange(3, dtype=np.int32)})
    assert (item, dim) == (np.arange(3, dtype="<i4").tobytes(), 3)


def test_encoder_tensor_tokens() -> None:
    encoder = TokenEncoder()
    item, dim = encoder.encode_item(torch.tensor([5, 6], dtype=torch.int16))
    assert (item, dim) == (b"\x05\x00\x06\x00", 2)
    assert encoder.data_format[0].startswith("no_header_tensor:")


@pytest.mark.parametrize(
    ("sample", "stored"),
    [
        ({"ids": np.arange(3, dtype=np.int64), "label": 1}, "['no_header_numpy:3', 'int']"),
        ([1, 2, 3], "['int', 'int', 'int']"),
        (np.zeros((2, 2), dtype=np.int32), "['numpy']"),
    ],
)
def test_encoder_refuses_anything_but_one_1d_array(sample: object, stored: str) -> None:
    with pytest.raises(FormatError, match=r"TokensLoader samples must be one 1-D NumPy array or torch tensor") as info:
        TokenEncoder().encode_item(sample)
    assert f"stored as {stored}" in str(info.value)


def test_encoder_refuses_a_dtype_change() -> None:
    encoder = TokenEncoder()
    encoder.encode_item(np.arange(3, dtype=np.int32))
    with pytest.raises(
        FormatError, match=r"encodes as 'no_header_numpy:\d+' but the first sample fixed 'no_header_numpy:2'"
    ):
        encoder.encode_item(np.arange(3, dtype=np.int64))


def test_blocks_view_of_a_chunk() -> None:
    arrays = [np.arange(0, 5, dtype="<u2").tobytes(), np.arange(5, 12, dtype="<u2").tobytes()]
    data = pack_chunk(arrays)
    blocks = TokenBlocks(data, block_bytes=3 * 2, num_blocks=12 // 3)
    assert blocks.num_arrays == 2
    assert blocks.offsets.tolist() == [16, 26, 40]
    assert blocks.num_items == 4
    assert [np.frombuffer(blocks.item(i), dtype="<u2").tolist() for i in range(4)] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
        [9, 10, 11],
    ]
    with pytest.raises(FormatError, match="block 4 is outside this chunk of 4 blocks"):
        blocks.item(4)
    with pytest.raises(FormatError, match=r"token chunk of 30 bytes is shorter than its 4 blocks need \(40\)"):
        TokenBlocks(data[:30], block_bytes=6, num_blocks=4)


def _config(data_format: str, item_loader: str | None = "TokensLoader") -> DatasetConfig:
    return DatasetConfig(data_format=(data_format,), data_spec=None, chunk_size=10, item_loader=item_loader)


def test_layout_from_the_index() -> None:
    chunks = [ChunkInfo("chunk-0-0.bin", 3, 100, dim=20), ChunkInfo("chunk-0-1.bin", 1, 40, dim=7)]
    layout = check_item_loader("d", _config("no_header_numpy:5"), chunks, TokensLoader(6))  # uint16
    assert layout is not None
    assert (layout.block_size, layout.itemsize, layout.blocks, layout.arrays) == (6, 2, (3, 1), (3, 1))
    assert layout.block_span(0, 2) == (4 * 5 + 2 * 12, 12)
    assert layout.block_span(1, 0) == (4 * 3, 12)
    with pytest.raises(FormatError, match=r"block 1 is outside chunk 1 \(1 blocks\)"):
        layout.block_span(1, 1)
    view = layout.view(0, ChunkView(pack_chunk([bytes(40)])))
    assert view.num_items == 3


def test_layout_checks() -> None:
    chunks = [ChunkInfo("chunk-0-0.bin", 3, 100, dim=None)]
    with pytest.raises(FormatError, match=r"d: index.json gives no token count \(dim\) for \['chunk-0-0.bin'\]"):
        check_item_loader("d", _config("no_header_numpy:3"), chunks, TokensLoader(6))
    with pytest.raises(FormatError, match=r"d has data_format \['numpy'\]; TokensLoader reads a single no_header"):
        check_item_loader("d", _config("numpy"), chunks, TokensLoader(6))
    # No item_loader key (older LitData indexes): a single no_header_tensor leaf means tokens.
    with pytest.raises(
        ConfigurationError, match=r"written with item_loader='TokensLoader' but is read with PyTreeLoader"
    ):
        check_item_loader("d", _config("no_header_tensor:16", None), chunks, None)
    assert check_item_loader("d", _config("no_header_numpy:3", None), chunks, None) is None
    with pytest.raises(
        FormatError, match=r"written with item_loader='ParquetLoader'; litstream reads PyTreeLoader and"
    ):
        check_item_loader("d", _config("int", "ParquetLoader"), chunks, None)


def test_state_dict_and_repr() -> None:
    assert TokensLoader(16).state_dict() == {"block_size": 16}
    assert TokensLoader().state_dict() == {"block_size": None}
    assert repr(TokensLoader(3)) == "TokensLoader(block_size=3)"


# -- optimize --------------------------------------------------------------------------------------------


def _index(directory: Path) -> dict[str, object]:
    result: dict[str, object] = json.loads((directory / "index.json").read_text())
    return result


def test_chunk_size_counts_tokens_and_an_oversize_array_is_its_own_chunk(tmp_path: Path) -> None:
    lengths = [4, 4, 30, 2, 5, 5]
    optimize(
        lambda n: np.ones(n, dtype=np.int64),
        lengths,
        tmp_path,
        chunk_size=10,
        item_loader=TokensLoader(),
        num_workers=1,
        verbose=False,
    )
    chunks = _index(tmp_path)["chunks"]
    assert isinstance(chunks, list)
    assert [(c["chunk_size"], c["dim"], c["chunk_bytes"]) for c in chunks] == [
        (2, 8, 4 * 4 + 64),
        (1, 30, 4 * 3 + 240),
        (2, 7, 4 * 4 + 56),
        (1, 5, 4 * 3 + 40),
    ]


def test_chunk_bytes_counts_token_bytes(tmp_path: Path) -> None:
    optimize(
        lambda n: np.ones(n, dtype=np.int32),
        [3, 3, 3, 3, 3],
        tmp_path,
        chunk_bytes=24,
        item_loader=TokensLoader(),
        num_workers=1,
        verbose=False,
    )
    chunks = _index(tmp_path)["chunks"]
    assert isinstance(chunks, list)
    assert [(c["chunk_size"], c["dim"]) for c in chunks] == [(2, 6), (2, 6), (1, 3)]


def test_empty_arrays_count_as_one_toward_chunk_size(tmp_path: Path) -> None:
    """LitData counts an item without tokens as 1 toward chunk_size; its bytes are nothing."""
    optimize(
        lambda n: np.arange(n, dtype=np.int32),
        [2, 0, 2, 0, 3],
        tmp_path,
        chunk_size=4,
        item_loader=TokensLoader(),
        num_workers=1,
        verbose=False,
    )
    chunks = _index(tmp_path)["chunks"]
    assert isinstance(chunks, list)
    assert [(c["chunk_size"], c["dim"]) for c in chunks] == [(2, 2), (2, 2), (1, 3)]
    windows = [w.tolist() for w in StreamingDataset(tmp_path, item_loader=TokensLoader(2))]
    assert windows == [[0, 1], [0, 1], [0, 1]]


def test_a_sample_that_is_not_a_token_array_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"FormatError: TokensLoader samples must be one 1-D NumPy array"):
        optimize(
            lambda i: {"ids": np.arange(3), "label": i},
            [0, 1],
            tmp_path,
            chunk_size=10,
            item_loader=TokensLoader(),
            num_workers=1,
            verbose=False,
        )
    assert not (tmp_path / "index.json").exists()


def test_optimize_refuses_another_loader(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigurationError, match=r"item_loader='tokens' is not supported; use PyTreeLoader\(\) or TokensLoader\(\)"
    ):
        optimize(lambda i: i, [1], tmp_path, chunk_size=1, item_loader="tokens", verbose=False)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
