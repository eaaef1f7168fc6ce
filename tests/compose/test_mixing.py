"""The pure mixing sequence of ``read._mixing`` (no I/O)."""

from __future__ import annotations

from collections import Counter
from itertools import groupby, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litstream import ConfigurationError
from litstream.read.plan._mixing import check_batching_method, mix_order, normalize_weights


def test_explicit_weights_are_normalised() -> None:
    assert normalize_weights([2, 0.5], 2) == (0.8, 0.2)
    assert normalize_weights([1, 1, 1], 3) == (1 / 3, 1 / 3, 1 / 3)
    assert normalize_weights([0.3, 0, 0], 3) == (1.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1.0], "weights has 1 entries but there are 2 datasets; pass one weight per dataset"),
        ([1.0, -1.0], "weights must be finite numbers >= 0, got -1.0 in [1.0, -1.0]"),
        ([1.0, float("nan")], "weights must be finite numbers >= 0, got nan in [1.0, nan]"),
        ([0, 0.0], "weights must not all be 0, got [0, 0.0]; give at least one dataset a weight > 0"),
        ([True, 1], "weights must be finite numbers >= 0, got True in [True, 1]"),
    ],
)
def test_bad_weights_are_rejected(weights: list[float], message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        normalize_weights(weights, 2)
    assert str(info.value) == message


def test_batching_method_names() -> None:
    assert check_batching_method("stratified") == "stratified"
    assert check_batching_method("per_stream") == "per_stream"
    with pytest.raises(ConfigurationError, match=r"batching_method must be 'stratified' .* got 'mixed'"):
        check_batching_method("mixed")


def test_weighted_draws_follow_the_weights_over_10000_samples() -> None:
    weights = (0.2, 0.5, 0.3)
    order = mix_order((10**6,) * 3, weights, seed=42, iterate_over_all=False)
    first = Counter(order[:10_000])
    for member, w in enumerate(weights):
        assert abs(first[member] / 10_000 - w) <= 0.02, (member, first[member])


def test_iterate_over_all_serves_every_item_of_every_member_once() -> None:
    lengths = (7, 0, 31, 2)
    order = mix_order(lengths, (0.1, 0.0, 0.6, 0.3), seed=3, iterate_over_all=True)
    assert Counter(order) == {0: 7, 2: 31, 3: 2}


def test_a_zero_weight_member_is_never_drawn_and_the_first_exhausted_draw_ends() -> None:
    order = mix_order((5, 100, 100), (1.0, 0.0, 0.0), seed=0, iterate_over_all=False)
    assert list(order) == [0] * 5
    order = mix_order((3, 1000), (0.5, 0.5), seed=1, iterate_over_all=False)
    counts = Counter(order)
    assert counts[0] == 3  # member 0 ran out; the draw after that ended the stream
    assert 0 < counts[1] < 1000


def test_per_stream_serves_runs_of_batch_size_that_switch_member() -> None:
    order = list(
        mix_order(
            (40, 40, 40),
            (1 / 3, 1 / 3, 1 / 3),
            seed=7,
            iterate_over_all=False,
            batching_method="per_stream",
            batch_size=4,
        )
    )
    runs = [(member, len(list(group))) for member, group in groupby(order)]
    assert all(size == 4 for _, size in runs[:-1])
    assert all(a != b for (a, _), (b, _) in pairwise(runs))


def test_the_sequence_depends_on_the_seed_only() -> None:
    a = mix_order((50, 50), (0.5, 0.5), seed=1, iterate_over_all=True)
    assert list(a) == list(mix_order((50, 50), (0.5, 0.5), seed=1, iterate_over_all=True))
    assert list(a) != list(mix_order((50, 50), (0.5, 0.5), seed=2, iterate_over_all=True))


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 30), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    per_stream=st.booleans(),
    batch_size=st.integers(1, 5),
)
def test_iterate_over_all_is_exact_for_any_lengths(
    lengths: list[int], seed: int, per_stream: bool, batch_size: int
) -> None:
    weights = tuple(float(n) for n in lengths) if sum(lengths) else tuple(1.0 for _ in lengths)
    order = mix_order(
        tuple(lengths),
        weights,
        seed=seed,
        iterate_over_all=True,
        batching_method="per_stream" if per_stream else "stratified",
        batch_size=batch_size,
    )
    assert Counter(order) == Counter({i: n for i, n in enumerate(lengths) if n})


def _one_draw_per_sample(lengths: list[int], weights: list[float], seed: int, iterate_over_all: bool) -> list[int]:
    """LitData's stratified loop, written plainly: one ``choices`` call per sample, renormalising on removal."""
    import random

    rng = random.Random(seed)
    left = list(lengths)
    pool: list[int | None] = list(range(len(lengths)))
    w: list[float | None] = list(weights)
    out: list[int] = []
    while True:
        indexes = [i for i in pool if i is not None]
        if iterate_over_all and len(indexes) == 1:
            member = indexes[0]
        else:
            member = rng.choices(indexes, weights=[x for x in w if x is not None], k=1)[0]
        if left[member] == 0:
            if not iterate_over_all or len(indexes) == 1:
                return out
            pool[member], w[member] = None, None
            total = sum(x for x in w if x is not None)
            w = [None if x is None else x / total for x in w]
            continue
        left[member] -= 1
        out.append(member)


@settings(max_examples=150, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    raw=st.lists(st.floats(0.01, 10), min_size=4, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    iterate_over_all=st.booleans(),
)
def test_batched_draws_equal_one_draw_per_sample(
    lengths: list[int], raw: list[float], seed: int, iterate_over_all: bool
) -> None:
    weights = normalize_weights(raw[: len(lengths)], len(lengths))
    got = mix_order(tuple(lengths), weights, seed=seed, iterate_over_all=iterate_over_all)
    assert list(got) == _one_draw_per_sample(lengths, list(weights), seed, iterate_over_all)
