"""Encoding errors name where in the sample the problem is (``sample['a'][1]``) and show structures as skeletons."""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque

import numpy as np
import pytest

from litstream import FormatError
from litstream.format._loaders import SampleEncoder
from litstream.format._pytree import leaf_paths, spec_outline, tree_flatten


def test_outline_and_paths_of_every_container() -> None:
    sample = {
        "a": 1,
        "b": [2, (3,)],
        "c": OrderedDict(x=4),
        "d": defaultdict(int, {"y": 5}),
        "e": deque([6, 7]),
    }
    _, spec = tree_flatten(sample)
    assert spec_outline(spec) == "{'a': _, 'b': [_, (_,)], 'c': {'x': _}, 'd': {'y': _}, 'e': deque([_, _])}"
    assert leaf_paths(spec) == [
        "sample['a']",
        "sample['b'][0]",
        "sample['b'][1][0]",
        "sample['c']['x']",
        "sample['d']['y']",
        "sample['e'][0]",
        "sample['e'][1]",
    ]
    _, leaf = tree_flatten(3)
    assert (spec_outline(leaf), leaf_paths(leaf)) == ("_", ["sample"])


def test_a_long_outline_is_cut() -> None:
    _, spec = tree_flatten({f"key{i}": i for i in range(100)})
    outline = spec_outline(spec, limit=40)
    assert (len(outline), outline[:10], outline[-3:]) == (40, "{'key0': _", "...")


def test_a_changed_leaf_type_names_its_path() -> None:
    encoder = SampleEncoder()
    encoder.encode((np.zeros(2, dtype=np.float32), {"label": 1}))
    with pytest.raises(FormatError, match=r"leaf 1 of the sample \(sample\[1\]\['label'\]\) is a str, which the 'int'"):
        encoder.encode((np.zeros(2, dtype=np.float32), {"label": "one"}))


def test_a_changed_structure_shows_both_skeletons() -> None:
    encoder = SampleEncoder()
    encoder.encode(({"a": 1}, 2))
    with pytest.raises(FormatError) as caught:
        encoder.encode(({"c": 1}, 2))
    assert str(caught.value) == (
        "sample structure ({'c': _}, _) differs from the first sample's ({'a': _}, _) (_ is a leaf); "
        "every sample must have the same keys and nesting"
    )
