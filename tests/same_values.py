"""One deep equality for test values (batches, samples, collated trees): :func:`assert_same`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["assert_same"]


def assert_same(a: Any, b: Any, *, arrays_writeable: bool = False) -> None:
    """``a`` and ``b`` are the same value, down to each leaf's type.

    Tensors and NumPy arrays: the same dtype, shape and elements; dicts: the same keys in the same order;
    lists and tuples: the same length; other leaves: ``==``. ``arrays_writeable``: every NumPy array on
    both sides must also be writeable.
    """
    assert type(a) is type(b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        assert np.array_equal(a, b)
        if arrays_writeable:
            assert a.flags.writeable
            assert b.flags.writeable
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert_same(a[key], b[key], arrays_writeable=arrays_writeable)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y, arrays_writeable=arrays_writeable)
    else:
        assert a == b
