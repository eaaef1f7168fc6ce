"""``CombinedStreamingDataset``: several ``StreamingDataset`` s mixed into one stream (LitData's name)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, PlanError
from ..read.aio._compose import CombinedSampleStream, Prepared
from ..read.plan._compose import CombinedComposer
from ..read.plan._mixing import BatchingMethod, check_batching_method, normalize_weights
from ..read.plan._session_compose import member_pieces
from ._composite import CompositeDataset, Position

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping, Sequence

    from anyio.from_thread import BlockingPortal

    from ..read.plan._compose import Run
    from ..read.plan._session_compose import AsyncSession
    from ._dataset import StreamingDataset

__all__ = ["CombinedStreamingDataset"]


class CombinedStreamingDataset(CompositeDataset):
    """Mix several :class:`StreamingDataset` s into one stream of samples (LitData's ``CombinedStreamingDataset``).

    Every reader (DataLoader worker, or the process) reads its usual share of every member and draws,
    for each sample, which member it comes from, with ``random.Random(seed)`` (the same seed in every
    worker and rank, as in LitData), weighted by ``weights``.

    Args:
        datasets: The members, each a :class:`StreamingDataset` (configured as usual: shuffle, seed,
            transform, ...; the loader's ``shuffle`` / ``drop_last`` / ``batch_size`` are pushed into
            every member).
        seed: Seed of the mixing draws. Default 42.
        weights: Relative frequency of each member (any scale; normalised to sum 1; a member of
            weight 0 is never drawn). ``None`` (default): proportional to each member's item count
            (LitData's default, case B15). Only with ``iterate_over_all=False``.
        iterate_over_all: ``True`` (default): go on until every member is exhausted, so an epoch
            serves every sample of every member exactly once (an exhausted member is dropped from
            the draws). ``False``: the epoch of a reader ends as soon as it draws an exhausted member.
        batching_method: ``"stratified"`` (default): draw a member for every sample, so a batch mixes
            members. ``"per_stream"``: draw a member for every run of ``batch_size`` samples (a new run
            always switches member while more than one is left), so batches come from one member
            (as long as the runs line up with the batches, i.e. until a member runs out).
        force_override_state_dict: Let ``load_state_dict`` accept a checkpoint saved with other
            settings, warning instead of raising. Default False.
        allow_pickle: ``True`` / ``False`` sets every member's ``allow_pickle`` (see
            :class:`StreamingDataset`); ``None`` (default) keeps each member's own decision.

    Length: ``len(ds)`` is the number of samples this rank serves per epoch: the sum of the members'
    lengths with ``iterate_over_all``, else the exact count of the draws up to the first exhausted
    member (LitData gives ``None`` there). Resume: see ``StreamingDataLoader``; a checkpoint may be
    resumed on another number of workers or ranks (every sample not yet served is then served
    exactly once with ``iterate_over_all``); on the same topology the resumed stream is exactly
    the rest of the uninterrupted one.

    Async: ``async for sample in ds`` or ``async with litstream.astream(ds) as samples`` (see
    :meth:`astream`).

    Raises:
        ConfigurationError: a member that is not a ``StreamingDataset``, ``weights`` together with
            ``iterate_over_all=True``, bad weights, an unknown ``batching_method`` (all at construction).
    """

    _kind = "combined"

    def __init__(
        self,
        datasets: Sequence[StreamingDataset],
        seed: int = 42,
        weights: Sequence[float] | None = None,
        iterate_over_all: bool = True,
        batching_method: BatchingMethod = "stratified",
        force_override_state_dict: bool = False,
        allow_pickle: bool | None = None,
    ) -> None:
        super().__init__(datasets, force_override_state_dict, allow_pickle)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise ConfigurationError(f"seed must be an int in [0, 2**32), got {seed!r}")
        if not isinstance(iterate_over_all, bool):
            raise ConfigurationError(f"iterate_over_all must be a bool, got {iterate_over_all!r}")
        if iterate_over_all and weights is not None:
            raise ConfigurationError(
                f"weights={list(weights)!r} cannot be used with iterate_over_all=True (every sample of every dataset "
                "is served once, so the mix follows the dataset sizes); pass iterate_over_all=False to sample by weight"
            )
        self.seed = seed
        self.iterate_over_all = iterate_over_all
        self.batching_method = check_batching_method(batching_method)
        self._explicit_weights = None if weights is None else normalize_weights(weights, len(self._datasets))
        self._default_weights: tuple[float, ...] | None = None

    @property
    def weights(self) -> tuple[float, ...]:
        """The normalised weights (summing to 1); by default proportional to each member's item count."""
        if self._explicit_weights is not None:
            return self._explicit_weights
        if self._default_weights is None:
            sizes = [len(d._reader.source()) for d in self._datasets]
            total = sum(sizes)
            self._default_weights = tuple(n / total if total else 1 / len(sizes) for n in sizes)
        return self._default_weights

    def _config(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "weights": list(self.weights),
            "iterate_over_all": self.iterate_over_all,
            "batching_method": self.batching_method,
        }

    def _composer(self) -> CombinedComposer:
        return CombinedComposer(self._members(), self.weights, self.seed, self.iterate_over_all, self.batching_method)

    def _emit(
        self, streams: list[list[Run]], count: int, portal: BlockingPortal, where: Position
    ) -> Generator[Any, None, None]:
        composer = self._composer()
        order = composer.order(streams, self.batch_size)
        pieces = member_pieces(composer, streams, count, self.batch_size)
        members = [
            d._open_reader().samples(p, portal, len(self._datasets))
            for d, p in zip(self._datasets, pieces, strict=True)
        ]
        try:
            for member in order[count:]:
                try:
                    yield next(members[member])
                except StopIteration:
                    raise PlanError(
                        f"dataset {member} ran out before its planned share (global worker {where.worker})"
                    ) from None
        finally:
            for it in members:
                it.close()

    def _stream(
        self, open_session: Callable[[], AsyncSession], batch_size: int, state: Mapping[str, Any] | None
    ) -> CombinedSampleStream:

        def prepare() -> Prepared:
            composer, session, members, checkpoint = open_session()
            assert isinstance(composer, CombinedComposer)
            return Prepared(members, composer.order(session.streams, batch_size), session.count, checkpoint)

        return CombinedSampleStream(prepare, state)
