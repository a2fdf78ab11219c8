"""Small shared helpers: versions and commits of what a run used, dtype spelling."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path
from typing import Optional


def dist_version(name: str) -> Optional[str]:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_commit(path: Path) -> Optional[str]:
    """The commit of a folder that is its own git checkout; None for one inside another repository
    (that commit is the enclosing repository's, not the folder's)."""
    try:
        top = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10, check=False)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != Path(path).resolve():
            return None
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    return out.stdout.strip() + ("+dirty" if dirty else "")


def package_commit(package_dir: Path) -> Optional[str]:
    """The zlbench commit a run used: its git checkout's (a source or editable install), else the
    one a wheel built from a checkout recorded (hatch_build.py), else None."""
    commit = git_commit(package_dir.parent)
    if commit:
        return commit
    try:
        return (package_dir / "_build_commit.txt").read_text().strip() or None
    except OSError:
        return None
