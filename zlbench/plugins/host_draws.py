"""Large random draws the corpus makes on the host, made on the device (inside the benchmark process).

FlagGems draws integer and bool inputs on the CPU and copies them over
(`torch.randint(..., device="cpu").to(device)`, benchmark/utils.py and 25 call sites). Its core
shapes hold up to 2^30 elements, and the CPU's generator, one thread, takes 5-6.5 s for such a
tensor on an H200's host: 47 of bitwise_left_shift's 49 s in a process (two tensors a shape, two
such shapes a dtype, two dtypes). A plain run pays that in every one of a row's processes, where
FlagGems' runner pays it once (benchmarks/gpu/RESULTS.md, thirty-first session).

Here such a draw (torch.randint, torch.randn, torch.rand aimed at the CPU, at least MIN_NUMEL
elements) is made on the run's device and copied back. The caller gets what it asked for: a CPU
tensor of that shape, dtype and distribution, a leaf with requires_grad as asked. It comes from the
device's generator, which the record plugin seeds per node as it seeds the CPU's, so a node's inputs
are still the same in each of its processes. Nothing is drawn so inside a timing call or a graph
capture (the op's own draws stay as the corpus wrote them), nor where the call names a generator,
an output, pinned memory or a layout; a device draw that fails is made on the CPU as asked."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable, Dict, Optional

from zlbench.plugins import _runtime

# 2^20 elements: about 10 ms on the CPU, well above what a device draw and its copy cost.
MIN_NUMEL = 1 << 20
FUNCTIONS = ("randint", "randn", "rand")
# Keywords a draw on the device passes on as they are; any other (generator, out, pin_memory,
# layout, names) leaves the call as the corpus wrote it.
_PASSED_ON = frozenset({"dtype", "device", "requires_grad", "low", "high", "size"})

_originals: Dict[str, Callable] = {}
moved = 0  # draws made on the device in this process


def _size(name: str, args: tuple, kwargs: Dict[str, Any]) -> Optional[tuple]:
    """The shape a draw asks for, or None where it is not a plain sequence of ints."""
    if "size" in kwargs:
        size = kwargs["size"]
    elif name == "randint":  # randint(high, size) or randint(low, high, size)
        size = args[-1] if len(args) >= 2 else None
    else:  # randn(2, 3) or randn((2, 3))
        size = args[0] if len(args) == 1 and not isinstance(args[0], int) else args
    try:
        return tuple(operator.index(d) for d in size)
    except TypeError:  # not a sequence, or not of ints (a float, a tensor)
        return None


def _aimed_at_cpu(torch, device: Any) -> bool:
    if device is None:
        default = getattr(torch, "get_default_device", None)
        return default is None or default().type == "cpu"
    try:
        return torch.device(device).type == "cpu"
    except (RuntimeError, TypeError):
        return False


def _capturing(torch, device_type: str) -> bool:
    module = getattr(torch, device_type, None)
    check = getattr(module, "is_current_stream_capturing", None)
    try:
        return bool(check()) if check else False
    except Exception:
        return True  # cannot tell: leave the draw as written


def _wrap(torch, name: str, original: Callable, device_type: str) -> Callable:
    @functools.wraps(original)
    def draw(*args, **kwargs):
        global moved
        size = None
        if not _runtime.in_timing_call and set(kwargs) <= _PASSED_ON and _aimed_at_cpu(torch, kwargs.get("device")):
            size = _size(name, args, kwargs)
        if size is None or math.prod(size) < MIN_NUMEL or _capturing(torch, device_type):
            return original(*args, **kwargs)
        requires_grad = bool(kwargs.get("requires_grad", False))
        try:
            out = original(*args, **{**kwargs, "device": device_type, "requires_grad": False}).cpu()
        except Exception:  # the device cannot draw this (a dtype, memory): the CPU as asked
            return original(*args, **kwargs)
        moved += 1
        return out.requires_grad_(True) if requires_grad else out

    return draw


def install(device_type: str) -> bool:
    """Make this process' large host draws on `device_type` (the backend's torch device); False on
    the CPU backend or without torch."""
    if device_type == "cpu" or _originals:
        return bool(_originals)
    try:
        import torch
    except ImportError:
        return False
    for name in FUNCTIONS:
        _originals[name] = getattr(torch, name)
        setattr(torch, name, _wrap(torch, name, _originals[name], device_type))
    return True


def uninstall() -> None:
    """The corpus' own draws again (tests)."""
    import torch

    for name, original in _originals.items():
        setattr(torch, name, original)
    _originals.clear()
