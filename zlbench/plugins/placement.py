"""Memory placements of a timed call's inputs (timer.placements, graph timer).

On the H200 some rows move 4-11% between processes while each process reads them within 0.3%
(benchmarks/gpu/RESULTS.md, issue 13): the same inputs allocated again, after a pad of random size,
in one process, move the row as much (layer_norm [20,6,65536]: 5-7% across placements, 0.04-0.3%
between repeats of one placement; its torch reference alike). Where the inputs sit decides such a
row's time, and one process sees one placement. Timing a call at several placements and keeping
the median turns that luck into a statistic of the row.

A corpus' timed call is a closure over its inputs (FlagGems: `lambda: op(*args, **kwargs)`):
`relocated` swaps the tensors its closure holds (directly, or in tuples, lists and dicts) for
copies of the same values, shape and strides on fresh storage behind a pad, and puts the originals
back after. Calls whose tensors need gradients (a copy would leave the autograd graph), calls that
hold no tensors, and inputs larger than timer.placement_max_mb (DRAM-bound rows, which placement
does not move, and whose copies would cost memory) keep their one placement.
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
    if depth and isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_copy(v, make, depth - 1) for v in value)
    if depth and isinstance(value, list):
        return [_copy(v, make, depth - 1) for v in value]
    if depth and isinstance(value, dict):
        return {k: _copy(v, make, depth - 1) for k, v in value.items()}
    return value


def why_not(fn: Callable, max_bytes: float) -> Optional[str]:
    """Why fn's inputs cannot be placed again (None: they can)."""
    import torch

    cells = getattr(fn, "__closure__", None) or ()
    tensors = [t for c in cells for t in _tensors(_contents(c))]
    if not tensors:
        return "the timed call holds no tensors"
    if any(t.requires_grad or t.grad_fn is not None for t in tensors):
        return "its inputs need gradients"
    if any(t.layout != torch.strided or t.is_nested for t in tensors):
        return "its inputs are not all dense strided tensors"
    total = sum(t.untyped_storage().nbytes() for t in {id(t): t for t in tensors}.values())
    if total > max_bytes:
        return f"its inputs ({total / 2**20:.0f} MB) exceed timer.placement_max_mb"
    return None


def _contents(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


@contextmanager
def relocated(fn: Callable, seed: str, keep: List[Any]) -> Iterator[Callable]:
    """fn with its closure's tensors copied to fresh storage behind a pad of random size (2-64 MB
    plus a few pages, drawn from `seed`); the pad and the copies are appended to `keep`, so that the
    next placement lands elsewhere. The closure is restored on exit."""
    import torch

    rng = random.Random(seed)
    cells = [c for c in fn.__closure__ or () if any(True for _ in _tensors(_contents(c)))]
    saved: List[Tuple[Any, Any]] = [(c, c.cell_contents) for c in cells]
    copies = {}

    def make(t):
        if id(t) not in copies:  # one tensor held twice stays one tensor
            keep.append(torch.empty(rng.randint(1, 32) * 2**21 + rng.randint(1, 64) * 4096,
                                    dtype=torch.uint8, device=t.device))
            c = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
            c.copy_(t)
            copies[id(t)] = c
            keep.append(c)
        return copies[id(t)]

    try:
        for cell, value in saved:
            cell.cell_contents = _copy(value, make)
        yield fn
    finally:
        for cell, value in saved:
            cell.cell_contents = value
