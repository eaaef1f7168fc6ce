"""Move litstream's modules into rooms and rewrite every reference to them (re-runnable).

``python scripts/layout_move.py`` ``git mv``-s each module of :data:`MOVES` that still sits at its old
place, then rewrites, in every tracked text file, the references to old module names (absolute dotted
names, relative ``from .x import`` lines, ``src/litstream/...py`` paths) to the new ones. Running it
again after merging a branch written against the old layout only rewrites that branch's references.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# old dotted module (below ``litstream.``) -> new dotted module
MOVES: dict[str, str] = {
    # _core: what every room needs
    "_errors": "_core._errors",
    "_environ": "_core._environ",
    "_trace": "_core._trace",
    "_distributed": "_core._distributed",
    "_terminal": "_core._terminal",
    "_debug": "_core._debug",
    "_sync": "_core._bridge",
    "_portal": "_core._bridge",
    "_litdata_env": "_core._litdata_env",
    # _torch: the torch faces
    "_affinity": "_torch._affinity",
    "_collate": "_torch._collate",
    "_media_collate": "_torch._collate",
    "_torch._media_collate": "_torch._collate",
    "_combined_dataset": "_torch._combined",
    "_composite_dataset": "_torch._composite",
    "_composite_resume": "read._composite_state",  # the facade branch: no mixins, the logic in read/
    "_torch._composite_resume": "read._composite_state",
    "_dataloader": "_torch._dataloader",
    "_dataset": "_torch._dataset",
    "_dataset_io": "read._pump",
    "_torch._dataset_io": "read._pump",
    "_dataset_keys": "_torch._dataset",
    "_torch._dataset_keys": "_torch._dataset",
    "_dataset_plan": "read._reader",
    "_torch._dataset_plan": "read._reader",
    "_dataset_resume": "read._dataset_resume",
    "_torch._dataset_resume": "read._dataset_resume",
    "_selection": "read._reader",
    "_torch._selection": "read._reader",
    "_split": "_torch._split",
    "_litdata_cache": "_torch._litdata_cache",
    "_loader_profile": "_torch._loader_profile",
    "_parallel_dataset": "_torch._parallel",
    "_raw_dataset": "_torch._raw_dataset",
    "_slots": "_torch._slots",
    # _cli: the command line
    "_cli": "_cli._main",
    "_cache_cli": "_cli._cache",
    "_optimize_cli": "_cli._optimize",
    "_simulate_cli": "_cli._simulate",
    "_migrate_cli": "_cli._migrate_command",
    "_migrate": "_cli._migrate",
    "_migrate_rules": "_cli._migrate_rules",
    "_sim._tune_cli": "_cli._simulate_tune",
    # value helpers of the read arguments
    "_litdata_params": "read._params",
    "read._litdata_params": "read._params",
    "_local_remote": "read._local_remote",
    # ingest helpers
    "_media_folder": "write._media_folder",
    # format sub-rooms
    "format._arrow": "format.arrow._chunk",
    "format._arrow_ipc": "format.arrow._ipc",
    "format._arrow_write": "format.arrow._write",
    "format._parquet": "format.arrow._parquet",
    "format._mds": "format.mds._index",
    "format._mds_encodings": "format.mds._encodings",
    "format._media_audio": "format.media._audio",
    "format._media_base": "format.media._base",
    "format._media_foreign": "format.media._foreign",
    "format._media_graph": "format.media._graph",
    "format._media_image": "format.media._image",
    "format._media_image_codec": "format.media._image_codec",
    "format._image_serializers": "format.media._image_serializers",
    "format._media_mesh": "format.media._mesh",
    "format._media_nifti": "format.media._nifti",
    "format._media_paths": "format.media._paths",
    "format._media_registry": "format.media._registry",
    "format._media_tensor": "format.media._tensor",
    "format._media_text": "format.media._text",
    "format._media_video": "format.media._video",
    # read/plan: which items, in which order (pure)
    "read._assign": "read.plan._assign",
    "read._plan": "read.plan._plan",
    "read._window": "read.plan._window",
    "read._mixing": "read.plan._mixing",
    "read._lazy_order": "read.plan._lazy_order",
    "read._subset": "read.plan._subset",
    "read._compose": "read.plan._compose",
    "read._compose_resume": "read.plan._compose_resume",
    "read._resume": "read.plan._resume",
    "read._resume_types": "read.plan._resume_types",
    "read._checkpoint": "read.plan._checkpoint",
    "read._litdata_state": "read.plan._litdata_state",
    "read._session": "read.plan._session",
    "read._session_compose": "read.plan._session_compose",
    # read/cache: local chunk files
    "read._cache": "read.cache._cache",
    "read._cache_dirs": "storage._cache_dirs",
    "read.cache._dirs": "storage._cache_dirs",
    "format._units": "_core._units",
    "read._core": "read._engine",
    "read._source_cache": "read.cache._source_cache",
    # read/raw: never-optimized files
    "read._raw": "read.raw._stream",
    "read._raw_cache_view": "read.raw._cache_view",
    "read._raw_fetch": "read.raw._fetch",
    "read._raw_files": "read.raw._files",
    # read/aio: the async face
    "read._astream": "read.aio._astream",
    "read._astream_compose": "read.aio._compose",
    "read._sample_stream": "read.aio._sample_stream",
    # index: Parquet / Hub / raw-file indexing shared by read and write
    "write._parquet_index": "index._parquet",
    "read._raw_index": "index._raw",
    "read._raw_indexer": "index._raw_indexer",
    # write/run: the process runner
    "write._runner": "write.run._runner",
    "write._worker": "write.run._worker",
    "write._feed": "write.run._feed",
    "write._sequence_feed": "write.run._sequence_feed",
    "write._inputs": "write.run._inputs",
    "write._loader_inputs": "write.run._loader_inputs",
    "write._nodes": "write.run._nodes",
    "write._optimize_jobs": "write.run._jobs",
    "write._env": "write.run._env",
    "read._dataset_state": "read._reader",  # the reader objects: its functions became DatasetReader's methods
    # read/ by topic: opening a dataset (source/), bytes into samples (engine/), beside the reader and its spec
    "read._source": "read.source._source",
    "read._location": "read.source._location",
    "read._local_remote": "read.source._local_remote",
    "read._index_load": "read.source._index_load",
    "read._versions": "read.source._versions",
    "read._decoder_choice": "read.source._decoder_choice",
    "read._verify": "read.cache._verify",  # chunk checksums: checked as a chunk is cached or read
    "read.source._verify": "read.cache._verify",
    "read._headers": "read.source._headers",
    "read._keys": "read.source._keys",
    "read._sizes": "read.source._sizes",
    "read._inplace": "read.source._inplace",
    "read._engine": "read.engine._engine",
    "read._decode": "read.engine._decode",
    "read._pump": "read.engine._pump",
    "read._memory": "read.engine._memory",
    "read._limits": "read.engine._limits",
    "read._pages": "read.engine._pages",
}



def _final(module: str) -> str:
    """Where ``module`` lives after every move (a module moved twice: old -> middle -> now)."""
    seen = {module}
    while module in MOVES and MOVES[module] != module and MOVES[module] not in seen:
        module = MOVES[module]
        seen.add(module)
    return module


MOVES = {old: _final(new) for old, new in MOVES.items()}

# names that left a moved module for another one: old module -> {name: new module}
SYMBOL_MOVES: dict[str, dict[str, str]] = {
    "read._engine": dict.fromkeys(
        (
            "ShuffleMode",
            "Piece",
            "ReadPlanArgs",
            "ChunkWindow",
            "plan_pieces",
            "piece_chunks",
            "window_piece",
            "EAGER_WINDOW_ITEMS",
        ),
        "read.plan._pieces",
    )
    | {"split_head": "read._engine"},
    "read.plan._session": {"split_head": "read._engine"},
    "read._params": {"item_shuffle_window_value": "read._item_window", "check_write_params": "write._params"},
    "index._hf": {"optimize_hf": "write._hf"},
    "write._hf": dict.fromkeys(("hf_dataset_index", "ahf_dataset_index", "index_hf_dataset", "hub_url"), "index._hf"),
}

# files whose references stay as they are
KEEP = {"pyproject.toml"}

PACKAGE_DOCS = {
    "_core": "What every room uses: errors, environment, tracing, distributed context, the sync/async bridge.",
    "_torch": "The torch faces: StreamingDataset, StreamingDataLoader, Combined / Parallel, raw dataset, collate.",
    "_cli": "The ``litstream`` command line.",
    "format.arrow": "Arrow IPC chunks and Parquet files.",
    "format.mds": "MosaicML MDS datasets.",
    "format.media": "The typed media wrappers and their serializers.",
    "read.plan": "Which items a (rank, worker, epoch) reads and in which order, and resume state. Pure: no I/O.",
    "read.cache": "Local chunk files: the cache directory, eviction, the cached chunk source.",
    "read.raw": "Raw streaming of never-optimized files.",
    "read.aio": "The async face: ``astream`` and its sample stream.",
    "read.source": "Opening a dataset: where it is, its index and version, its decoder, checks on what it holds.",
    "read.engine": "Bytes into samples: ordered chunk prefetch, decoding, the sync pump, memory budgets.",
    "index": "Indexing of Parquet files, Hub repositories and raw file trees, shared by read and write.",
    "write.run": "The process runner of ``optimize`` / ``map``: workers, input feeds, multi-node.",
}

TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".ini", ".sh", ""}


def _path(mod: str) -> Path:
    return SRC / "litstream" / (mod.replace(".", "/") + ".py")


def _new_modules() -> set[str]:
    out = set()
    for p in (SRC / "litstream").rglob("*.py"):
        rel = p.relative_to(SRC / "litstream").with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.add(".".join(parts))
    return out


def move_files() -> set[str]:
    moved = set()
    for old, new in MOVES.items():
        src, dst = _path(old), _path(new)
        if not src.exists():
            continue
        if dst.exists() and old != "_cli":
            sys.exit(f"both {src} and {dst} exist")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if old == "_cli":  # the module becomes a package of the same name
            tmp = src.with_name("_cli_main_tmp.py")
            subprocess.run(["git", "mv", str(src), str(tmp)], check=True, cwd=ROOT)
            dst.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", str(tmp), str(dst)], check=True, cwd=ROOT)
        else:
            subprocess.run(["git", "mv", str(src), str(dst)], check=True, cwd=ROOT)
        moved.add(new)
    for pkg, doc in PACKAGE_DOCS.items():
        init = SRC / "litstream" / pkg.replace(".", "/") / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(f'"""{doc}"""\n')
            subprocess.run(["git", "add", str(init)], check=True, cwd=ROOT)
    main = SRC / "litstream" / "_cli" / "__main__.py"
    if not main.exists():
        main.write_text(
            '"""``python -m litstream._cli``."""\n\nimport sys\n\nfrom ._main import main\n\nsys.exit(main())\n'
        )
        subprocess.run(["git", "add", str(main)], check=True, cwd=ROOT)
    return moved


def _exists(name: str, new_mods: set[str]) -> bool:
    return name in new_mods


def _map_dotted(name: str, new_mods: set[str]) -> str:
    """``a.b.c`` (below ``litstream.``) in the old layout -> the new layout; unchanged if already new."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in MOVES and not (prefix == "_cli" and k < len(parts) and ".".join(parts[: k + 1]) in new_mods):
            if prefix in new_mods and prefix != "_cli":
                return name
            return ".".join([MOVES[prefix], *parts[k:]])
        if prefix in new_mods:
            return name
    return name


_ABS = re.compile(r"\blitstream((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_PATH = re.compile(r"\b(src/)?litstream/((?:[A-Za-z_][A-Za-z0-9_]*/)*[A-Za-z_][A-Za-z0-9_]*)\.py\b")
_FROM_PKG = re.compile(
    r"^(?P<ind>[ \t]*)from litstream(?P<pkg>(?:\.[A-Za-z_]\w*)*) import (?P<name>_\w+)(?P<alias> as \w+)?$", re.M
)


def _from_package(m: re.Match[str], new_mods: set[str]) -> str:
    """``from litstream.read import _source_cache`` (a module imported from its package) -> its new package."""
    pkg = m["pkg"][1:]
    old = f"{pkg}.{m['name']}" if pkg else m["name"]
    new = _map_dotted(old, new_mods)
    if new == old or new.rsplit(".", 1)[-1] != m["name"]:
        return m.group(0)
    parent = new.rsplit(".", 1)[0] if "." in new else ""
    return f"{m['ind']}from litstream{'.' + parent if parent else ''} import {m['name']}{m['alias'] or ''}"


_ROOM_PATH = re.compile(r"(?<![\w./])((?:read|write|format|storage|_core|_torch|_cli|index)/(?:\w+/)*_\w+)\.py\b")
_BARE_PATH = re.compile(r"`(_[a-z]\w*)\.py`")
_ABS_FROM = re.compile(r"^(?P<ind>[ \t]*)from litstream\.(?P<mod>[A-Za-z_][\w.]*) import (?P<rest>[^\n(]+)$", re.M)
_LAZY_ENTRY = re.compile(r'"(\w+)": "\.([A-Za-z_][\w.]*)"')
_REL = re.compile(r"^(?P<indent>[ \t]*)from (?P<dots>\.+)(?P<mod>[A-Za-z_][A-Za-z0-9_.]*)? import (?P<rest>.*)$", re.M)


def _module_of(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(SRC / "litstream").with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def _rewrite_relative(text: str, path: Path, old_self: str, new_mods: set[str], moved_now: bool) -> str:
    """Relative imports of a module now at ``path`` that was ``old_self`` before the move."""
    new_self, is_pkg = _module_of(path)
    old_pkg = old_self.split(".") if is_pkg else old_self.split(".")[:-1]
    new_pkg = new_self.split(".") if is_pkg else new_self.split(".")[:-1]
    old_pkg = [p for p in old_pkg if p]
    new_pkg = [p for p in new_pkg if p]

    def resolve(pkg: list[str], level: int, mod: str | None) -> str | None:
        if level - 1 > len(pkg):
            return None
        base = pkg[: len(pkg) - (level - 1)]
        return ".".join([*base, *(mod.split(".") if mod else [])])

    def repl(m: re.Match[str]) -> str:
        level = len(m["dots"])
        from_old = resolve(old_pkg, level, m["mod"])
        from_new = resolve(new_pkg, level, m["mod"])
        if moved_now or from_new is None or not (from_new == "" or _exists(from_new, new_mods) or from_new in MOVES):
            target_old = from_old
        else:
            target_old = from_new
        if target_old is None:
            return m.group(0)
        rest = m["rest"]
        if not m["mod"] or target_old in ("", "format", "read", "write", "storage"):
            # ``from . import _x`` / ``from .read import _x``: the names may be modules
            names = [n.strip() for n in rest.strip("() ").split(",") if n.strip()]
            heads = {n.split(" as ")[0].strip() for n in names}
            full = {h: (f"{target_old}.{h}" if target_old else h) for h in heads}
            mapped = {h: _map_dotted(f, new_mods) for h, f in full.items()}
            if any(mapped[h] != full[h] for h in heads):
                parents = {mapped[h].rsplit(".", 1)[0] if "." in mapped[h] else "" for h in heads}
                leaves = {h: mapped[h].rsplit(".", 1)[-1] for h in heads}
                if len(parents) != 1 or any(leaves[h] != h for h in heads):
                    raise SystemExit(f"{path}: cannot rewrite {m.group(0)!r} by script; fix it by hand")
                target_new = parents.pop()
            else:
                target_new = _map_dotted(target_old, new_mods) if target_old else ""
        else:
            target_new = _map_dotted(target_old, new_mods)
        return _split_symbols(m["indent"], target_new, rest, lambda t: _relative(new_pkg, t))

    return _REL.sub(repl, text)


def _split_symbols(indent: str, module: str, rest: str, spell: Callable[[str], str]) -> str:
    """``from MODULE import rest``, split when some of the names moved to another module (:data:`SYMBOL_MOVES`)."""
    moves = SYMBOL_MOVES.get(module)
    if moves is None or "(" in rest:
        return f"{indent}{spell(module)} import {rest}"
    names = [n.strip() for n in rest.split("#")[0].split(",") if n.strip()]
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(moves.get(name.split(" as ")[0].strip(), module), []).append(name)
    if list(groups) == [module]:
        return f"{indent}{spell(module)} import {rest}"
    return "\n".join(f"{indent}{spell(target)} import {', '.join(group)}" for target, group in groups.items())


def _relative(pkg: list[str], target: str) -> str:
    tparts = target.split(".") if target else []
    common = 0
    while common < len(pkg) and common < len(tparts) and pkg[common] == tparts[common]:
        common += 1
    up = len(pkg) - common
    dots = "." * (up + 1)
    tail = ".".join(tparts[common:])
    return f"from {dots}{tail}"


def rewrite(old_of: dict[Path, str], moved: set[str]) -> None:
    new_mods = _new_modules()
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    for rel in files:
        path = ROOT / rel
        if path.suffix not in TEXT_SUFFIXES or not path.is_file() or rel.startswith("scripts/layout_move"):
            continue
        if rel.startswith(("tests/data/", "shared/")) or "CHANGELOG" in rel or rel in KEEP:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = _FROM_PKG.sub(lambda m: _from_package(m, new_mods), text)
        new = _ABS_FROM.sub(
            lambda m: _split_symbols(
                m["ind"], _map_dotted(m["mod"], new_mods), m["rest"], lambda t: "from litstream." + t
            ),
            new,
        )
        new = _ABS.sub(lambda m: "litstream." + _map_dotted(m[1][1:], new_mods), new)
        new = _PATH.sub(
            lambda m: (
                (m[1] or "") + "litstream/" + _map_dotted(m[2].replace("/", "."), new_mods).replace(".", "/") + ".py"
            ),
            new,
        )
        new = _ROOM_PATH.sub(lambda m: _map_dotted(m[1].replace("/", "."), new_mods).replace(".", "/") + ".py", new)
        new = _BARE_PATH.sub(lambda m: "`" + _map_dotted(m[1], new_mods).replace(".", "/") + ".py`", new)
        if path == SRC / "litstream" / "__init__.py":  # the lazy table: ``"Name": ".module"``
            new = _LAZY_ENTRY.sub(lambda m: f'"{m[1]}": ".{_map_dotted(m[2], new_mods)}"', new)
        if path.suffix == ".py" and path.is_relative_to(SRC / "litstream"):
            own_new, _is_pkg = _module_of(path)
            old_self = old_of.get(path, own_new)
            new = _rewrite_relative(new, path, old_self, new_mods, own_new in moved)
        if new != text:
            path.write_text(new)


def main() -> None:
    inverse = {v: k for k, v in MOVES.items()}
    moved = move_files()
    old_of = {}
    for p in (SRC / "litstream").rglob("*.py"):
        mod, _ = _module_of(p)
        old_of[p] = inverse.get(mod, mod)
    rewrite(old_of, moved)


if __name__ == "__main__":
    main()
