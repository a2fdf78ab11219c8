"""Device backends: one module per vendor plus a registry. The only place that names a vendor."""

from zlbench.backends.base import DeviceBackend, DeviceInfo
from zlbench.backends.registry import backend_names, canonical_name, detect, get_backend

__all__ = [
    "DeviceBackend",
    "DeviceInfo",
    "backend_names",
    "canonical_name",
    "detect",
    "get_backend",
]
