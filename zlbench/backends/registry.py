"""Backend names, aliases and detection."""

from __future__ import annotations

import difflib
from typing import Dict, List

from zlbench.errors import UsageError
from zlbench.backends.ascend import AscendBackend
from zlbench.backends.base import DeviceBackend
from zlbench.backends.cpu import CpuBackend
from zlbench.backends.cuda import CudaBackend
from zlbench.backends.musa import MusaBackend
from zlbench.backends.rocm import RocmBackend

_BACKENDS: Dict[str, type] = {
    cls.name: cls for cls in (CudaBackend, MusaBackend, RocmBackend, AscendBackend, CpuBackend)
}
# Detection order: accelerators first, the CPU last.
DETECT_ORDER = ("cuda", "musa", "rocm", "ascend")
AUTO = "auto"


def backend_names() -> List[str]:
    return list(_BACKENDS)


def alias_table() -> Dict[str, str]:
    table = {AUTO: AUTO, "detect": AUTO}
    for name, cls in _BACKENDS.items():
        for alias in (name,) + cls.aliases:
            table[alias.lower()] = name
    return table


def canonical_name(name: str) -> str:
    """'NVIDIA' -> 'cuda'; unknown names raise a UsageError that lists every valid spelling."""
    table = alias_table()
    key = str(name).strip().lower()
    if key in table:
        return table[key]
    listing = "; ".join(
        f"{n} ({', '.join(c.aliases)})" if c.aliases else n for n, c in _BACKENDS.items()
    )
    close = difflib.get_close_matches(key, list(table), n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise UsageError(
        f"unknown backend '{name}'.{hint} Valid backends (aliases): {listing}; or auto. "
        "Fix: backend=<name>, or backend=auto (the first vendor with a device here, else the CPU)."
    )


def get_backend(name: str, **settings) -> DeviceBackend:
    backend = _BACKENDS[canonical_name(name)]()
    for key, value in settings.items():
        if value is not None:
            setattr(backend, key, value)
    return backend


def detect() -> str:
    """The first vendor whose tool lists a device; the CPU when none does."""
    for name in DETECT_ORDER:
        backend = _BACKENDS[name]()
        if backend.tool_present() and backend.enumerate_devices():
            return name
    return "cpu"
