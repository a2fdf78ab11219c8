"""The clock-stamp kernel (NVIDIA): a block that lands on SM 0 writes the global nanosecond timer
and SM 0's cycle counter into out[2 * slot], out[2 * slot + 1]. Launched with a grid of twice the
SM count so that some block runs on SM 0 (as nvbench's get_timestamps_kernel does). Imported only
where Triton and a CUDA device are present (plugins/clocks.py)."""

import triton
import triton.language as tl


@triton.jit
def _clock_stamp(out_ptr, slot):
    sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    if sm == 0:
        ns = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                       pack=1)
        cycles = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False,
                                           pack=1)
        tl.store(out_ptr + 2 * slot, ns)
        tl.store(out_ptr + 2 * slot + 1, cycles)


def stamp_launcher(grid: int):
    def stamp(buf, slot: int) -> None:
        _clock_stamp[(grid,)](buf, slot, num_warps=1)

    return stamp
