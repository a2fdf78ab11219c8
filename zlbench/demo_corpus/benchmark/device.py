"""Which torch device the demo runs on: zlbench says so through ZLBENCH_TORCH_DEVICE."""

import os

import torch


def _detect():
    wanted = os.environ.get("ZLBENCH_TORCH_DEVICE")
    if wanted:
        return wanted
    return "cuda" if torch.cuda.is_available() else "cpu"


DEVICE = _detect()


def synchronize():
    if DEVICE != "cpu":
        getattr(torch, DEVICE).synchronize()
