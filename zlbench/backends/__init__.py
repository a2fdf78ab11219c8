"""Device backends: one module per vendor plus a registry. The only place that names a vendor."""

from zlbench.backends.base import MARKER_FALLBACK, MARKER_FATAL, MARKER_POISONED, DeviceBackend, DeviceInfo
from zlbench.backends.registry import backend_names, canonical_name, detect, get_backend

__all__ = [
    "DeviceBackend",
    "DeviceInfo",
    "MARKER_FALLBACK",
    "MARKER_FATAL",
    "MARKER_POISONED",
    "backend_names",
    "canonical_name",
    "detect",
    "get_backend",
]
