"""The run identity: the resolved config plus what the run found. Two runs whose calibers differ
(anything that can change a number) get different identity hashes. Each setting is stored once:
under "config", or at the top where the run resolved it (the timer, autotune)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import time
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from zlbench import __version__
from zlbench._version_info import dist_version, git_commit, package_commit
from zlbench.backends import DeviceBackend
from zlbench.config.secrets import scrub
from zlbench.planning.plan import Plan
from zlbench.planning.switches import named_env, switch_env
from zlbench.results.identity_layout import hashed_fields

# Config keys that say how to run, not what is measured: excluded from the hash. `identity` names
# variables to record: their values (switch_env) enter the hash, naming an unset one changes nothing.
NOT_CALIBER = ("resume", "cost_from", "progress", "dry_run", "fail_on", "store", "identity")
# Where compiled kernels are kept changes no number either (they are the same code, keyed by all
# that can change it: planning/plan.py shared_kernel_cache); recorded in plan.json's unit env.
NOT_CALIBER += ("share_kernels",)
# How a run's processes start is not what they measure either (launcher.prestart: resumed runs
# and history series go on whichever way it was set).
LIMITS = ("run_timeout_s", "time_min", "prestart")
# Config keys recorded at the top of the identity instead, as the run resolved them.
PROMOTED = ("timer", "autotune")
def recorded_switch_env(cfg: Mapping[str, Any], plan: Plan, backend: DeviceBackend,
                        environ: Mapping[str, str]) -> Dict[str, str]:
    """switch_env, less the variables the plan sets in every benchmark process (corpus.env, the A/B
    axis and ab.fixed, USE_FLAGTUNE, the caches, TRITON_CACHE_AUTOTUNING): their values are in the
    identity already (the config, the sides), and the shell's value, which no process sees, would
    tell two runs apart that measured alike."""
    env = switch_env(backend, environ, named_env(cfg))
    everywhere = set.intersection(*(set(u.env) for u in plan.units)) if plan.units else set()
    return {k: v for k, v in env.items() if k not in everywhere}


def build_identity(cfg: Dict[str, Any], plan: Plan, backend: DeviceBackend,
                   provenance: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    environ = os.environ if environ is None else environ
    caliber_cfg = {k: v for k, v in cfg.items() if k not in NOT_CALIBER}
    # Resolved values, not their spelling: backend=auto that found the CPU is backend=cpu.
    caliber_cfg["backend"] = {**caliber_cfg["backend"], "name": backend.name}
    if backend.name == "cpu":
        caliber_cfg["backend"]["slots"] = backend.slots
    # Each setting once: the timer (as resolved) and autotune (as USE_FLAGTUNE) are at the top.
    for key in PROMOTED:
        caliber_cfg.pop(key, None)
    # A run's time limits say how long it may go, not what it measures: a run cut by one is resumed
    # with another.
    caliber_cfg["launcher"] = {k: v for k, v in caliber_cfg["launcher"].items() if k not in LIMITS}
    # What the corpus' --dtypes takes checks input, it measures nothing (and runs made before it
    # existed hash as they did).
    caliber_cfg["corpus"] = {k: v for k, v in caliber_cfg["corpus"].items() if k != "dtypes_taken"}
    corpus_root = Path(plan.corpus_root)
    package_dir = Path(__file__).resolve().parents[1]  # zlbench/
    identity: Dict[str, Any] = {
        "config": caliber_cfg,
        "backend": backend.describe(),
        "devices": [d.as_dict() for d in plan.devices],
        "timer": {**dict(cfg["timer"]), "name": plan.timer},
        "autotune": "1" if cfg.get("autotune") else "0",
        "plugins": plan.plugins,
        "test_nodes": [n.nodeid for n in plan.nodes],
        "sides": {s.name: s.env for s in plan.sides},
        "rounds": plan.rounds,
        "corpus": {"name": cfg["corpus"]["name"], "root": str(corpus_root),
                   "commit": git_commit(corpus_root)},
        "versions": {
            "zlbench": __version__,
            "zlbench_commit": package_commit(package_dir),
            "python": platform.python_version(),
            "torch": dist_version("torch"),
            "triton": dist_version("triton"),
            "flag_gems": dist_version("flag_gems") or _source_version(corpus_root),
            "hydra-core": dist_version("hydra-core"),
            "submitit": dist_version("submitit"),
        },
        "switch_env": recorded_switch_env(cfg, plan, backend, environ),
        "host": socket.gethostname(),
    }
    shape = cfg.get("shape") or {}
    if shape.get("mode") == "file" and shape.get("file"):
        # The file's content is what is measured (its path alone: an edited file read as the same
        # caliber and resumed); only runs of shape=file carry the key, so others hash as before.
        path = Path(str(shape["file"])).expanduser().resolve()
        identity["shape_file"] = {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    identity = scrub(identity)  # a URL's password (FLAGGEMS_DB_URL, identity.env=[...]) is recorded masked
    identity["identity_hash"] = identity_hash(identity)
    identity["provenance"] = scrub(dict(provenance))
    identity["fail_on"] = list(cfg.get("fail_on") or [])
    identity["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return identity


def identity_hash(identity: Mapping[str, Any]) -> str:
    caliber = hashed_fields(identity)
    text = json.dumps(caliber, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _source_version(root: Path) -> Optional[str]:
    init = root / "src" / "flag_gems" / "__init__.py"
    if init.is_file():
        m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", init.read_text(encoding="utf-8"))
        if m:
            return m.group(1)
    return None
