"""Large integer draws the corpus makes on the host, made on the device (inside the benchmark process).

FlagGems draws integer and bool inputs on the CPU and copies them over
(`torch.randint(..., device="cpu").to(device)`, benchmark/utils.py and 25 call sites). Its core
shapes hold up to 2^30 elements, and the CPU's generator, one thread, takes 5-6.5 s for such a
tensor on an H200's host: 47 of bitwise_left_shift's 49 s in a process (two tensors a shape, two
such shapes a dtype, two dtypes). A plain run pays that in every one of a row's processes, where
FlagGems' runner pays it once (benchmarks/gpu/RESULTS.md, thirty-first session).

Here such a draw (torch.randint aimed at the CPU, at least MIN_NUMEL elements) is made on the run's
device and copied back. On PINNED_DEVICES (CUDA, ROCm, XPU) it comes back in pinned (page-locked)
host memory: the copy back and the corpus' copy over then run at the bus' speed, and torch's pinned
cache serves a node's later draws of the same size without allocating (2^30 int32 on an H200 host:
9.9 s drawn on the CPU and copied over, 3.3 s through pageable memory, 1.8 s through pinned memory
the first time, 0.16 s after; benchmarks/gpu/host_draws_copy.py). That cache is emptied when each
test item ends, after pytest drops its arguments, so a process holds no cached pinned memory
between nodes (tensors a fixture, or a failed item's traceback, keeps alive are given back one item
later). Elsewhere, or where pinning or emptying fails, the copy back is pageable, and the
`host_draws` event says why (`pinned_error`).

The caller gets what it asked for: a CPU tensor of that shape, dtype and range, a leaf with
requires_grad as asked (pinned: `x.to(device, non_blocking=True)` then really is asynchronous, as
for any pinned tensor; FlagGems' benchmarks copy blocking). It comes from a generator of its own on
the device, seeded from the CPU's generator (which advances by one draw), so a node's inputs are the
same in each of its processes whatever the device's own generator did meanwhile (an op that draws
on the device, timed directly, advances it by a different number of calls in each process).

Left as the corpus wrote them: draws inside a timing call or a graph capture (the op's own), draws
whose call names a generator, an output, pinned memory, a layout or names, and torch.randn/rand
(FlagGems draws floats on the device; some backends cannot draw every float dtype). A device draw
that fails is made on the CPU as asked; the process says at its end how many moved, fell back and
why (the `host_draws` event)."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable, Dict, Optional

from zlbench.plugins import _runtime

# 2^20 elements: about 10 ms on the CPU, well above what a device draw and its copy cost.
MIN_NUMEL = 1 << 20
# Keywords a draw on the device passes on as they are; any other leaves the call as written.
_PASSED_ON = frozenset({"dtype", "device", "requires_grad", "low", "high", "size"})

_original: Optional[Callable] = None
# moved: draws made on the device; pinned: of those, copied back into pinned memory; pinned_error:
# why a copy back could not be pinned, or the pinned cache not emptied (pinning then stops).
counts: Dict[str, Any] = {"moved": 0, "pinned": 0, "fell_back": 0, "error": None, "pinned_error": None}
# The devices whose pinned-memory cache torch itself can empty: CUDA (ROCm's torch device too) and
# XPU. torch_npu and torch_musa pin through host allocators of their own that torch's emptiers do
# not reach (and on some torch builds the accelerator API crashes for a backend without one).
PINNED_DEVICES = frozenset({"cuda", "xpu"})
_pinning = True  # off where the pinned cache cannot be emptied
_emptier: Optional[Callable[[], None]] = None  # what empties it, once tried


def _first(key: str, why: str) -> None:
    """Keep the first reason of its kind for the host_draws event."""
    counts[key] = counts[key] or why[:300]


def _size(args: tuple, kwargs: Dict[str, Any]) -> Optional[tuple]:
    """The shape randint(high, size) / randint(low, high, size) / size= asks for, or None where it
    is not a sequence of ints."""
    size = kwargs["size"] if "size" in kwargs else (args[-1] if len(args) >= 2 else None)
    try:
        return tuple(operator.index(d) for d in size)
    except TypeError:  # not a sequence, or not of ints
        return None


def _aimed_at_cpu(torch, device: Any) -> bool:
    if device is None:
        default = getattr(torch, "get_default_device", None)
        return default is None or default().type == "cpu"
    try:
        return torch.device(device).type == "cpu"
    except (RuntimeError, TypeError):
        return False  # torch will say what is wrong with it


def _capturing(torch, device_type: str) -> bool:
    module = getattr(torch, device_type, None)
    check = getattr(module, "is_current_stream_capturing", None)
    try:
        return bool(check()) if check else False
    except Exception:
        return True  # cannot tell: leave the draw as written


def _device_generator(torch, device_type: str):
    """A generator on the device, seeded from the CPU's default generator."""
    generator = torch.Generator(device=device_type)
    # "cpu" named: under torch.set_default_device the seed would come from that device's generator
    generator.manual_seed(int(torch.empty((), dtype=torch.int64, device="cpu").random_()))
    return generator


def _host_cache_emptier(torch, device_type: str) -> Optional[Callable[[], None]]:
    """What empties torch's pinned-memory cache for `device_type`: CUDA's own, else the accelerator
    API; None for a device outside PINNED_DEVICES or a torch with neither."""
    if device_type not in PINNED_DEVICES:
        return None
    own = getattr(torch._C, "_host_emptyCache", None) if device_type == "cuda" else None
    return own or getattr(getattr(torch, "accelerator", None), "empty_host_cache", None)


def _not_pinned(why: str) -> None:
    global _pinning
    _pinning = False
    _first("pinned_error", why)


def _pinning_emptier(torch, device_type: str) -> Optional[Callable[[], None]]:
    """The pinned cache's emptier, called once before anything is pinned (emptying an empty cache
    costs nothing), so that where it fails nothing is left cached; None: copy back pageable."""
    global _emptier
    if _pinning and _emptier is None:
        candidate = _host_cache_emptier(torch, device_type)
        if candidate is None:
            _not_pinned(f"torch cannot empty a pinned-memory cache on {device_type}: copied back pageable")
            return None
        try:
            candidate()
        except Exception as e:
            _not_pinned(f"emptying the pinned cache: {type(e).__name__}: {e}")
            return None
        _emptier = candidate
    return _emptier if _pinning else None


def _pinned_empty(torch, shape, dtype):
    return torch.empty(shape, dtype=dtype, device="cpu", pin_memory=True)


def _copy_back(torch, drawn):
    """The device's draw on the host: pinned where that works and its cache can be emptied (a block
    left cached would stay until the process ends), else pageable."""
    host = None
    if _pinning_emptier(torch, drawn.device.type) is not None:
        try:
            host = _pinned_empty(torch, drawn.shape, drawn.dtype)
        except Exception as e:  # a backend without pinned memory, the host's limit
            _first("pinned_error", f"{type(e).__name__}: {e}")
    if host is None:
        return drawn.cpu()
    host.copy_(drawn)  # blocking: the values are there when the caller reads them
    if host.is_pinned():
        counts["pinned"] += 1
    else:
        _first("pinned_error", "pin_memory=True gave pageable memory")
    return host


def release_pinned() -> None:
    """Give the pinned memory that moved draws left in torch's cache back to the system (an item's
    end). Where that fails, later draws come back pageable."""
    if not counts["pinned"] or _emptier is None:
        return
    try:
        _emptier()
    except Exception as e:
        _not_pinned(f"emptying the pinned cache: {type(e).__name__}: {e}")


def _wrap(torch, original: Callable, device_type: str) -> Callable:
    @functools.wraps(original)
    def randint(*args, **kwargs):
        size = None
        if not _runtime.in_timing_call and set(kwargs) <= _PASSED_ON and _aimed_at_cpu(torch, kwargs.get("device")):
            size = _size(args, kwargs)
        if size is None or math.prod(size) < MIN_NUMEL or _capturing(torch, device_type):
            return original(*args, **kwargs)
        requires_grad = bool(kwargs.get("requires_grad", False))
        try:
            out = _copy_back(torch, original(*args, **{**kwargs, "device": device_type, "requires_grad": False,
                                                       "generator": _device_generator(torch, device_type)}))
        except Exception as e:  # the device cannot draw this (a dtype, memory): the CPU as asked
            counts["fell_back"] += 1
            _first("error", f"{type(e).__name__}: {e}")
            return original(*args, **kwargs)
        counts["moved"] += 1
        return out.requires_grad_(True) if requires_grad else out

    randint.__module__, randint.__qualname__ = "torch", "randint"  # pickles as torch.randint does
    return randint


def before_patching(torch) -> None:
    """torch.set_default_device gives a device to the factory functions it knows, a set it builds on
    first use from torch's attributes: built after the patch, it would hold the wrapper, and
    torch's own randint (which the wrapper calls) would no longer get the default device."""
    try:
        from torch.utils._device import _device_constructors

        _device_constructors()
    except Exception:  # a torch without it
        pass


def install(device_type: str) -> bool:
    """Make this process' large host integer draws on `device_type` (the backend's torch device);
    False on the CPU backend or without torch."""
    global _original
    if device_type == "cpu":
        return False
    if _original is not None:
        return True
    try:
        import torch
    except ImportError:
        return False
    before_patching(torch)
    _original = torch.randint
    torch.randint = _wrap(torch, _original, device_type)
    try:  # torch.jit.script of code that calls torch.randint compiles it as the builtin it is
        torch.jit._builtins._register_builtin(torch.randint, "aten::randint")
    except Exception:
        pass
    return True


def uninstall() -> None:
    """The corpus' own draws again (tests)."""
    global _original
    if _original is not None:
        import torch

        torch.randint, _original = _original, None
