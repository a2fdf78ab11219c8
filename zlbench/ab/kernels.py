"""Is an A/B axis live for an op? Compare the kernels each side compiled (zlbench/ab/fingerprints.py
records them as 'kernel:sha256', one per distinct compiled kernel), with those it launched that
another test or process of its side compiled (plugins/record.py evidence)."""

from __future__ import annotations

from typing import Dict, Iterable, Optional


def by_kernel(entries: Optional[Iterable[str]]) -> Dict[str, set]:
    out: Dict[str, set] = {}
    for e in entries or []:
        name, _, digest = str(e).rpartition(":")
        out.setdefault(name, set()).add(digest)
    return out


def kernel_stem(entry: str) -> str:
    """'special_k0_kernel.ptx:ab12..' -> 'special_k0_kernel': the name a launch gives the kernel."""
    return str(entry).rpartition(":")[0].rsplit(".", 1)[0]


def compare_kernels(a: Optional[Iterable[str]], b: Optional[Iterable[str]]) -> Optional[bool]:
    """Kernel by kernel name, over the sets of distinct compiled variants of each side.

    True (live): some kernel compiled the same number of variants on both sides with different
    bytes, or has no variant in common between the sides (the switch changed its code). False (not live): for every kernel both compiled, one side's variants include the other's
    (identical code; a side that compiled an extra variant, e.g. one more specialization or a cache
    entry made again, is not evidence of a switch). None (unknown): no kernel compiled on both sides,
    or variants that differ both ways while sharing some."""
    ka, kb = by_kernel(a), by_kernel(b)
    common = sorted(set(ka) & set(kb))
    if not common:
        return None
    if any(ka[n] != kb[n] and (len(ka[n]) == len(kb[n]) or not ka[n] & kb[n]) for n in common):
        return True
    if all(ka[n] <= kb[n] or kb[n] <= ka[n] for n in common):
        return False
    return None
