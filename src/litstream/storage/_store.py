"""One async Store protocol over every place bytes live, and where each implementation lives.

``Store`` is what the read and write paths talk to; they never touch files, SDKs or HTTP clients
directly. This module gathers the names the rest of litstream imports:

* :class:`Store`, :class:`ObjectMeta`, :class:`TransferConfig` — ``_base.py``.
* :class:`LocalFileStore` — a directory on this machine (``_local.py``); safe in forked workers.
* :class:`ObstoreStore` — S3, GCS, Azure and obstore's memory/local stores (``_obstore.py``); the
  asyncio/trio bridge is its ``_call``. Rebuilds its client in each process (see ``_obstore_fork.py``).
* :class:`HTTPStore` — read-only HTTP(S) and the Hugging Face Hub (``_http.py``); safe in forked workers.
* :class:`HedgedStore` — hedged range reads over any store (``_hedged.py``).

Foreign exceptions are mapped once, in ``_base.mapped_errors``, into :class:`~litstream.StorageError`
and :class:`~litstream.ObjectNotFoundError`.
"""

from __future__ import annotations

from ._base import ObjectMeta, PutData, Store, TransferConfig
from ._hedged import HedgedStore, HedgeStatistics
from ._http import HTTPStore, HubTreeLister
from ._local import LocalFileStore
from ._obstore import ObstoreStore
from ._obstore_fork import obstore_used
from ._obstore_spec import ObstoreSpec

__all__ = [
    "HTTPStore",
    "HedgeStatistics",
    "HedgedStore",
    "HubTreeLister",
    "LocalFileStore",
    "ObjectMeta",
    "ObstoreSpec",
    "ObstoreStore",
    "PutData",
    "Store",
    "TransferConfig",
    "obstore_used",
]
