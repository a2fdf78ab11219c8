"""The demo's alternative implementations, timed as the "gems" side against torch.

DEMO_GEMS_FUSED_SOFTMAX (0/1, default 0) is the demo's compiler-like switch: 1 makes gems_softmax a
single fused call, 0 a three-pass composition. It changes the measured latency for real, so an A/B
over it has something to find.
"""

import math
import os
import random

import torch

FUSED_SOFTMAX_ENV = "DEMO_GEMS_FUSED_SOFTMAX"


def gems_exp(x):
    return torch.pow(math.e, x)


def gems_add(a, b):
    return torch.sub(a, b, alpha=-1)


def gems_gelu(x):
    # tanh approximation, written out
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def gems_sum(x):
    return x.reshape(x.shape[0], -1).sum(dim=1).sum()


def gems_amax(x):
    return torch.max(x, dim=-1).values


def gems_softmax(x):
    if os.environ.get(FUSED_SOFTMAX_ENV, "0") == "1":
        return torch.softmax(x, dim=-1)
    shifted = x - x.amax(dim=-1, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


def gems_layer_norm(x):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5)


def gems_rms_norm(x):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)


def gems_mm(a, b):
    return torch.einsum("ik,kj->ij", a, b)


def make_flaky_sum(rng=random.Random()):
    """A sum whose cost is drawn once per timing call: 1x or 4x. Rows of this family are noisy
    from round to round by design (for noise and A/A tests)."""

    def flaky_sum(x):
        return x.sum()

    heavy = rng.random() < 0.35

    def slow_sum(x):
        for _ in range(3):
            x.sum()
        return x.sum()

    return slow_sum if heavy else flaky_sum
