"""The playground's sliders: which setting each moves, its bounded range, and the check of what a page sends.

A page sends ``{"knob": number, ..., "shuffle": "false" | "true" | "window"}``; :func:`apply_knobs` checks every
key and value (a known knob, a finite number inside the knob's range, an integer where the setting is one) and
returns the configuration to simulate, or raises :class:`KnobError` naming the knob, the value and the range.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..simulate import SimulationConfig

__all__ = ["KNOBS", "SHUFFLES", "Knob", "KnobError", "apply_knobs", "knob_ranges", "knob_values"]

SHUFFLES = {"false": False, "true": True, "window": "window"}


class KnobError(ValueError):
    """A value from the page that is not usable (answered 400)."""


@dataclass(frozen=True)
class Knob:
    """One slider: ``section.name`` of :class:`~litstream.simulate.SimulationConfig` times ``scale``.

    Attributes:
        name: The slider's name, the JSON key, and the setting it moves (``section.name``).
        label: What the page shows. section: The setting's section. low, high, step: The slider's range.
        scale: Setting = slider value x scale (e.g. 1e-3 for milliseconds). integer: The setting is an int.
        zero_is_none: Slider 0 means ``None`` (no limit).
    """

    name: str
    label: str
    section: str
    low: float
    high: float
    step: float = 1
    scale: float = 1.0
    integer: bool = True
    zero_is_none: bool = False


KNOBS = (
    Knob("nodes", "machines", "cluster", 1, 16),
    Knob("ranks_per_node", "GPUs per machine", "cluster", 1, 8),
    Knob("num_workers", "DataLoader workers per GPU", "cluster", 0, 8),
    Knob("prefetch_factor", "batches ready ahead per worker", "cluster", 1, 8),
    Knob("batch_size", "batch size", "read", 1, 1024),
    Knob("epochs", "epochs", "read", 1, 4),
    Knob("max_pre_download", "chunks fetched ahead", "read", 1, 16),
    Knob("max_cache_size", "cache size (MB, 0: no limit)", "read", 0, 100_000, 100, 1e6, True, True),
    Knob("rtt", "round trip (ms)", "network", 0, 1000, 1, 1e-3, False),
    Knob("jitter", "round-trip jitter (sigma)", "network", 0, 1, 0.05, 1.0, False),
    Knob("connection_bandwidth", "bandwidth per request (MB/s)", "network", 1, 2000, 1, 1e6, False),
    Knob("node_bandwidth", "machine link (Gbit/s)", "network", 1, 400, 1, 1.25e8, False),
    Knob("rate_limit", "rate limit (requests/s, 0: none)", "network", 0, 20_000, 10, 1.0, False, True),
    Knob("device_time_per_sample", "device time per sample (ms)", "costs", 0, 100, 0.1, 1e-3, False),
    Knob("decode_time_per_sample", "decode time per sample (ms)", "costs", 0, 100, 0.1, 1e-3, False),
)  # fmt: skip


def knob_values(config: SimulationConfig) -> dict[str, Any]:
    """The slider positions of ``config`` (and its ``shuffle`` as the page names it)."""
    out: dict[str, Any] = {}
    for knob in KNOBS:
        value = getattr(getattr(config, knob.section), knob.name)
        out[knob.name] = 0 if value is None else round(value / knob.scale, 6)
    shuffle = config.read.shuffle
    out["shuffle"] = "window" if shuffle == "window" else "true" if shuffle is True or shuffle == "full" else "false"
    return out


def knob_ranges(config: SimulationConfig) -> dict[str, tuple[float, float]]:
    """Each knob's range, widened to hold ``config``'s own value (the config file is the user's own)."""
    values = knob_values(config)
    return {k.name: (min(k.low, values[k.name]), max(k.high, values[k.name])) for k in KNOBS}


def _number(knob: Knob, raw: Any, bounds: tuple[float, float]) -> float | int | None:
    low, high = bounds
    usable = (
        isinstance(raw, (int, float))
        and not isinstance(raw, bool)
        and math.isfinite(raw)
        and low <= raw <= high
        and (not knob.integer or knob.scale != 1 or float(raw).is_integer())
    )
    if not usable:
        kind = "an integer" if knob.integer and knob.scale == 1 else "a number"
        raise KnobError(f"{knob.name}={raw!r:.60} is not usable; use {kind} from {low:g} to {high:g}")
    if knob.zero_is_none and raw == 0:
        return None
    value = raw * knob.scale
    return round(value) if knob.integer else float(value)


def apply_knobs(config: SimulationConfig, sent: Any, ranges: dict[str, tuple[float, float]]) -> SimulationConfig:
    """``config`` with the page's knob values applied; knobs not sent keep ``config``'s values.

    Raises:
        KnobError: ``sent`` is not an object, names an unknown knob, or holds a value out of range.
    """
    if not isinstance(sent, dict):
        raise KnobError('send a JSON object of knob values, e.g. {"num_workers": 4}')
    known = {k.name: k for k in KNOBS}
    unknown = sorted(str(name) for name in sent if name not in known and name != "shuffle")
    if unknown:
        raise KnobError(f"{unknown[0][:60]!r} is not a knob; known: {', '.join(sorted([*known, 'shuffle']))}")
    changes: dict[str, dict[str, Any]] = {}
    for name, raw in sent.items():
        if name == "shuffle":
            if not isinstance(raw, str) or raw not in SHUFFLES:
                raise KnobError(f"shuffle={raw!r:.60} is not usable; use 'false', 'true' or 'window'")
            changes.setdefault("read", {})["shuffle"] = SHUFFLES[raw]
            continue
        knob = known[name]
        changes.setdefault(knob.section, {})[knob.name] = _number(knob, raw, ranges[name])
    sections = {name: dataclasses.replace(getattr(config, name), **fields) for name, fields in changes.items()}
    return dataclasses.replace(config, **sections)
