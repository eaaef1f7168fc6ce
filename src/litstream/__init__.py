"""litstream: chunked binary shards (LitData's format) streamed into PyTorch and async services.

The public API; everything else lives in private modules.

``import litstream`` does not import torch: the torch facades (``StreamingDataset``,
``StreamingDataLoader``, the composite datasets, ``train_test_split``) are loaded on first use by
the module ``__getattr__`` below. See ``docs/contributing.md`` (the lazy-import rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError as ConfigurationError
from ._errors import DatasetNotFoundError as DatasetNotFoundError
from ._errors import FormatError as FormatError
from ._errors import LitstreamError as LitstreamError
from ._errors import ObjectNotFoundError as ObjectNotFoundError
from ._errors import OutputNotEmptyError as OutputNotEmptyError
from ._errors import PlanError as PlanError
from ._errors import StorageError as StorageError
from ._errors import WorkerError as WorkerError
from ._version import __version__ as __version__
from .format._loaders import PyTreeLoader as PyTreeLoader
from .format._loaders import TokensLoader as TokensLoader
from .format._parquet import ParquetLoader as ParquetLoader
from .read._astream import SampleStream as SampleStream
from .read._astream import astream as astream
from .storage._resolver import Dir as Dir
from .storage._store import LocalFileStore as LocalFileStore
from .storage._store import ObstoreStore as ObstoreStore
from .storage._store import Store as Store
from .storage._walk import walk as walk
from .write._complete import complete_dataset as complete_dataset
from .write._map import map as map
from .write._merge_datasets import merge_datasets as merge_datasets
from .write._optimize import optimize as optimize
from .write._parquet_index import index_parquet_dataset as index_parquet_dataset
from .write._uploader import AsyncUploader as AsyncUploader
from .write._uploader import UploaderStatistics as UploaderStatistics
from .write._writer import ChunkWriter as ChunkWriter

if TYPE_CHECKING:  # the torch facades, imported on first use (see _LAZY)
    from ._combined_dataset import CombinedStreamingDataset as CombinedStreamingDataset
    from ._dataloader import StreamingDataLoader as StreamingDataLoader
    from ._dataset import StreamingDataset as StreamingDataset
    from ._parallel_dataset import ParallelStreamingDataset as ParallelStreamingDataset
    from ._split import train_test_split as train_test_split

# Public names whose modules import torch: name -> module. Loaded by __getattr__ on first access.
_LAZY = {
    "CombinedStreamingDataset": "._combined_dataset",
    "ParallelStreamingDataset": "._parallel_dataset",
    "StreamingDataLoader": "._dataloader",
    "StreamingDataset": "._dataset",
    "train_test_split": "._split",
}

__all__ = [
    "AsyncUploader",
    "ChunkWriter",
    "CombinedStreamingDataset",
    "ConfigurationError",
    "DatasetNotFoundError",
    "Dir",
    "FormatError",
    "LitstreamError",
    "LocalFileStore",
    "ObjectNotFoundError",
    "ObstoreStore",
    "OutputNotEmptyError",
    "ParallelStreamingDataset",
    "ParquetLoader",
    "PlanError",
    "SampleStream",
    "StorageError",
    "Store",
    "StreamingDataLoader",
    "StreamingDataset",
    "TokensLoader",
    "UploaderStatistics",
    "WorkerError",
    "astream",
    "complete_dataset",
    "index_parquet_dataset",
    "map",
    "merge_datasets",
    "optimize",
    "train_test_split",
    "walk",
]


def _fix_module_name(obj: object) -> None:
    if getattr(obj, "__module__", "").startswith("litstream."):
        try:
            obj.__module__ = "litstream"
        except (AttributeError, TypeError):  # pragma: no cover
            pass


def __getattr__(name: str) -> Any:
    """Import a torch facade on first access (PEP 562), so ``import litstream`` stays torch-free."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'litstream' has no attribute {name!r}")
    import importlib
    import sys

    importlib.import_module(module_name, __name__)
    # The module may have imported other facades (``_dataloader`` imports ``_dataset``): name them all.
    for other, other_module in _LAZY.items():
        loaded = sys.modules.get(__name__ + other_module)
        if loaded is not None and other not in globals():
            globals()[other] = getattr(loaded, other)
            _fix_module_name(globals()[other])
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


for _name in __all__:
    if _name not in _LAZY:
        _fix_module_name(globals()[_name])
del _name
