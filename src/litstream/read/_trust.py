"""Whether a reader may unpickle: the ``allow_pickle`` policy of ``StreamingDataset``, ``astream`` and the
composite datasets.

Leaves a writer could store with no other serializer are stored with ``pickle`` (LitData's fallback), and
``pickle.loads`` runs whatever code the payload names. The decision, first match wins:

1. the reader's own ``allow_pickle=True`` / ``False``;
2. :func:`set_allow_pickle` (``True`` / ``False``; ``None`` undoes it);
3. the environment variable ``LITSTREAM_ALLOW_PICKLE`` (``1``/``true``/``yes`` or ``0``/``false``/``no``),
   read here and nowhere else;
4. by where the data is: refused for ``hf://``, ``http://`` and ``https://`` datasets (published by others),
   allowed for local directories and object stores (``s3://``, ``gs://``, ``azure://``, ... — your own
   buckets; LitData's behaviour) unless the dataset's ``index.json`` carries the trust marker (written
   from such data by ``merge_datasets`` or ``optimize``; ``format/_trust_marker.py``).

The decision is made when the reader is built, in the process that builds it, and travels with it to
DataLoader workers. A refused dataset raises :class:`~litstream.PickleRefusedError` when it is opened,
before any chunk is read. See docs/security.md.
"""

from __future__ import annotations

from .._core._environ import environ
from .._core._errors import ConfigurationError
from ..format._trust_marker import is_untrusted_location

__all__ = ["ENV_ALLOW_PICKLE", "check_allow_pickle", "reader_pickle", "resolve_allow_pickle", "set_allow_pickle"]

ENV_ALLOW_PICKLE = "LITSTREAM_ALLOW_PICKLE"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

_global: bool | None = None


def check_allow_pickle(value: object, argument: str = "allow_pickle") -> bool | None:
    """``value`` if it is ``True``, ``False`` or ``None``.

    Raises:
        ConfigurationError: anything else.
    """
    if value is not None and not isinstance(value, bool):
        raise ConfigurationError(
            f"{argument} must be True, False or None (the default for the data's location), got {value!r}"
        )
    return value


def set_allow_pickle(allow: bool | None) -> None:
    """Set, for this process, whether readers built from now on may unpickle leaves stored with ``pickle``.

    Readers given their own ``allow_pickle`` are not affected; ``None`` returns to the environment
    variable ``LITSTREAM_ALLOW_PICKLE`` and then to the default by location (refused for ``hf://`` and
    ``http(s)://``, allowed elsewhere). See docs/security.md.

    Args:
        allow: ``True`` to allow, ``False`` to refuse everywhere, ``None`` to undo an earlier call.

    Raises:
        ConfigurationError: ``allow`` is not a bool or ``None``.
    """
    global _global
    _global = check_allow_pickle(allow, "set_allow_pickle(allow)")


def _from_environment() -> bool | None:
    raw = (environ().litstream_allow_pickle or "").strip().lower()
    if not raw:
        return None
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigurationError(
        f"{ENV_ALLOW_PICKLE}={raw!r} is not understood; use 1/true/yes to allow pickled leaves or 0/false/no to "
        "refuse them (or unset it)"
    )


def resolve_allow_pickle(allow_pickle: bool | None, url: str | None) -> bool:
    """The decision for a reader of the dataset at ``url`` (order in the module docstring).

    Args:
        allow_pickle: The reader's own argument.
        url: The dataset's location as given (``"/data/ds"``, ``"s3://b/ds"``, ``"hf://datasets/o/n"``).

    Raises:
        ConfigurationError: a bad ``allow_pickle`` or environment value.
    """
    chosen = reader_pickle(allow_pickle, url)
    return True if chosen is None else chosen  # None: only the location decided, and it allows them


def reader_pickle(allow_pickle: bool | None, url: str | None) -> bool | None:
    """:func:`resolve_allow_pickle`, except ``None`` where only the location allowed pickles (step 4): the
    dataset's own trust marker (``format/_trust_marker.py``) then decides, when its index is read.

    Raises:
        ConfigurationError: a bad ``allow_pickle`` or environment value.
    """
    chosen = check_allow_pickle(allow_pickle)
    if chosen is None:
        chosen = _global
    if chosen is None:
        chosen = _from_environment()
    if chosen is None:
        return None if not is_untrusted_location((url or "").lower()) else False
    return chosen
