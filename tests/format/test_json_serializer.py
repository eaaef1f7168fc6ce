"""The ``json`` leaf encoding: byte-identical to LitData 0.2.76's, and strict on malformed payloads."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litstream import FormatError
from litstream.format._json_serializer import JsonLeaf, JsonSerializer, dumps, loads
from litstream.format._serializers import default_serializers, select_serializer
from peer import require_peer

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=5)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.lists(st.dictionaries(st.sampled_from("abc"), scalars, min_size=3, max_size=3), max_size=3)
    ),
    max_leaves=10,
)


@pytest.mark.litdata
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=values)
def test_same_bytes_as_litdata_both_ways(value: Any) -> None:
    litdata_serializers = require_peer("litdata.streaming.serializers")
    theirs = litdata_serializers.JsonSerializer()
    ours, _ = JsonSerializer().serialize(JsonLeaf(value))
    assert ours == theirs.serialize(litdata_serializers.JsonLeaf(value))[0]
    assert loads(ours) == value
    assert theirs.deserialize(ours) == value


def test_registry_claims_only_marked_values() -> None:
    registry = default_serializers()
    assert select_serializer(JsonLeaf([1, 2]), registry).name == "json"
    assert select_serializer([1, 2], registry).name == "pickle"  # plain lists are flattened before this
    assert dumps([]) == b"\x01\x00\x00\x00\x00"
    assert loads(b'[1, "a"]') == [1, "a"]  # older LitData wrote plain JSON text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=values, cut=st.integers(0, 40), junk=st.binary(max_size=30))
def test_malformed_payloads_raise_format_error(value: Any, cut: int, junk: bytes) -> None:
    data = dumps(value)
    for bad in (data[: max(0, len(data) - 1 - cut)], junk, data + b"\x00"):
        try:
            loads(bad)
        except FormatError:
            pass


def test_unknown_tag_and_huge_counts() -> None:
    with pytest.raises(FormatError, match="unknown tag 12"):
        loads(b"\x0c")
    with pytest.raises(FormatError, match="announces 4294967295 entries"):
        loads(b"\x02\xff\xff\xff\xff")
    with pytest.raises(FormatError, match="after its value"):
        loads(dumps(1) + b"x")
