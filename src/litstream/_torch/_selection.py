"""The part of ``StreamingDataset`` that decides which items it serves: subsample, subset, split.

A mixin so the facade stays configuration plus a portal: the selection itself is computed by the
pure functions of ``read._subset``; this only keeps it on the dataset, copies datasets with another
selection (``subset()``, ``train_test_split``) and checks it against checkpoints.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, TypeVar

from ..read.plan._subset import Selection, check_selection_state, subset_selection

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ..read._source import DatasetSource
    from ..read._spec import ReadSpec
    from ..read.plan._resume import ResumePlan

__all__ = ["SelectionMixin"]

D = TypeVar("D", bound="SelectionMixin")


class SelectionMixin:
    """Selection state and methods of ``StreamingDataset`` (see ``read._subset``)."""

    _selection: Selection | None  # from subset()/train_test_split, or the resolved subsample
    _spec: ReadSpec
    transforms: list[Callable[[Any], Any]]
    current_epoch: int
    _resume_state: dict[str, Any] | None
    _resume: ResumePlan | None

    if TYPE_CHECKING:

        def _get_source(self) -> DatasetSource: ...

    def _selected(self) -> Selection | None:
        """The selection this dataset serves, or ``None`` for every item once in index order."""
        if self._selection is None and self._spec.subsample != 1.0:
            self._selection = self._spec.select(self._get_source().chunk_sizes)
        return self._selection

    @property
    def subsampled_files(self) -> list[str]:
        """The chunk files this dataset reads, in selection order (LitData's attribute): every chunk of
        ``index.json`` unless ``subsample``, ``subset()`` or a split selects fewer. Reads the index."""
        source = self._get_source()
        names = [c.filename for c in source.index.chunks]
        selection = self._selected()
        return names if selection is None else [names[c] for c in selection.chunks]

    @property
    def region_of_interest(self) -> list[tuple[int, int]]:
        """``(start, end)`` items served of each of :attr:`subsampled_files` (LitData's attribute; end exclusive)."""
        selection = self._selected()
        if selection is None:
            return [(0, size) for size in self._get_source().chunk_sizes]
        return [(start, end) for start, end in selection.regions]

    def _plan_inputs(self) -> tuple[list[tuple[int, int]], list[int]]:
        """Regions and chunk bytes of the chunks the plan runs on (the selected ones, if any)."""
        source = self._get_source()
        chunk_bytes = [c.chunk_bytes for c in source.index.chunks]
        selection = self._selected()
        if selection is None:
            return [(0, size) for size in source.chunk_sizes], chunk_bytes
        return list(selection.regions), [chunk_bytes[c] for c in selection.chunks]

    def _restricted_to(self: D, selection: Selection) -> D:
        """A copy serving ``selection`` only, at epoch 1 with no pending checkpoint."""
        new = copy.copy(self)
        new.transforms = list(self.transforms)
        new._selection = selection
        new.current_epoch = 1
        new._resume_state = None
        new._resume = None
        new.__dict__.pop("_shuffler", None)  # another plan: made again on first use
        return new

    def subset(self: D, indices: Sequence[int] | slice) -> D:
        """A copy of this dataset restricted to ``indices`` of it (LitData's ``StreamingDataset.subset``).

        Args:
            indices: 0-based indices into this dataset (``ds[i]`` order), in the order they should
                be served; or a ``slice``. Consecutive indices of one chunk form one region.

        Returns:
            A new ``StreamingDataset`` with the same arguments, at epoch 1, serving those items
            (shuffled, sharded and resumable like any dataset). Nothing is read or written.

        Raises:
            ConfigurationError: (a ``ValueError``) an index outside ``[0, len)`` or not an int.
        """
        base = self._selected() or Selection.full(self._get_source().chunk_sizes)
        return self._restricted_to(subset_selection(base, indices))

    def _selection_config(self) -> dict[str, Any]:
        """LitData's checkpoint keys ``subsampled_files`` / ``region_of_interest``, only when not whole."""
        if self._selection is None and self._spec.subsample == 1.0:
            return {}
        source = self._get_source()
        selection = self._selected() or Selection.full(source.chunk_sizes)
        return selection.state([c.filename for c in source.index.chunks])

    def _check_selection(self, state: Mapping[str, Any]) -> None:
        """Raise ``ConfigurationError`` unless ``state`` was saved by a dataset serving the same items."""
        if self._selection is None and self._spec.subsample == 1.0 and "region_of_interest" not in state:
            return  # both whole datasets: no need to load the index
        source = self._get_source()
        selection = self._selected() or Selection.full(source.chunk_sizes)
        check_selection_state(state, selection, source.chunk_sizes, [c.filename for c in source.index.chunks])
