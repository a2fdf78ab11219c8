"""Why a graph capture of autograd's backward is refused, and on which stream it is not.

FlagGems' backward benchmarks (base.get_latency with is_backward) run the forward once on the
current stream, then time `torch.autograd.grad(out, xs, dout, retain_graph=True)`. Autograd runs
each backward kernel on the stream its forward ran on; triton's do_bench_cudagraph captures on a
side stream of its own. Where the forward ran on the default stream, the backward's kernels go there
during the capture, which invalidates it (cudaErrorStreamCaptureInvalidated): zlbench then times the
shape directly (BENCHMARK_DIRECT_NO_CUDAGRAPH).

Each case runs in a fresh process (a failed capture may leave the context unusable), with the
forward and the capture on:
  default         the forward on the default stream (as FlagGems' runner and zlbench did)
  capture_stream  the whole case under torch.cuda.graph's capture stream (forward and backward on it)
  side_stream     the whole case under another side stream (not the capture's)
and the op from FlagGems (gems=1; nll_loss2d from torch too, gems=0). Prints one JSON line per case.

Usage (a CUDA machine; FlagGems from $FLAGGEMS_ROOT/src, as benchmarks/gpu/setup.sh sets it):
    python3 benchmarks/gpu/capture_backward.py [CASE...]
"""
from __future__ import annotations

import json
import subprocess
import sys


def inputs(case, torch, dev):
    """(op, args) of one backward case, in FlagGems' benchmark conventions (float16 leaves)."""
    import torch.nn.functional as F
    h = torch.float16

    def leaf(*shape, dtype=h):
        return torch.randn(*shape, dtype=dtype, device=dev).requires_grad_()

    if case == "nll_loss2d":
        return F.nll_loss, [leaf(64, 64, 4, 8), torch.randint(0, 8, (64, 4, 8), device=dev)]
    if case == "nll_loss2d_big":
        return F.nll_loss, [leaf(64, 64, 128, 128), torch.randint(0, 64, (64, 128, 128), device=dev)]
    if case == "nll_loss":
        return F.nll_loss, [leaf(4096, 256), torch.randint(0, 256, (4096,), device=dev)]
    if case == "avg_pool3d":
        return (lambda x: F.avg_pool3d(x, 3, 2, 1)), [leaf(4, 3, 16, 56, 56)]
    if case == "gelu":
        return F.gelu, [leaf(1024, 1024)]
    if case == "softmax":
        return (lambda x: torch.softmax(x, -1)), [leaf(1024, 1024)]
    if case == "ctc_loss":
        lp = torch.randn(64, 4, 32, device=dev).log_softmax(2).detach().requires_grad_()
        tg = torch.randint(1, 32, (58,), device=dev)
        il = torch.full((4,), 64, dtype=torch.long, device=dev)
        tl = torch.tensor([15, 15, 14, 14], dtype=torch.long, device=dev)
        return F.ctc_loss, [lp, tg, il, tl]
    raise SystemExit(f"unknown case {case}")


def one(case, mode, gems):
    import os

    import torch
    import triton

    if os.environ.get("FLAGGEMS_ROOT"):  # setup.sh names FlagGems' checkout; its package is under src/
        sys.path.insert(0, os.path.join(os.environ["FLAGGEMS_ROOT"], "src"))

    dev = "cuda"
    torch.manual_seed(0)
    stream = None
    if mode == "capture_stream":
        stream = torch.cuda.Stream()
        torch.cuda.graph.default_capture_stream = stream  # torch.cuda.graph captures on it
    elif mode == "side_stream":
        stream = torch.cuda.Stream()
    ctx = torch.cuda.stream(stream) if stream is not None else _null()
    out = {"case": case, "mode": mode, "gems": gems}
    try:
        with ctx:
            op, args = inputs(case, torch, dev)
            if gems:
                import flag_gems
                use = flag_gems.use_gems()
            else:
                use = _null()
            with use:
                y = op(*args)
                dout = torch.randn_like(y)
                xs = [a for a in args if torch.is_tensor(a) and a.requires_grad]
                fn = lambda: torch.autograd.grad((y,), xs, grad_outputs=(dout,), retain_graph=True)  # noqa: E731
                out["graph_ms"] = triton.testing.do_bench_cudagraph(fn, rep=20, grad_to_none=xs, return_mode="median")
                out["direct_ms"] = triton.testing.do_bench(fn, warmup=25, rep=50, grad_to_none=xs, return_mode="median")
        out["ok"] = True
    except Exception as e:  # the refusal, its first line and where it was raised
        import traceback
        tb = traceback.extract_tb(e.__traceback__)
        out.update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}",
                   where=[f"{f.filename.split('/')[-1]}:{f.lineno} {f.name}" for f in tb[-4:]])
    print(json.dumps(out), flush=True)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main(argv):
    if argv[:1] == ["--one"]:
        one(argv[1], argv[2], int(argv[3]))
        return
    cases = argv or ["nll_loss2d", "nll_loss", "avg_pool3d", "ctc_loss", "gelu"]
    triples = [(c, m, g) for c in cases for g, m in ((1, "default"), (1, "capture_stream"))]
    if "nll_loss2d" in cases:  # the op from torch too, and another side stream than the capture's
        triples += [("nll_loss2d", m, 0) for m in ("default", "capture_stream")] + [("nll_loss2d", "side_stream", 1)]
    for case, mode, gems in triples:
        r = subprocess.run([sys.executable, __file__, "--one", case, mode, str(gems)], capture_output=True,
                           text=True, timeout=120)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        print(lines[-1] if lines else json.dumps({"case": case, "mode": mode, "gems": gems, "ok": False,
                                                  "error": f"rc={r.returncode}: {r.stderr[-300:]}"}), flush=True)

if __name__ == "__main__":
    main(sys.argv[1:])
