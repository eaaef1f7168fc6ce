"""A read-only Store over plain HTTP(S), and the Hugging Face Hub's dataset layout on top of it.

Requests go through a synchronous ``httpx.Client`` run in worker threads, like obstore's calls: the client
is shared by every event loop and both anyio backends, and reads can be abandoned when cancelled (a
hedged read's loser does not hold up the winner). The client is made per process, so the store is safe
in forked workers, and it pickles as configuration.

Generic HTTP servers cannot list a folder, so :meth:`HTTPStore.list` fails unless a lister is given; the
Hub has one (its tree API, ``GET {endpoint}/api/datasets/{repo}/tree/{revision}/{folder}?recursive=true``,
paginated by ``Link: <…>; rel="next"``).
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import anyio
import anyio.to_thread

from .._core._errors import ObjectNotFoundError, StorageError
from ._base import ObjectMeta, TransferConfig, loop_limiter, mapped_errors
from ._faults import retries_exhausted
from ._keys import check_key

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import httpx  # imported on first request: an HTTP client is not part of ``import litstream``

    from ._base import PutData

__all__ = ["HTTPStore", "HubTreeLister"]

T = TypeVar("T")

_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class HubTreeLister:
    """Lists a Hub dataset folder through the Hub's tree API.

    Attributes:
        endpoint: The Hub's base URL (``"https://huggingface.co"``).
        repo: ``"{org}/{name}"``.
        revision: A branch, tag or commit (``"main"``).
        root: The folder inside the repository that the store's keys are relative to (``""`` for the top).
    """

    endpoint: str
    repo: str
    revision: str
    root: str = ""

    def folder_url(self, folder: str) -> str:
        """The tree-API URL listing ``folder`` (relative to ``root``) recursively."""
        path = "/".join(p for p in (self.root, folder) if p)
        rev = quote(self.revision, safe="")
        return f"{self.endpoint}/api/datasets/{self.repo}/tree/{rev}/{quote(path)}?recursive=true"

    def entries(self, send: Callable[[str, str], httpx.Response], prefix: str) -> list[ObjectMeta]:
        """Every file under ``root`` whose key starts with ``prefix``, sorted by key.

        Args:
            send: Makes one request (``send(method, url)``), with the store's retries.
            prefix: Keys (relative to ``root``) to keep.

        Raises:
            ObjectNotFoundError: the repository or revision does not exist.
            StorageError: the API answered with another error.
        """
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        url: str | None = self.folder_url(folder)
        base = f"{self.root}/" if self.root else ""
        out: list[ObjectMeta] = []
        while url is not None:
            response = send("GET", url)
            if response.status_code == 404:
                code = response.headers.get("x-error-code", "")
                if code in ("RepoNotFound", "RevisionNotFound"):
                    raise ObjectNotFoundError(f"list: {self.repo}@{self.revision}: {code} ({url})")
                return []  # an absent folder lists as empty
            if response.status_code != 200:
                raise StorageError(f"list failed for {url}: HTTP {response.status_code}: {response.text[:200]}")
            for entry in response.json():
                path = str(entry.get("path", ""))
                if entry.get("type") == "file" and path.startswith(base):
                    key = path[len(base) :]
                    if key.startswith(prefix):
                        out.append(ObjectMeta(key, int(entry.get("size", 0)), entry.get("oid")))
            url = response.links.get("next", {}).get("url")
        return sorted(out, key=lambda m: m.path)


@dataclass
class _ClientBox:
    """The per-process client (a box so a finaliser can close it without keeping the store alive)."""

    client: httpx.Client | None = None
    pid: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _close(box: _ClientBox) -> None:
    if box.client is not None and box.pid == os.getpid():
        box.client.close()


class HTTPStore:
    """A read-only :class:`~litstream.Store` over HTTP(S): ``GET`` (with ``Range``) and ``HEAD`` on ``base_url/key``.

    Args:
        base_url: The root; a key ``k`` is fetched from ``f"{base_url}/{k}"`` (percent-encoded).
        headers: Extra request headers (e.g. ``{"Authorization": "Bearer …"}``); dropped by httpx on a
            redirect to another host.
        transfer: Timeouts and retries (5xx, 408, 425, 429 and connection errors are retried with
            exponential backoff and full jitter until ``retry_timeout``; then
            :class:`~litstream.RetriesExhaustedError` names the URL, the attempts and the seconds spent).
            Default ``TransferConfig()``.
        lister: What makes :meth:`list` work (:class:`HubTreeLister` for the Hub); ``None``: listing fails.
        url: A description of the root for messages (default ``base_url``).
        max_threads: Concurrent requests (default 16).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        transfer: TransferConfig | None = None,
        lister: HubTreeLister | None = None,
        url: str | None = None,
        max_threads: int = 16,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._headers = dict(headers or {})
        self._transfer = transfer or TransferConfig()
        self._lister = lister
        self._url = url or self._base
        self._max_threads = max_threads
        self._limiter_obj: tuple[object, anyio.CapacityLimiter] | None = None
        self._box = _ClientBox()
        weakref.finalize(self, _close, self._box)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_limiter_obj=None, _box=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._box = _ClientBox()
        weakref.finalize(self, _close, self._box)

    def __repr__(self) -> str:
        return f"HTTPStore({self._url!r})"

    @property
    def url(self) -> str:
        return self._url

    @property
    def transfer(self) -> TransferConfig:
        """The timeouts and retry settings; listings retry by them too (``storage/_listing.py``)."""
        return self._transfer

    def without_retries(self) -> HTTPStore:
        """This store with retries off (one try per request), for a caller that retries in its own loop (the
        raw fetcher's adaptive limit, ``read/raw/_fetch.py``); :attr:`transfer` still gives the budget."""
        return HTTPStore(
            self._base,
            headers=self._headers,
            transfer=dataclasses.replace(self._transfer, max_retries=0),
            lister=self._lister,
            url=self._url,
            max_threads=self._max_threads,
        )

    @property
    def base_url(self) -> str:
        """The root that keys are appended to."""
        return self._base

    @property
    def lister(self) -> HubTreeLister | None:
        """What :meth:`list` uses, if anything."""
        return self._lister

    def _client(self) -> httpx.Client:
        import httpx

        box = self._box
        pid = os.getpid()
        if box.client is not None and box.pid == pid:
            return box.client
        if box.pid not in (0, pid):  # inherited across fork: its lock may be held by a thread the child lacks
            box = _ClientBox()
            weakref.finalize(self, _close, box)
            self._box = box
        with box.lock:
            if box.client is None or box.pid != pid:
                # A client inherited across fork shares its parent's sockets: leave it alone, make a new one.
                t = self._transfer
                box.client = httpx.Client(
                    headers={"Accept-Encoding": "identity", **self._headers},
                    timeout=httpx.Timeout(t.timeout, connect=t.connect_timeout),
                    follow_redirects=True,
                )
                box.pid = pid
            return box.client

    def _send(self, method: str, url: str, headers: Mapping[str, str] | None = None) -> httpx.Response:
        """One request with retries and backoff (runs in a worker thread)."""
        import httpx

        client = self._client()
        t = self._transfer
        first = time.monotonic()
        attempt = 0
        while True:
            try:
                response = client.request(method, url, headers=headers)
                if response.status_code not in _RETRY_STATUS:
                    return response
                failure: Exception = StorageError(f"HTTP {response.status_code} from {method} {url}")
            except httpx.TransportError as exc:
                failure = exc
            elapsed = time.monotonic() - first
            if attempt >= t.max_retries or elapsed >= t.retry_timeout:
                if attempt == 0:
                    raise failure
                detail = f"{type(failure).__name__}: {failure}"
                raise retries_exhausted(method, url, attempt + 1, elapsed, detail) from failure
            time.sleep(random.uniform(0, t.backoff(attempt)))
            attempt += 1

    def _key_url(self, path: str) -> str:
        return f"{self._base}/{quote(check_key(path, self._url))}"

    async def _run(self, operation: str, path: str, fn: Callable[[], T]) -> T:
        with mapped_errors(operation, f"{self._url}/{path}"):
            self._limiter_obj = loop_limiter(self._limiter_obj, self._max_threads)
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter_obj[1], abandon_on_cancel=True)

    def _checked(self, response: httpx.Response, operation: str, path: str) -> httpx.Response:
        if response.status_code == 404:
            raise ObjectNotFoundError(f"{operation}: {self._url}/{path} does not exist (HTTP 404)")
        if response.status_code >= 400:
            raise StorageError(
                f"{operation} failed for {self._url}/{path}: HTTP {response.status_code}: {response.text[:200]}"
            )
        return response

    def _get_range_sync(self, path: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        end = start + length - 1
        response = self._send("GET", self._key_url(path), {"Range": f"bytes={start}-{end}"})
        if response.status_code == 416:
            raise StorageError(f"get_range failed for {self._url}/{path}: start {start} is past the end (HTTP 416)")
        self._checked(response, "get_range", path)
        if response.status_code == 206:
            return response.content
        return response.content[start : start + length]  # the server ignored Range and sent everything

    async def get(self, path: str) -> bytes:
        """See :meth:`litstream.Store.get`."""

        def fetch() -> bytes:
            return self._checked(self._send("GET", self._key_url(path)), "get", path).content

        return await self._run("get", path, fetch)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        """See :meth:`litstream.Store.get_range` (one ``Range: bytes=start-end`` request)."""
        return await self._run("get_range", path, partial(self._get_range_sync, path, start, length))

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """See :meth:`litstream.Store.get_ranges` (one request per range, over one pooled connection)."""
        if len(starts) != len(lengths):
            raise ValueError(f"get_ranges: {len(starts)} starts but {len(lengths)} lengths")

        def fetch() -> list[bytes]:
            return [self._get_range_sync(path, s, n) for s, n in zip(starts, lengths, strict=True)]

        return await self._run("get_ranges", path, fetch)

    async def head(self, path: str) -> ObjectMeta:
        """See :meth:`litstream.Store.head` (``HEAD``; the size is ``Content-Length``).

        Raises:
            StorageError: the server sent no ``Content-Length``.
        """

        def stat() -> ObjectMeta:
            response = self._checked(self._send("HEAD", self._key_url(path)), "head", path)
            size = response.headers.get("content-length")
            if size is None:
                raise StorageError(f"head failed for {self._url}/{path}: the server sent no Content-Length")
            return ObjectMeta(path, int(size), response.headers.get("etag"))

        return await self._run("head", path, stat)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """See :meth:`litstream.Store.list`.

        Raises:
            StorageError: this store has no lister (plain HTTP cannot list a folder).
        """
        lister = self._lister
        if lister is None:
            raise StorageError(
                f"list is not supported over plain HTTP(S) ({self._url}): a dataset read over HTTP needs its "
                "index.json (a merged index), or serve it from an object store (s3://, gs://, azure://)"
            )
        return await self._run("list", prefix, partial(lister.entries, self._send, prefix))

    def _read_only(self, operation: str, path: str) -> StorageError:
        return StorageError(
            f"{operation} is not supported: {self._url}/{path} is a read-only HTTP store; write to a local "
            "directory or an object store (s3://, gs://, azure://) instead"
        )

    async def put(self, path: str, data: PutData) -> None:
        """Not supported.

        Raises:
            StorageError: always (HTTP stores are read-only).
        """
        raise self._read_only("put", path)

    async def delete(self, path: str) -> None:
        """Not supported.

        Raises:
            StorageError: always (HTTP stores are read-only).
        """
        raise self._read_only("delete", path)
