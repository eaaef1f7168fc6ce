"""litstream: chunked binary shards (LitData's format) streamed into PyTorch and async services.

The public API; everything else lives in private modules.

``import litstream`` loads only the error classes and the version: every other public name (the
torch facades, ``astream``, ``optimize``, the media wrappers, ...) is imported on first access by the
module ``__getattr__`` below, so that a service pays only for what it uses and nothing imports torch
before a torch facade is touched. See ``docs/contributing.md`` (the lazy-import rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import ChecksumError as ChecksumError
from ._errors import ChunkWaitTimeoutError as ChunkWaitTimeoutError
from ._errors import ConfigurationError as ConfigurationError
from ._errors import DatasetNotFoundError as DatasetNotFoundError
from ._errors import DuplicateKeyError as DuplicateKeyError
from ._errors import EncryptionError as EncryptionError
from ._errors import FormatError as FormatError
from ._errors import KeyNotFoundError as KeyNotFoundError
from ._errors import LitstreamError as LitstreamError
from ._errors import ObjectNotFoundError as ObjectNotFoundError
from ._errors import OutputLockedError as OutputLockedError
from ._errors import OutputNotEmptyError as OutputNotEmptyError
from ._errors import PickleRefusedError as PickleRefusedError
from ._errors import PlanError as PlanError
from ._errors import RetriesExhaustedError as RetriesExhaustedError
from ._errors import StorageError as StorageError
from ._errors import WorkerError as WorkerError
from ._terminal import STDIN_FD as _STDIN_FD  # noqa: F401 (taken at import, for breakpoint in workers)
from ._version import __version__ as __version__

if TYPE_CHECKING:  # every other public name is imported on first use (see _LAZY)
    from ._affinity import NumaAffinity as NumaAffinity
    from ._affinity import get_gpu_affinity as get_gpu_affinity
    from ._affinity import get_numa_affinity as get_numa_affinity
    from ._combined_dataset import CombinedStreamingDataset as CombinedStreamingDataset
    from ._dataloader import StreamingDataLoader as StreamingDataLoader
    from ._dataset import StreamingDataset as StreamingDataset
    from ._debug import breakpoint as breakpoint
    from ._litdata_cache import Cache as Cache
    from ._media_collate import litdata_collate as litdata_collate
    from ._media_folder import iter_webdataset_tar as iter_webdataset_tar
    from ._media_folder import list_media_folder as list_media_folder
    from ._parallel_dataset import ParallelStreamingDataset as ParallelStreamingDataset
    from ._raw_dataset import BaseIndexer as BaseIndexer
    from ._raw_dataset import FileIndexer as FileIndexer
    from ._raw_dataset import FileMetadata as FileMetadata
    from ._raw_dataset import StreamingRawDataset as StreamingRawDataset
    from ._split import train_test_split as train_test_split
    from .format._encryption import Encryption as Encryption
    from .format._encryption import FernetEncryption as FernetEncryption
    from .format._encryption import RSAEncryption as RSAEncryption
    from .format._loaders import PyTreeLoader as PyTreeLoader
    from .format._loaders import TokensLoader as TokensLoader
    from .format._media_audio import Audio as Audio
    from .format._media_audio import AudioSerializer as AudioSerializer
    from .format._media_graph import Graph as Graph
    from .format._media_image import Image as Image
    from .format._media_image import Jpeg as Jpeg
    from .format._media_image import JpegArray as JpegArray
    from .format._media_image import Pil as Pil
    from .format._media_image import Tiff as Tiff
    from .format._media_mesh import Mesh as Mesh
    from .format._media_mesh import Pdf as Pdf
    from .format._media_nifti import Nifti as Nifti
    from .format._media_tensor import Tensor as Tensor
    from .format._media_text import File as File
    from .format._media_text import Text as Text
    from .format._media_video import Video as Video
    from .format._media_video import VideoSerializer as VideoSerializer
    from .format._parquet import ParquetLoader as ParquetLoader
    from .format._serializer_base import Serializer as Serializer
    from .format._temporal import TemporalArrayLoader as TemporalArrayLoader
    from .read._astream import astream as astream
    from .read._sample_stream import SampleStream as SampleStream
    from .read._trust import set_allow_pickle as set_allow_pickle
    from .storage._resolver import Dir as Dir
    from .storage._store import LocalFileStore as LocalFileStore
    from .storage._store import ObstoreStore as ObstoreStore
    from .storage._store import Store as Store
    from .storage._walk import walk as walk
    from .write._complete import complete_dataset as complete_dataset
    from .write._complete import is_complete_dataset as is_complete_dataset
    from .write._hf import index_hf_dataset as index_hf_dataset
    from .write._hf import optimize_hf as optimize_hf
    from .write._map import map as map
    from .write._merge_datasets import merge_datasets as merge_datasets
    from .write._optimize import optimize as optimize
    from .write._parquet_index import index_parquet_dataset as index_parquet_dataset
    from .write._readers import BaseReader as BaseReader
    from .write._readers import ParquetReader as ParquetReader
    from .write._summary import RunSummary as RunSummary
    from .write._summary import WorkerSummary as WorkerSummary
    from .write._update import build_keys_index as build_keys_index
    from .write._update import dataset_update as dataset_update
    from .write._uploader import AsyncUploader as AsyncUploader
    from .write._uploader_stats import UploaderStatistics as UploaderStatistics
    from .write._writer import ChunkWriter as ChunkWriter

# Public name -> private module that defines it, imported by __getattr__ on first access, so that
# ``import litstream`` costs only this file (no torch, numpy, pyarrow or media library).
_LAZY = {
    "AsyncUploader": ".write._uploader",
    "Audio": ".format._media_audio",
    "AudioSerializer": ".format._media_audio",
    "BaseIndexer": "._raw_dataset",
    "BaseReader": ".write._readers",
    "Cache": "._litdata_cache",
    "ChunkWriter": ".write._writer",
    "CombinedStreamingDataset": "._combined_dataset",
    "Dir": ".storage._resolver",
    "Encryption": ".format._encryption",
    "FernetEncryption": ".format._encryption",
    "File": ".format._media_text",
    "FileIndexer": "._raw_dataset",
    "FileMetadata": "._raw_dataset",
    "Graph": ".format._media_graph",
    "Image": ".format._media_image",
    "Jpeg": ".format._media_image",
    "JpegArray": ".format._media_image",
    "LocalFileStore": ".storage._store",
    "Mesh": ".format._media_mesh",
    "Nifti": ".format._media_nifti",
    "NumaAffinity": "._affinity",
    "ObstoreStore": ".storage._store",
    "ParallelStreamingDataset": "._parallel_dataset",
    "ParquetLoader": ".format._parquet",
    "ParquetReader": ".write._readers",
    "Pdf": ".format._media_mesh",
    "Pil": ".format._media_image",
    "PyTreeLoader": ".format._loaders",
    "RSAEncryption": ".format._encryption",
    "RunSummary": ".write._summary",
    "SampleStream": ".read._sample_stream",
    "Serializer": ".format._serializer_base",
    "Store": ".storage._store",
    "StreamingDataLoader": "._dataloader",
    "StreamingDataset": "._dataset",
    "StreamingRawDataset": "._raw_dataset",
    "TemporalArrayLoader": ".format._temporal",
    "Tensor": ".format._media_tensor",
    "Text": ".format._media_text",
    "Tiff": ".format._media_image",
    "TokensLoader": ".format._loaders",
    "UploaderStatistics": ".write._uploader_stats",
    "Video": ".format._media_video",
    "VideoSerializer": ".format._media_video",
    "WorkerSummary": ".write._summary",
    "astream": ".read._astream",
    "breakpoint": "._debug",
    "build_keys_index": ".write._update",
    "complete_dataset": ".write._complete",
    "dataset_update": ".write._update",
    "get_gpu_affinity": "._affinity",
    "get_numa_affinity": "._affinity",
    "index_hf_dataset": ".write._hf",
    "index_parquet_dataset": ".write._parquet_index",
    "is_complete_dataset": ".write._complete",
    "iter_webdataset_tar": "._media_folder",
    "list_media_folder": "._media_folder",
    "litdata_collate": "._media_collate",
    "map": ".write._map",
    "merge_datasets": ".write._merge_datasets",
    "optimize": ".write._optimize",
    "optimize_hf": ".write._hf",
    "set_allow_pickle": ".read._trust",
    "train_test_split": "._split",
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
    "Video",
    "VideoSerializer",
    "WorkerError",
    "WorkerSummary",
    "astream",
    "breakpoint",
    "build_keys_index",
    "complete_dataset",
    "dataset_update",
    "get_gpu_affinity",
    "get_numa_affinity",
    "index_hf_dataset",
    "index_parquet_dataset",
    "is_complete_dataset",
    "iter_webdataset_tar",
    "list_media_folder",
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
