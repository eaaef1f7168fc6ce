"""Byte-size strings as LitData parses them (decimal units: ``"64MB"`` is 64 000 000 bytes)."""

from __future__ import annotations

from ._errors import ConfigurationError

__all__ = ["parse_bytes"]

_SUFFIXES = (
    ("tb", 10**12),
    ("gb", 10**9),
    ("mb", 10**6),
    ("kb", 10**3),
    ("t", 10**12),
    ("g", 10**9),
    ("m", 10**6),
    ("k", 10**3),
    ("b", 1),
)


def parse_bytes(value: int | str, *, argument: str = "chunk_bytes") -> int:
    """Convert ``value`` to a byte count.

    Args:
        value: A positive ``int`` (bytes) or a string such as ``"64MB"``, ``"1.5g"`` or ``"512kb"``.
            Units are decimal (k = 1000) and case-insensitive, matching LitData.
        argument: The argument name used in error messages.

    Raises:
        ConfigurationError: not a positive int, or a string without a known unit (``"64MiB"``, ``"1000"``).
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigurationError(f"{argument} must be an int or a string like '64MB', got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ConfigurationError(f"{argument} must be positive, got {value}")
        return value
    text = value.strip().lower()
    for suffix, factor in _SUFFIXES:
        if text.endswith(suffix):
            number = text[: -len(suffix)].strip()
            try:
                result = int(float(number) * factor)
            except ValueError:
                break
            if result <= 0:
                break
            return result
    raise ConfigurationError(
        f"{argument}={value!r} is not a size litstream understands; use an int number of bytes or a "
        "number with one of the decimal units b, kb, mb, gb, tb (e.g. '64MB')"
    )
