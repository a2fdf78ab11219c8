"""Build hook: a wheel built from a git checkout carries that checkout's commit
(zlbench/_build_commit.txt), so runs of a `pip install .` name the zlbench they ran in their
identity and the history (an editable install reads the checkout itself)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _git(root: str, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


class CommitHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        commit = _git(self.root, "rev-parse", "HEAD")
        if not commit:
            return  # not a git checkout (an sdist): the identity says null, as before
        if _git(self.root, "status", "--porcelain", "--untracked-files=no"):
            commit += "+dirty"
        self._made = tempfile.mkdtemp(prefix="zlbench_build_")  # removed in finalize, once the wheel holds it
        path = os.path.join(self._made, "_build_commit.txt")
        with open(path, "w") as f:
            f.write(commit + "\n")
        build_data["force_include"][path] = "zlbench/_build_commit.txt"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        made = getattr(self, "_made", None)
        if made:
            shutil.rmtree(made, ignore_errors=True)
