"""Memory placements of a timed call's inputs (timer.placements, graph timer).

On the H200 some rows move 4-11% between processes while each process reads them within 0.3%
(benchmarks/gpu/RESULTS.md, issue 13): the same inputs allocated again, after a pad of random size,
in one process, move the row as much (layer_norm [20,6,65536]: 5-7% across placements, 0.04-0.3%
between repeats of one placement; its torch reference alike). Where the inputs sit decides such a
row's time, and one process sees one placement. Timing a call at several placements and keeping
the median turns that luck into a statistic of the row.

A corpus' timed call is a closure over its inputs (FlagGems: `lambda: op(*args, **kwargs)`):
`relocated` swaps the tensors its closure holds (directly, or in tuples, named tuples, lists and
dicts) for views of copies of their storages on fresh memory behind a pad, with the same size,
strides and storage offset (so views of one storage still alias, and alignment is kept), and puts
the originals back after. Calls whose tensors need gradients (a copy would leave the autograd
graph), carry a conjugate or negative bit (a copy would drop it: resolve_conj would time nothing),
are not dense, or hold no tensors, and inputs larger than timer.placement_max_mb (DRAM-bound rows,
which placement does not move, and whose copies would cost memory) keep their one placement.
Tensors held inside other objects (a module's weights) are not seen, and stay where they are.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional, Tuple

_DEPTH = 3  # args tuple -> list of tensors (e.g. cat's inputs) -> tensor


def _tensors(value: Any, depth: int = _DEPTH) -> Iterator[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif depth and isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v, depth - 1)
    elif depth and isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, depth - 1)


def _copy(value: Any, make: Callable[[Any], Any], depth: int = _DEPTH) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return make(value)
    if depth and isinstance(value, tuple):
        items = [_copy(v, make, depth - 1) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if depth and isinstance(value, list):
        return [_copy(v, make, depth - 1) for v in value]
    if depth and isinstance(value, dict):
        return {k: _copy(v, make, depth - 1) for k, v in value.items()}
    return value


def why_not(fn: Callable, max_bytes: float) -> Optional[str]:
    """Why fn's inputs cannot be placed again (None: they can)."""
    import torch

    tensors = [t for c in _tensor_cells(fn) for t in _tensors(c.cell_contents)]
    if not tensors:
        return "the timed call holds no tensors"
    if any(t.requires_grad or t.grad_fn is not None for t in tensors):
        return "its inputs need gradients"
    if any(t.layout != torch.strided or t.is_nested or t.is_quantized for t in tensors):
        return "its inputs are not all dense strided tensors"
    if any(t.is_conj() or t.is_neg() for t in tensors):
        return "its inputs carry a conjugate or negative bit, which a copy would drop"
    total = sum(t.untyped_storage().nbytes() for t in {id(t): t for t in tensors}.values())
    if total > max_bytes:
        return f"its inputs ({total / 2**20:.0f} MB) exceed timer.placement_max_mb"
    return None


def _tensor_cells(fn: Callable) -> List[Any]:
    """The cells of fn's closure that hold tensors (directly or in containers)."""
    def holds_tensors(cell) -> bool:
        try:
            return next(_tensors(cell.cell_contents), None) is not None
        except ValueError:  # an empty cell
            return False
    return [c for c in getattr(fn, "__closure__", None) or () if holds_tensors(c)]


@contextmanager
def relocated(fn: Callable, seed: str, keep: List[Any]) -> Iterator[Callable]:
    """fn with its closure's tensors copied to fresh storage behind a pad of random size (2-64 MB
    plus a few pages, drawn from `seed`); the pad and the copies are appended to `keep`, so that the
    next placement lands elsewhere. The closure is restored on exit."""
    import torch

    rng = random.Random(seed)
    saved: List[Tuple[Any, Any]] = [(c, c.cell_contents) for c in _tensor_cells(fn)]
    storages = {}  # the original storage's address -> its copy (views of one storage stay views of one)
    views = {}  # id of a tensor -> its view on the copy (a tensor held twice stays one tensor)

    def make(t):
        if id(t) not in views:
            views[id(t)] = view(t)
        return views[id(t)]

    def view(t):
        key = (t.device, t.untyped_storage().data_ptr())
        if key not in storages:
            keep.append(torch.empty(rng.randint(1, 32) * 2**21 + rng.randint(1, 64) * 4096,
                                    dtype=torch.uint8, device=t.device))
            src = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
            storages[key] = src.clone()
            keep.append(storages[key])
        return torch.empty(0, dtype=t.dtype, device=t.device).set_(
            storages[key].untyped_storage(), t.storage_offset(), t.size(), t.stride())

    try:
        for cell, value in saved:
            cell.cell_contents = _copy(value, make)
        yield fn
    finally:
        for cell, value in saved:
            cell.cell_contents = value
