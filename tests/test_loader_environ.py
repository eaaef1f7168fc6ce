"""``StreamingDataLoader`` workers see the environment of the moment the loader's iterator started them.

A fork server's children inherit the server's environment, fixed when it started; the loader hands its
``forkserver`` and ``spawn`` workers the environment of the iterating process instead (``WorkerSetup``), so
they see what ``fork`` workers (the control) see.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import pytest

import litstream

SET_LATER = "LITSTREAM_TEST_LOADER_MARKER"  # set after the workers' fork server started
PLAIN_SET_LATER = "PLAIN_TEST_LOADER_MARKER"
REMOVED_LATER = "LITSTREAM_TEST_LOADER_REMOVED"  # set before, removed after
ITEMS = 8

_AT_INIT: dict[str, str] = {}  # what worker_init_fn saw, in this worker


def _sample(i: int) -> dict[str, int]:
    return {"i": i}


def _seen() -> str:
    return "|".join(os.environ.get(name, "-") for name in (SET_LATER, PLAIN_SET_LATER, REMOVED_LATER))


def _note_at_init(worker_id: int) -> None:
    _AT_INIT["seen"] = _seen()


def _with_environment(sample: dict[str, Any]) -> dict[str, Any]:
    return {**sample, "transform": _seen(), "init": _AT_INIT.get("seen", "no worker_init_fn")}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("environ") / "ds")
    litstream.optimize(fn=_sample, inputs=list(range(ITEMS)), output_dir=out, chunk_size=4, num_workers=1,
                       verbose=False)  # fmt: skip
    return out


def _seen_by_workers(data: str, context: str) -> tuple[list[int], set[str]]:
    dataset = litstream.StreamingDataset(data, transform=_with_environment)
    loader = litstream.StreamingDataLoader(dataset, batch_size=2, num_workers=2, multiprocessing_context=context,
                                           worker_init_fn=_note_at_init)  # fmt: skip
    items: list[int] = []
    seen: set[str] = set()
    for batch in loader:
        items.extend(int(i) for i in batch["i"])
        seen.update(batch["transform"])
        seen.update(batch["init"])
    return sorted(items), seen


@pytest.mark.parametrize("context", [pytest.param("fork", marks=pytest.mark.forks), "forkserver", "spawn"])
def test_workers_see_the_environment_of_the_iterator_start(
    data: str, context: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SET_LATER, raising=False)
    monkeypatch.delenv(PLAIN_SET_LATER, raising=False)
    monkeypatch.setenv(REMOVED_LATER, "set before")
    # The first epoch starts the fork server (forkserver) with the environment of now.
    assert _seen_by_workers(data, context) == (list(range(ITEMS)), {"-|-|set before"})

    monkeypatch.setenv(SET_LATER, "set after the server started")
    monkeypatch.setenv(PLAIN_SET_LATER, "plain")
    monkeypatch.delenv(REMOVED_LATER)
    assert _seen_by_workers(data, context) == (list(range(ITEMS)), {"set after the server started|plain|-"})


def test_a_pickled_loader_carries_no_environment(data: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment (credentials, tokens) is handed to workers only while they start, not kept."""
    monkeypatch.setenv(SET_LATER, "a secret")
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=2, num_workers=1,
                                           multiprocessing_context="forkserver")  # fmt: skip
    assert sorted(int(i) for batch in loader for i in batch["i"]) == list(range(ITEMS))
    assert b"a secret" not in pickle.dumps(loader.worker_init_fn)
