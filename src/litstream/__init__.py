"""litstream: chunked binary shards (LitData's format) streamed into PyTorch and async services.

The public API; everything else lives in private modules.

``import litstream`` loads only the error classes and the version: every other public name (the
torch facades, ``astream``, ``optimize``, the media wrappers, ...) is imported on first access by the
module ``__getattr__`` below, so that a service pays only for what it uses and nothing imports torch
before a torch facade is touched. See ``docs/contributing.md`` (the lazy-import rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core._errors import ChecksumError as ChecksumError
from ._core._errors import ChunkWaitTimeoutError as ChunkWaitTimeoutError
from ._core._errors import ConfigurationError as ConfigurationError
from ._core._errors import DatasetNotFoundError as DatasetNotFoundError
from ._core._errors import DuplicateKeyError as DuplicateKeyError
from ._core._errors import EncryptionError as EncryptionError
from ._core._errors import FormatError as FormatError
from ._core._errors import KeyNotFoundError as KeyNotFoundError
from ._core._errors import LitstreamError as LitstreamError
from ._core._errors import ObjectNotFoundError as ObjectNotFoundError
from ._core._errors import OutputLockedError as OutputLockedError
from ._core._errors import OutputNotEmptyError as OutputNotEmptyError
from ._core._errors import PickleRefusedError as PickleRefusedError
from ._core._errors import PlanError as PlanError
from ._core._errors import RetriesExhaustedError as RetriesExhaustedError
from ._core._errors import StorageError as StorageError
from ._core._errors import VersionNotFoundError as VersionNotFoundError
from ._core._errors import WorkerError as WorkerError
from ._core._terminal import STDIN_FD as _STDIN_FD  # noqa: F401 (taken at import, for breakpoint in workers)
from ._version import __version__ as __version__

if TYPE_CHECKING:  # every other public name is imported on first use (see _LAZY)
    from ._core._debug import breakpoint as breakpoint
    from ._torch._affinity import NumaAffinity as NumaAffinity
    from ._torch._affinity import get_gpu_affinity as get_gpu_affinity
    from ._torch._affinity import get_numa_affinity as get_numa_affinity
    from ._torch._collate import litdata_collate as litdata_collate
    from ._torch._combined import CombinedStreamingDataset as CombinedStreamingDataset
    from ._torch._dataloader import StreamingDataLoader as StreamingDataLoader
    from ._torch._dataset import StreamingDataset as StreamingDataset
    from ._torch._litdata_cache import Cache as Cache
    from ._torch._parallel import ParallelStreamingDataset as ParallelStreamingDataset
    from ._torch._raw_dataset import BaseIndexer as BaseIndexer
    from ._torch._raw_dataset import FileIndexer as FileIndexer
    from ._torch._raw_dataset import FileMetadata as FileMetadata
    from ._torch._raw_dataset import StreamingRawDataset as StreamingRawDataset
    from ._torch._split import train_test_split as train_test_split
    from .format._encryption import Encryption as Encryption
    from .format._encryption import FernetEncryption as FernetEncryption
    from .format._encryption import RSAEncryption as RSAEncryption
    from .format._loaders import PyTreeLoader as PyTreeLoader
    from .format._loaders import TokensLoader as TokensLoader
    from .format._serializer_base import Serializer as Serializer
    from .format._temporal import TemporalArrayLoader as TemporalArrayLoader
    from .format.arrow._parquet import ParquetLoader as ParquetLoader
    from .format.media._audio import Audio as Audio
    from .format.media._audio import AudioSerializer as AudioSerializer
    from .format.media._graph import Graph as Graph
    from .format.media._image import Image as Image
    from .format.media._image import Jpeg as Jpeg
    from .format.media._image import JpegArray as JpegArray
    from .format.media._image import Pil as Pil
    from .format.media._image import Tiff as Tiff
    from .format.media._mesh import Mesh as Mesh
    from .format.media._mesh import Pdf as Pdf
    from .format.media._nifti import Nifti as Nifti
    from .format.media._tensor import Tensor as Tensor
    from .format.media._text import File as File
    from .format.media._text import Text as Text
    from .format.media._video import Video as Video
    from .format.media._video import VideoSerializer as VideoSerializer
    from .index._hf import index_hf_dataset as index_hf_dataset
    from .index._parquet import index_parquet_dataset as index_parquet_dataset
    from .read._trust import set_allow_pickle as set_allow_pickle
    from .read.aio._astream import astream as astream
    from .read.aio._sample_stream import SampleStream as SampleStream
    from .storage._resolver import Dir as Dir
    from .storage._store import LocalFileStore as LocalFileStore
    from .storage._store import ObstoreStore as ObstoreStore
    from .storage._store import Store as Store
    from .storage._walk import walk as walk
    from .write._complete import complete_dataset as complete_dataset
    from .write._complete import is_complete_dataset as is_complete_dataset
    from .write._hf import optimize_hf as optimize_hf
    from .write._keys_index import build_keys_index as build_keys_index
    from .write._map import map as map
    from .write._media_folder import iter_webdataset_tar as iter_webdataset_tar
    from .write._media_folder import list_media_folder as list_media_folder
    from .write._merge_datasets import merge_datasets as merge_datasets
    from .write._optimize import optimize as optimize
    from .write._readers import BaseReader as BaseReader
    from .write._readers import ParquetReader as ParquetReader
    from .write._retention import VersionInfo as VersionInfo
    from .write._retention import collect_garbage as collect_garbage
    from .write._retention import list_versions as list_versions
    from .write._summary import RunSummary as RunSummary
    from .write._summary import WorkerSummary as WorkerSummary
    from .write._update import dataset_update as dataset_update
    from .write._uploader import AsyncUploader as AsyncUploader
    from .write._uploader_stats import UploaderStatistics as UploaderStatistics
    from .write._writer import ChunkWriter as ChunkWriter

# Public name -> private module that defines it, imported by __getattr__ on first access, so that
# ``import litstream`` costs only this file (no torch, numpy, pyarrow or media library).
_LAZY = {
    "AsyncUploader": ".write._uploader",
    "Audio": ".format.media._audio",
    "AudioSerializer": ".format.media._audio",
    "BaseIndexer": "._torch._raw_dataset",
    "BaseReader": ".write._readers",
    "Cache": "._torch._litdata_cache",
    "ChunkWriter": ".write._writer",
    "CombinedStreamingDataset": "._torch._combined",
    "Dir": ".storage._resolver",
    "Encryption": ".format._encryption",
    "FernetEncryption": ".format._encryption",
    "File": ".format.media._text",
    "FileIndexer": "._torch._raw_dataset",
    "FileMetadata": "._torch._raw_dataset",
    "Graph": ".format.media._graph",
    "Image": ".format.media._image",
    "Jpeg": ".format.media._image",
    "JpegArray": ".format.media._image",
    "LocalFileStore": ".storage._store",
    "Mesh": ".format.media._mesh",
    "Nifti": ".format.media._nifti",
    "NumaAffinity": "._torch._affinity",
    "ObstoreStore": ".storage._store",
    "ParallelStreamingDataset": "._torch._parallel",
    "ParquetLoader": ".format.arrow._parquet",
    "ParquetReader": ".write._readers",
    "Pdf": ".format.media._mesh",
    "Pil": ".format.media._image",
    "PyTreeLoader": ".format._loaders",
    "RSAEncryption": ".format._encryption",
    "RunSummary": ".write._summary",
    "SampleStream": ".read.aio._sample_stream",
    "Serializer": ".format._serializer_base",
    "Store": ".storage._store",
    "StreamingDataLoader": "._torch._dataloader",
    "StreamingDataset": "._torch._dataset",
    "StreamingRawDataset": "._torch._raw_dataset",
    "TemporalArrayLoader": ".format._temporal",
    "Tensor": ".format.media._tensor",
    "Text": ".format.media._text",
    "Tiff": ".format.media._image",
    "TokensLoader": ".format._loaders",
    "UploaderStatistics": ".write._uploader_stats",
    "Video": ".format.media._video",
    "VideoSerializer": ".format.media._video",
    "VersionInfo": ".write._retention",
    "WorkerSummary": ".write._summary",
    "astream": ".read.aio._astream",
    "breakpoint": "._core._debug",
    "build_keys_index": ".write._keys_index",
    "collect_garbage": ".write._retention",
    "complete_dataset": ".write._complete",
    "dataset_update": ".write._update",
    "get_gpu_affinity": "._torch._affinity",
    "get_numa_affinity": "._torch._affinity",
    "index_hf_dataset": ".index._hf",
    "index_parquet_dataset": ".index._parquet",
    "is_complete_dataset": ".write._complete",
    "iter_webdataset_tar": ".write._media_folder",
    "list_media_folder": ".write._media_folder",
    "list_versions": ".write._retention",
    "litdata_collate": "._torch._collate",
    "map": ".write._map",
    "merge_datasets": ".write._merge_datasets",
    "optimize": ".write._optimize",
    "optimize_hf": ".write._hf",
    "set_allow_pickle": ".read._trust",
    "train_test_split": "._torch._split",
    "walk": ".storage._walk",
}

__all__ = [
    "AsyncUploader",
    "Audio",
    "AudioSerializer",
    "BaseIndexer",
    "BaseReader",
    "Cache",
    "ChecksumError",
    "ChunkWaitTimeoutError",
    "ChunkWriter",
    "CombinedStreamingDataset",
    "ConfigurationError",
    "DatasetNotFoundError",
    "Dir",
    "DuplicateKeyError",
    "Encryption",
    "EncryptionError",
    "FernetEncryption",
    "File",
    "FileIndexer",
    "FileMetadata",
    "FormatError",
    "Graph",
    "Image",
    "Jpeg",
    "JpegArray",
    "KeyNotFoundError",
    "LitstreamError",
    "LocalFileStore",
    "Mesh",
    "Nifti",
    "NumaAffinity",
    "ObjectNotFoundError",
    "ObstoreStore",
    "OutputLockedError",
    "OutputNotEmptyError",
    "ParallelStreamingDataset",
    "ParquetLoader",
    "ParquetReader",
    "Pdf",
    "PickleRefusedError",
    "Pil",
    "PlanError",
    "RSAEncryption",
    "RetriesExhaustedError",
    "RunSummary",
    "SampleStream",
    "Serializer",
    "StorageError",
    "Store",
    "StreamingDataLoader",
    "StreamingDataset",
    "StreamingRawDataset",
    "TemporalArrayLoader",
    "Tensor",
    "Text",
    "Tiff",
    "TokensLoader",
    "UploaderStatistics",
    "VersionInfo",
    "VersionNotFoundError",
    "Video",
    "VideoSerializer",
    "WorkerError",
    "WorkerSummary",
    "astream",
    "breakpoint",
    "build_keys_index",
    "collect_garbage",
    "complete_dataset",
    "dataset_update",
    "get_gpu_affinity",
    "get_numa_affinity",
    "index_hf_dataset",
    "index_parquet_dataset",
    "is_complete_dataset",
    "iter_webdataset_tar",
    "list_media_folder",
    "list_versions",
    "litdata_collate",
    "map",
    "merge_datasets",
    "optimize",
    "optimize_hf",
    "set_allow_pickle",
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
    """Import a public name's module on first access (PEP 562) and cache the name here."""
    module_name = _LAZY.get(name)
    if name == "debugger":  # a public submodule, as ``litdata.debugger`` (torch-free)
        import importlib

        return importlib.import_module(".debugger", __name__)
    if module_name is None:
        raise AttributeError(f"module 'litstream' has no attribute {name!r}")
    import importlib
    import sys

    importlib.import_module(module_name, __name__)
    # The module may have imported other public modules (``_dataloader`` imports ``_dataset``): bind
    # and rename every public name already loaded, so a class pickles as ``litstream.X`` at once.
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
