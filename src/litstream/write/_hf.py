"""``optimize_hf``: a Hugging Face Hub Parquet dataset converted into litstream chunks."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._core._bridge import run_sync
from .._core._errors import DatasetNotFoundError, ObjectNotFoundError
from ..format._index import INDEX_FILENAME
from ..index._hf import hub_url
from ..storage._resolver import store_for
from ._optimize import optimize

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

__all__ = ["optimize_hf"]


@dataclass(frozen=True)
class _HubRows:
    """``optimize``'s ``fn`` for :func:`optimize_hf`: one Parquet file name in, its rows (or ``fn(row)``) out."""

    url: str
    storage_options: Mapping[str, Any] | None
    columns: Sequence[str] | None
    fn: Callable[[dict[str, Any]], Any] | None

    def __call__(self, name: str) -> Iterator[Any]:
        import pyarrow.parquet as pq

        store = store_for(self.url, self.storage_options)
        blob = run_sync(store.get, name)
        table = pq.read_table(io.BytesIO(blob), columns=list(self.columns) if self.columns else None)
        for row in table.to_pylist():
            yield row if self.fn is None else self.fn(row)


def optimize_hf(
    name: str,
    output_dir: str,
    revision: str | None = None,
    split: str | None = None,
    config: str | None = None,
    chunk_size: int | None = None,
    chunk_bytes: int | str | None = None,
    fn: Callable[[dict[str, Any]], Any] | None = None,
    num_workers: int | None = None,
    columns: list[str] | None = None,
    overwrite: bool = False,
    cache_dir: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **optimize_kwargs: Any,
) -> str:
    """Convert the Parquet files of a Hub dataset into an optimized dataset (LitData's ``optimize_hf`` names).

    The ``*.parquet`` files of ``hf://datasets/<name>[@revision][/<config>]`` (those whose name starts with
    ``split``, or that sit in a ``split`` folder, when ``split`` is given) are read whole, one per input,
    and each row (a ``dict``, or ``fn(row)``) becomes one sample, written by :func:`~litstream.optimize` in
    256 MB chunks unless ``chunk_size``/``chunk_bytes`` says otherwise. Unlike LitData, the Hub's
    ``refs/convert/parquet`` branch is not searched (pass ``revision="refs/convert/parquet"``), Parquet files
    are not kept on disk, and nested columns stay Python lists/dicts.

    Args:
        name: ``org/name`` or an ``hf://datasets/...`` URL.
        output_dir: Where the optimized dataset goes (local or a URL).
        revision: Git revision (branch, tag, commit). Default: the Hub's default branch.
        split: Keep only this split's files.
        config: A sub-folder of the repository (a dataset config).
        chunk_size: Samples per chunk.
        chunk_bytes: Bytes per chunk (default ``"256MB"`` when ``chunk_size`` is not given).
        fn: Maps a row to a sample (picklable). Default: the row.
        num_workers: ``optimize`` workers. Default: ``min(files, CPUs)``.
        columns: Read only these columns.
        overwrite: Convert again even when ``output_dir`` holds an ``index.json``.
        cache_dir: Accepted for LitData's signature; unused (nothing is kept).
        storage_options: For the Hub: ``endpoint``, ``token``, ``revision``, ``headers``; ``HF_TOKEN`` works.
        **optimize_kwargs: More :func:`~litstream.optimize` arguments (``compression``, ``mode``, ...).

    Returns:
        ``output_dir``.

    Raises:
        ConfigurationError: a bad ``name``.
        DatasetNotFoundError: no Parquet file matched.
    """
    del cache_dir
    if not overwrite:
        try:
            run_sync(store_for(output_dir).head, INDEX_FILENAME)
        except ObjectNotFoundError:
            pass
        else:
            return output_dir
    url = hub_url(name, revision, config)
    listing = run_sync(store_for(url, storage_options).list)
    names = sorted(m.path for m in listing if m.path.endswith(".parquet"))
    if split is not None:
        names = [n for n in names if n.rsplit("/", 1)[-1].startswith(split) or f"/{split}/" in f"/{n}"]
    if not names:
        raise DatasetNotFoundError(f"{url} holds no *.parquet file{f' for split {split!r}' if split else ''}")
    if chunk_size is None and chunk_bytes is None:
        chunk_bytes = "256MB"
    workers = num_workers if num_workers is not None else min(len(names), os.cpu_count() or 1)
    optimize(
        fn=_HubRows(url, storage_options, columns, fn),
        inputs=names,
        output_dir=output_dir,
        chunk_size=chunk_size,
        chunk_bytes=chunk_bytes,
        num_workers=workers,
        **optimize_kwargs,
    )
    return output_dir
