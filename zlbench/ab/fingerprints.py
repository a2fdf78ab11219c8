"""Liveness evidence inside the benchmark process: the kernels a node compiled, one
'kernel:sha256' per distinct compiled kernel, taken from the Triton cache entries the node added.
An A/B compares these per op between its sides (zlbench/report/ab.py): byte-identical kernels on
both sides mean the switch did not reach the compiler."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
from typing import Callable, Iterable, List, Optional, Set

from zlbench.ab.kernels import kernel_stem

# What identifies a compiled kernel, best first: text IR with debug locations stripped (the paths
# of generated sources differ per A/B side and end up in debug info), then binaries, masked.
TEXT_ARTIFACTS = (".ptx", ".amdgcn", ".llir", ".ttgir", ".ttir")
BINARY_ARTIFACTS = (".cubin", ".hsaco", ".mubin", ".npubin", ".o", ".spv")
_DEBUG_LINE = re.compile(r"^\s*(?:\.file\b|\.loc\b|#loc\w*\s*=|!).*$", re.M)
_MLIR_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")
_LLVM_DBG = re.compile(r",\s*!dbg\s*!\d+")


def _cache_dir():
    return os.environ.get("TRITON_CACHE_DIR")


def cache_entries(path: Optional[str] = None) -> Set[str]:
    """The Triton cache entries present now (taken before a node runs): this process' cache, or the
    one at `path` (the A/B scheduler, for a benchmark process' cache)."""
    path = path or _cache_dir()
    try:
        return set(os.listdir(path)) if path else set()
    except OSError:
        return set()


def normalize_ir(text: str) -> str:
    """Code generation only: no debug sections, file/line directives or source locations."""
    cut = re.search(r"^\s*\.section\s+\.debug", text, re.M)
    if cut:
        text = text[:cut.start()]
    text = _LLVM_DBG.sub("", _MLIR_LOC.sub("", text))
    return _DEBUG_LINE.sub("", text)


def _mask_side_paths(blob: bytes) -> bytes:
    """Each A/B side has its own cache dirs (same length): mask their paths so equal code hashes equal."""
    for key in ("FLAGGEMS_CACHE_DIR", "TRITON_CACHE_DIR"):
        path = os.environ.get(key)
        if path:
            raw = path.encode()
            blob = blob.replace(raw, b"#" * len(raw))
    return blob


def _entry_hashes(folder: str) -> List[str]:
    """'kernel:sha256' of each kernel in one cache entry, from its best artifact."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    by_stem = {}
    for name in names:
        stem, ext = os.path.splitext(name)
        if ext in TEXT_ARTIFACTS + BINARY_ARTIFACTS:
            by_stem.setdefault(stem, {})[ext] = name
    out = []
    for stem, files in sorted(by_stem.items()):
        ext = next(e for e in TEXT_ARTIFACTS + BINARY_ARTIFACTS if e in files)
        with open(os.path.join(folder, files[ext]), "rb") as f:
            blob = f.read()
        if ext in TEXT_ARTIFACTS:
            blob = normalize_ir(blob.decode("utf-8", errors="replace")).encode()
        out.append(f"{stem}{ext}:{hashlib.sha256(_mask_side_paths(blob)).hexdigest()}")
    return out


def _artifact_hashes(entries: Iterable[str]) -> List[str]:
    """The distinct compiled kernels in the given cache entries, one 'kernel:sha256' each: two
    entries holding identical code (a kernel compiled again under another cache key) count once."""
    return sorted({h for entry in entries for h in _entry_hashes(os.path.join(_cache_dir(), entry))})


def new_kernels(before: Set[str]) -> List[str]:
    """The distinct kernels compiled since `before`: only new cache entries, i.e. first compiles."""
    return _artifact_hashes(cache_entries() - before)


_stems: dict = {}  # cache entry -> the kernel names its artifacts hold (an entry is written once)


def cached_kernels(names: Set[str]) -> List[str]:
    """'kernel:sha256' of every variant in the cache under these kernel names, whichever process of
    the side compiled it (the side's processes share its cache: another round's, a retry's, the
    prober's): a test that launched a kernel it did not compile gets these as its evidence."""
    if not names:
        return []
    folder = _cache_dir()
    for entry in cache_entries() - set(_stems):
        try:
            files = os.listdir(os.path.join(folder, entry))
        except OSError:
            continue
        _stems[entry] = {os.path.splitext(f)[0] for f in files
                         if os.path.splitext(f)[1] in TEXT_ARTIFACTS + BINARY_ARTIFACTS}
    wanted = [e for e, stems in _stems.items() if stems & names]
    return sorted(h for h in _artifact_hashes(wanted) if kernel_stem(h) in names)


@contextlib.contextmanager
def recording_launches(names: Set[str]):
    """Add to `names` the Triton kernels launched inside: a test launches kernels an earlier test of
    its side compiled, which new_kernels cannot see (plugins/record.py evidence). Through Triton's
    launch-enter hook (Triton 3.0 on): a chain (3.5 on), a plain knob (3.2-3.4) or CompiledKernel's
    class attribute (earlier, and vendors' forks of those); without one, nothing is recorded. Entered
    around one untimed call only: a hook costs every launch it sees."""
    def hook(metadata) -> None:
        data = getattr(metadata, "data", None)  # a LazyDict (Triton 3.0 on)
        name = data.get("name") if isinstance(data, dict) else \
            metadata.get("name") if isinstance(metadata, dict) else None
        if isinstance(name, str):  # Triton 2 hands the hook its CompiledKernel: nothing recorded
            names.add(name)

    undo = _install_launch_hook(hook)
    try:
        yield
    finally:
        if undo:
            undo()


@functools.lru_cache(maxsize=None)
def launch_hook_available() -> bool:
    """Whether this process' Triton has a launch-enter hook (no Triton, as on the CPU: no)."""
    undo = _install_launch_hook(lambda metadata: None)
    if undo:
        undo()
    return undo is not None


def _install_launch_hook(hook) -> Optional[Callable[[], None]]:
    """Install `hook` before every Triton launch (after any hook there: proton's); returns its undo."""
    try:
        from triton import knobs
        runtime = knobs.runtime
        chain = runtime.launch_enter_hook
    except (ImportError, AttributeError):
        runtime = chain = None
    if chain is not None and hasattr(chain, "add") and hasattr(chain, "remove"):
        chain.add(hook)
        return lambda: chain.remove(hook)
    if runtime is not None:  # a plain knob: None or one callable
        return _chained(runtime, "launch_enter_hook", hook)
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return None
    return _chained(CompiledKernel, "launch_enter_hook", hook) if hasattr(CompiledKernel, "launch_enter_hook") else None


def _chained(owner, attr: str, hook) -> Callable[[], None]:
    before = getattr(owner, attr, None)

    def both(metadata):
        if before is not None:
            before(metadata)
        hook(metadata)

    setattr(owner, attr, both)
    return lambda: setattr(owner, attr, before)
