"""``litstream view DATASET``: what a dataset holds, in the browser.

One :class:`DatasetView` per served dataset (local, ``s3://``, ``hf://``, ... as ``StreamingDataset`` takes it).
The index is read once when the app starts; samples are read on request through the public read paths: a page
of samples through ``astream`` over ``ds.subset(...)``, one sample through ``ds[i]``, a key through
``ds.get_by_key``. Every query parameter is checked against a bounded range and a bad one is answered 400
naming it; no route takes a path, so nothing outside the dataset can be reached.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.responses import JSONResponse, Response

from .._core._errors import ConfigurationError, KeyNotFoundError, LitstreamError
from ..format._keys import section_of
from ._page import HEADERS, error_html, page
from ._render import media_budget, render_value

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from starlette.requests import Request

    from ..format._index import Index

__all__ = ["MAX_PAGE", "DatasetView", "QueryError"]

MAX_PAGE = 50
"""Samples one page shows at most."""
CHUNKS_PER_PAGE = 100
"""Rows of the chunk table per page."""
MAX_KEY = 256
"""Characters of a key looked up."""
DEFAULT_BLOCK = 256
"""Tokens per sample shown of a token dataset."""


class QueryError(ValueError):
    """A query parameter out of its range (answered 400)."""


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw) if len(raw) <= 20 else None
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise QueryError(f"{name}={raw[:40]!r} is not usable; use an integer from {low} to {high}")
    return value


def _label(position_or_key: int | str) -> str:
    """A sample's heading: a link to its own page, or (looked up by key) the key, escaped."""
    if isinstance(position_or_key, int):
        return f'<a href="/data/sample/{position_or_key}">{position_or_key}</a>'
    return html.escape(position_or_key)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


@dataclass
class DatasetView:
    """A dataset being viewed: its URL, its index (read once), the ``StreamingDataset`` that reads samples and
    their count (``len(ds)``: a token dataset is viewed as windows of ``block_size`` tokens)."""

    url: str
    index: Index
    dataset: Any  # litstream.StreamingDataset (imported lazily: it imports torch)
    nav: list[tuple[str, str]]
    total: int = 0
    block_size: int | None = None

    @classmethod
    async def open(
        cls, url: str, storage_options: Mapping[str, Any] | None = None, block_size: int = DEFAULT_BLOCK
    ) -> DatasetView:
        """Read the index of ``url`` and prepare the reader.

        Args:
            url: The dataset, as ``StreamingDataset`` takes it.
            storage_options: Credentials and client options for object stores.
            block_size: Tokens per sample shown of a token dataset (``TokensLoader``; >= 1). Default 256.

        Raises:
            DatasetNotFoundError: no index there. FormatError: a malformed index. StorageError: it cannot be read.
            ConfigurationError: ``block_size`` < 1.
        """
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ConfigurationError(f"view: --block-size {block_size!r} is not usable; use an integer >= 1")
        from ..read.source._index_load import load_index
        from ..storage._resolver import store_for

        options = dict(storage_options) if storage_options else None
        index = await load_index(store_for(url, options))  # a dataset that cannot be read fails here, quickly
        from .._torch._dataset import StreamingDataset  # torch, once the index was read
        from ..format._loaders import TokensLoader

        tokens = index.config is not None and index.config.item_loader == "TokensLoader"
        loader = TokensLoader(block_size=block_size) if tokens else None

        def make() -> tuple[Any, int]:
            ds = StreamingDataset(url, storage_options=options, item_loader=loader)
            return ds, len(ds)

        dataset, total = await anyio.to_thread.run_sync(make)
        return cls(url, index, dataset, [("/data", "dataset")], total, block_size if tokens else None)

    # -- what the index says ---------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The index summary as plain values."""
        config = self.index.config
        sizes = [c.chunk_size for c in self.index.chunks]
        return {
            "dataset": self.url,
            "samples": self.total,
            "items_written": self.index.num_items,
            "block_size": self.block_size,
            "chunks": len(self.index.chunks),
            "bytes": sum(c.chunk_bytes for c in self.index.chunks),
            "items_per_chunk": [min(sizes), max(sizes)] if sizes else None,
            "layout": list(config.data_format) if config else None,
            "item_loader": config.item_loader if config else None,
            "compression": config.compression if config else None,
            "encrypted": bool(config.encryption) if config else False,
            "keys_shards": section_of(self.index.extra, source=f"{self.url}/index.json"),
            "updated_at": self.index.updated_at,
        }

    def _summary_html(self) -> str:
        s = self.summary()
        per_chunk = s["items_per_chunk"]
        layout = ", ".join(s["layout"] or []) or "unknown"
        if len(layout) > 400:
            layout = layout[:400] + " ..."
        keys = s["keys_shards"]
        rows = [
            ("dataset", s["dataset"]),
            (
                "samples",
                str(s["samples"])
                if self.block_size is None
                else f"{s['samples']} windows of {self.block_size} tokens ({s['items_written']} sequences written)",
            ),
            ("chunks", f"{s['chunks']}" + (f" ({per_chunk[0]} to {per_chunk[1]} samples each)" if per_chunk else "")),
            ("bytes", f"{_human(s['bytes'])} uncompressed ({s['bytes']} bytes)"),
            ("layout (data_format)", layout),
            ("item loader", str(s["item_loader"])),
            ("compression", s["compression"] or "none"),
            ("encryption", "yes" if s["encrypted"] else "none"),
            ("keys sidecar", f"{keys} shard(s)" if keys else "not recorded in index.json (lookup tries keys.parquet)"),
        ]
        cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        return f'<table class="grid" id="summary">{cells}</table>'

    def _first_link(self, first: int) -> str:
        """A link to a chunk's first sample (token datasets are viewed as windows: no link)."""
        return f'<a href="/data?offset={first}">{first}</a>' if self.block_size is None else str(first)

    def _chunks_html(self, chunk_page: int) -> str:
        chunks = self.index.chunks
        first = chunk_page * CHUNKS_PER_PAGE
        starts = [0]
        for info in chunks:
            starts.append(starts[-1] + info.chunk_size)
        rows = "".join(
            f"<tr><td>{i}</td><td>{html.escape(info.filename[:200])}</td><td>{info.chunk_size}</td>"
            f"<td>{info.chunk_bytes}</td><td>{'' if info.dim is None else info.dim}</td>"
            f"<td>{self._first_link(starts[i])}</td></tr>"
            for i, info in enumerate(chunks[first : first + CHUNKS_PER_PAGE], start=first)
        )
        pages = max(1, -(-len(chunks) // CHUNKS_PER_PAGE))
        links = " ".join(
            f'<a href="/data?chunks={p}">{p + 1}</a>' if p != chunk_page else f"<b>{p + 1}</b>"
            for p in range(min(pages, 50))
        )
        return (
            f"<h2>Chunks</h2><p>page {chunk_page + 1} of {pages}: {links}</p>"
            '<table class="grid" id="chunks"><tr><th>#</th><th>file</th><th>samples</th><th>bytes</th><th>dim</th>'
            f"<th>first sample</th></tr>{rows}</table>"
        )

    # -- samples ----------------------------------------------------------------------------------
    async def samples(self, offset: int, count: int) -> list[tuple[int, Any]]:
        """``count`` samples from ``offset`` on, read with ``astream`` over ``ds.subset(...)``."""
        from ..read.aio._astream import astream

        end = min(self.total, offset + count)
        if end <= offset:
            return []
        part = await anyio.to_thread.run_sync(self.dataset.subset, slice(offset, end))
        out: list[tuple[int, Any]] = []
        async with astream(part, max_pre_download=1) as stream:
            async for sample in stream:
                out.append((offset + len(out), sample))
        return out

    async def sample(self, position: int) -> Any:
        """``ds[position]``."""
        return await anyio.to_thread.run_sync(self.dataset.__getitem__, position)

    async def by_key(self, key: str) -> Any:
        """``ds.get_by_key(key)``; a key of digits that is not found as text is tried as an integer."""
        try:
            return await anyio.to_thread.run_sync(self.dataset.get_by_key, key)
        except KeyNotFoundError:
            digits = key.lstrip("-")
            if not digits.isdigit() or len(digits) > 19:
                raise
        return await anyio.to_thread.run_sync(self.dataset.get_by_key, int(key))

    @staticmethod
    def _samples_html(samples: Sequence[tuple[int | str, Any]]) -> str:
        """The samples as a table, each headed by its position (a link) or its key (images encoded, audio
        written: call it in a worker thread)."""
        with media_budget():
            rows = "".join(
                f'<tr class="sample-row"><th>{_label(i)}</th><td>{render_value(s)}</td></tr>' for i, s in samples
            )
        return f'<table class="grid" id="samples">{rows}</table>'

    def _key_form(self, key: str = "") -> str:
        return (
            '<form action="/data/key" method="get"><label>look up a sample by key: '
            f'<input name="key" maxlength="{MAX_KEY}" value="{html.escape(key)}"></label> '
            '<button type="submit">look up</button></form>'
        )

    # -- routes -----------------------------------------------------------------------------------
    async def home(self, request: Request) -> Response:
        """``GET /data?offset=&count=&chunks=``: summary, a page of chunks, a page of samples, the key form."""
        n = self.total
        pages = max(1, -(-len(self.index.chunks) // CHUNKS_PER_PAGE))
        try:
            offset = _int_param(request, "offset", 0, 0, max(0, n - 1))
            count = _int_param(request, "count", 12, 1, MAX_PAGE)
            chunk_page = _int_param(request, "chunks", 0, 0, pages - 1)
        except QueryError as exc:
            return error_html(400, str(exc), nav=self.nav)
        try:
            body = await anyio.to_thread.run_sync(self._samples_html, await self.samples(offset, count))
        except LitstreamError as exc:
            body = f'<p class="error">the samples could not be read: {html.escape(str(exc))}</p>'
        previous = max(0, offset - count)
        step = (
            f'<p><a href="/data?offset={previous}&amp;count={count}">previous</a> '
            f'<a href="/data?offset={min(max(0, n - 1), offset + count)}&amp;count={count}">next</a> '
            f"samples {offset} to {min(n, offset + count) - 1} of {n}</p>"
        )
        content = f"{self._summary_html()}<h2>Samples</h2>{self._key_form()}{step}{body}{self._chunks_html(chunk_page)}"
        return page(f"Dataset {self.url}", content, nav=self.nav)

    async def one(self, request: Request) -> Response:
        """``GET /data/sample/{index}``: one sample, read with ``ds[i]``."""
        position = request.path_params["index"]
        if not 0 <= position < self.total:
            return error_html(404, f"sample {position} does not exist: the dataset has {self.total}", nav=self.nav)
        try:
            sample = await self.sample(position)
        except LitstreamError as exc:
            return error_html(502, f"sample {position} could not be read: {exc}", nav=self.nav)
        body = await anyio.to_thread.run_sync(self._samples_html, [(position, sample)])
        return page(f"Sample {position}", body, nav=self.nav)

    async def key(self, request: Request) -> Response:
        """``GET /data/key?key=``: the sample with that key, read with ``ds.get_by_key``."""
        key = request.query_params.get("key", "")
        if not key or len(key) > MAX_KEY:
            return error_html(400, f"key: give a key of 1 to {MAX_KEY} characters", nav=self.nav)
        try:
            sample = await self.by_key(key)
        except KeyNotFoundError as exc:
            return error_html(404, str(exc).strip("'\""), nav=self.nav)
        except LitstreamError as exc:
            return error_html(502, f"key {key!r} could not be read: {exc}", nav=self.nav)
        shown = await anyio.to_thread.run_sync(self._samples_html, [(key, sample)])
        return page("Sample by key", self._key_form(key) + shown, nav=self.nav)

    async def summary_json(self, request: Request) -> Response:
        """``GET /api/data/summary``: the index summary as JSON."""
        return JSONResponse(self.summary(), headers=HEADERS)
