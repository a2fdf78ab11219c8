"""Hostile input through `python -m zlbench`, as a user meets it: refused before anything runs, one
message with the fix, exit 2, nothing left behind (no run dir, no zl_runs/<date>/, no store row), and
nothing of a live run touched. Secrets stay out of every file a run writes."""

import os
import signal
import subprocess
import sys

import pytest

from .conftest import FIXTURES, wait_for, zlbench

WAIT = FIXTURES / "wait_corpus"
QUICK = ["ops=[exp]", "dtypes=[float32]", "progress=none"]


def files_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def test_help_lists_only_the_launchers_a_user_picks(tmp_path):
    res = zlbench("--help", cwd=tmp_path)
    assert res.returncode == 0
    assert "launcher: local, slurm\n" in res.stdout and "schema" not in res.stdout
