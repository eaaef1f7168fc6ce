"""Combined/Parallel over plain iterables: LitData 0.2.76 refuses them, and so does litstream (with a clear error).

Issue 13 said LitData mixes and zips a ``range``, a list or a user's ``IterableDataset``; LitData 0.2.76
does not (``_BaseStreamingDatasetWrapper._check_datasets`` raises ``RuntimeError``). This test keeps
the two libraries' behaviour side by side, so that a LitData release that starts accepting them is
noticed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from torch.utils.data import IterableDataset

import litstream
from litstream import ConfigurationError
from peer import require_peer

if TYPE_CHECKING:
    from collections.abc import Iterator

litdata = require_peer("litdata")

pytestmark = pytest.mark.litdata


class _Numbers(IterableDataset[int]):
    def __iter__(self) -> Iterator[int]:
        return iter(range(100, 105))

    def __len__(self) -> int:
        return 5


@pytest.mark.parametrize("wrapper", ["CombinedStreamingDataset", "ParallelStreamingDataset"])
@pytest.mark.parametrize(
    "members",
    [lambda: [range(5), [10, 11, 12]], lambda: [_Numbers(), range(3)]],
    ids=["range-and-list", "iterable-dataset-and-range"],
)
def test_plain_iterables_are_refused_by_both(wrapper: str, members: Any) -> None:
    with pytest.raises(RuntimeError, match="should be instances of the StreamingDataset"):
        getattr(litdata, wrapper)(members())
    with pytest.raises(ConfigurationError, match=r"datasets\[0\] is a \w+; every dataset must be a StreamingDataset"):
        getattr(litstream, wrapper)(members())
