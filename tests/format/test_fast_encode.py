"""The encoder's fast path gives the same bytes (and errors) as the general path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from litstream import FormatError
from litstream.format._loaders import SampleEncoder


def _general(samples: list[Any]) -> list[bytes]:
    encoder = SampleEncoder(fast_path=False)
    return [encoder.encode(s) for s in samples]


def _fast(samples: list[Any]) -> tuple[list[bytes], SampleEncoder]:
    encoder = SampleEncoder()
    return [encoder.encode(s) for s in samples], encoder


CASES: dict[str, list[Any]] = {
    "dict": [
        {"img": np.full((3, 4), i, np.uint8), "y": i, "s": "é" * i, "f": i / 3, "b": i % 2 == 0} for i in range(5)
    ],
    "tuple": [(np.arange(6, dtype=np.float32).reshape(2, 3) * i, b"x" * i) for i in range(4)],
    "list": [[i, str(i)] for i in range(4)],
    "single": [np.full((2, 2), i, np.int64) for i in range(3)],
    "other shapes and dtypes later": [
        {"a": np.zeros((2, 2), np.uint8)},
        {"a": np.ones((3, 1), np.float64)},
        {"a": np.arange(4, dtype=">i4").reshape(2, 2)},  # big-endian: converted by the general path
        {"a": np.arange(8, dtype=np.int16).reshape(2, 4)[:, ::2]},  # not contiguous
        {"a": np.arange(3)},  # 1-D under the "numpy" format
    ],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_path_bytes_equal_general_path(name: str) -> None:
    samples = CASES[name]
    fast, encoder = _fast(samples)
    assert encoder._fast is not None
    assert fast == _general(samples)


def test_layouts_without_a_fast_path_use_the_general_path() -> None:
    nested = [{"a": {"b": i}} for i in range(3)]
    fast, encoder = _fast(nested)
    assert encoder._fast is None
    assert fast == _general(nested)


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ({"y": 2**63, "s": "a"}, r"int 9223372036854775808 does not fit in int64"),
        ({"y": "1", "s": "a"}, r"leaf 0 of the sample \(sample\['y'\]\) is a str"),
        ({"y": 1}, r"differs from the first sample's"),
        ({"y": 1, "s": "a", "extra": 2}, r"differs from the first sample's"),
        ({"y": 1, "s": "\ud800"}, r"cannot encode string as UTF-8"),
    ],
)
def test_errors_come_from_the_general_path(second: dict[str, Any], message: str) -> None:
    encoder = SampleEncoder()
    encoder.encode({"y": 1, "s": "a"})
    with pytest.raises(FormatError, match=message):
        encoder.encode(second)


def test_dict_keys_follow_the_first_sample_order() -> None:
    # LitData 0.2.76 puts the fields of every dict sample in the first sample's key order
    encoder = SampleEncoder()
    assert encoder.encode({"s": "a", "y": 1}) == encoder.encode({"y": 1, "s": "a"})
