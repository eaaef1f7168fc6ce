"""Which member each sample of a ``CombinedStreamingDataset`` comes from (pure: no I/O, no event loop).

One reader (a DataLoader worker, or the process) of a combined dataset holds one stream per member
(its share of that member, see ``read.plan._compose``). :func:`mix_order` is the sequence of member ids
it serves, a pure function of the stream lengths, the weights, the seed and the mixing options —
so a checkpoint needs only the number of samples served: the members' positions and the random
state follow by replaying the sequence.

The draws follow LitData's ``_CombinedDatasetIterator``: one ``random.Random(seed)`` per reader (the
same seed on every worker and rank), one weighted ``choices`` draw per sample (``"stratified"``) or
per run of ``batch_size`` samples (``"per_stream"``, a new run always switches member while more
than one is left). A member found exhausted when it is drawn is removed; with ``iterate_over_all``
the draw is repeated among the others and the last member left is served without drawing,
otherwise the first exhausted draw ends the stream. Members of weight 0 are never drawn. The
random numbers, the weights (renormalised as LitData does when a member is removed) and so the
sequence are LitData's, for the same member streams (tested against LitData).
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from array import array
from collections import Counter
from typing import TYPE_CHECKING, Literal, TypeAlias

from ..._core._errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BATCHING_METHODS", "BatchingMethod", "check_batching_method", "mix_order", "normalize_weights"]

BatchingMethod: TypeAlias = Literal["stratified", "per_stream"]
BATCHING_METHODS: tuple[str, ...] = ("stratified", "per_stream")


def check_batching_method(batching_method: object) -> BatchingMethod:
    """Return ``batching_method`` if it is one of LitData's names.

    Raises:
        ConfigurationError: any other value.
    """
    if batching_method == "stratified":
        return "stratified"
    if batching_method == "per_stream":
        return "per_stream"
    raise ConfigurationError(
        f"batching_method must be 'stratified' (draw a member for every sample) or 'per_stream' (draw a member "
        f"for every run of batch_size samples), got {batching_method!r}"
    )


def normalize_weights(weights: Sequence[object], num_members: int) -> tuple[float, ...]:
    """``weights`` divided by their sum (LitData normalises explicit weights the same way).

    Raises:
        ConfigurationError: a count other than ``num_members``, a weight that is not a finite real
            number >= 0, or weights summing to 0.
    """
    values = list(weights)
    if len(values) != num_members:
        raise ConfigurationError(
            f"weights has {len(values)} entries but there are {num_members} datasets; pass one weight per dataset"
        )
    numbers: list[float] = []
    for w in values:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ConfigurationError(f"weights must be finite numbers >= 0, got {w!r} in {values!r}")
        numbers.append(float(w))
    total = sum(numbers)  # a plain sum in order, as LitData, for the same normalised values
    if total <= 0:
        raise ConfigurationError(f"weights must not all be 0, got {values!r}; give at least one dataset a weight > 0")
    return tuple(w / total for w in numbers)


@functools.lru_cache(maxsize=64)
def mix_order(
    lengths: tuple[int, ...],
    weights: tuple[float, ...],
    *,
    seed: int,
    iterate_over_all: bool,
    batching_method: BatchingMethod = "stratified",
    batch_size: int = 1,
) -> array[int]:
    """The member id of every sample one reader serves, in order (see the module docstring).

    Args:
        lengths: Samples in this reader's stream of each member.
        weights: Relative weight of each member (any scale; 0 means never drawn).
        seed: Seed of the reader's ``random.Random``.
        iterate_over_all: Go on until every member is exhausted (else stop at the first exhausted draw).
        batching_method: ``"stratified"`` or ``"per_stream"``.
        batch_size: Run length with ``"per_stream"``.

    Returns:
        An ``array('l')`` of member ids; member ``i`` appears at most ``lengths[i]`` times (exactly
        that often with ``iterate_over_all``, for members of weight > 0). Cached: do not modify it.
    """
    rng = random.Random(seed)
    left = list(lengths)
    alive = [i for i, w in enumerate(weights) if w > 0]
    current_weights = list(weights)
    cum = list(itertools.accumulate(weights[i] for i in alive))
    out: array[int] = array("l")
    current, run = -1, 0
    stratified = batching_method == "stratified"

    def draw() -> int:
        return rng.choices(alive, cum_weights=cum, k=1)[0]

    while alive:
        if iterate_over_all and len(alive) == 1:
            member = alive[0]  # the last member left is served without drawing
            if left[member]:
                out.extend([member] * left[member])
                left[member] = 0
                continue
        elif stratified:
            # Draws that cannot hit an exhausted member can be made in one call: the same random
            # numbers, in the same order, as one call per sample (random.choices with k=n).
            block = min(left[i] for i in alive)
            if block > 1:
                draws = rng.choices(alive, cum_weights=cum, k=block)
                out.extend(draws)
                for i, n in Counter(draws).items():
                    left[i] -= n
                continue
            member = draw()
        elif current in alive and run < batch_size:
            member = current
        else:
            member = draw()
            while member == current and len(alive) > 1:
                member = draw()
            run = 0
        if left[member] == 0:
            if not iterate_over_all:
                break
            alive.remove(member)
            if alive:  # renormalise the rest, as LitData does, so the draws stay identical to its draws
                total = sum(current_weights[i] for i in alive)
                current_weights = [w / total if total else w for w in current_weights]
            cum = list(itertools.accumulate(current_weights[i] for i in alive))
            continue
        left[member] -= 1
        out.append(member)
        current = member
        run += 1
    return out
