"""Which settings a checkpoint must share with the dataset that resumes from it, and the message naming a
mismatch (pure: no I/O, no event loop)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CONFIG_KEYS", "check_config", "config_mismatches"]

#: Dataset-state keys that must match between the checkpointed run and the resuming one.
CONFIG_KEYS = (
    "shuffle",
    "seed",
    "drop_last",
    "input_dir_path",
    "input_dir_url",
    "item_loader",
    "shuffle_window",
    "item_shuffle_window",
)


def config_mismatches(state: Mapping[str, Any], current: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each key of :data:`CONFIG_KEYS` whose saved value differs from ``current``'s, with its message.

    Both spellings of a value are equal: the default item loader as ``{}`` or ``None`` (LitData's),
    and ``drop_last=None`` or the bool it resolved to on the first level's world size (LitData's).
    """
    out = []
    first_world = state.get("initial_world_size", state.get("world_size", 1))
    for key in CONFIG_KEYS:
        if key == "shuffle_window" and (key not in state or state.get("shuffle") != "window"):
            continue  # only matters for the window shuffle; older checkpoints lack it
        if key == "item_shuffle_window" and state.get("shuffle") not in (True, "full"):
            continue  # only orders items with the full shuffle
        saved, now = state.get(key), current.get(key)
        if key == "item_shuffle_window" and key not in state:
            saved = 0  # checkpoints of older litstream and LitData < 0.2.76 permuted whole slices
        if key == "item_loader" and saved in (None, {}) and now in (None, {}):
            continue
        if key == "drop_last" and now is None and saved == (isinstance(first_world, int) and first_world > 1):
            continue
        if saved != now:
            out.append(
                (
                    key,
                    f"checkpoint has {key}={saved!r} but this dataset has {key}={now!r}; build the dataset "
                    f"with {key}={saved!r} (as in the run that saved it) to resume, or start without the checkpoint",
                )
            )
    return out


def check_config(state: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise unless ``state`` was saved with the same value of every key in :data:`CONFIG_KEYS`.

    Raises:
        ConfigurationError: names the key, the checkpoint's value, this dataset's value and the fix.
    """
    for _key, message in config_mismatches(state, current)[:1]:
        raise ConfigurationError(message)
