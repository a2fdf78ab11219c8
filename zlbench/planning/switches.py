"""Which environment variables can change a number: the switches a run identity records and a
plain run's shared kernel cache is keyed by (planning/identity.py, planning/plan.py)."""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from zlbench.backends import DeviceBackend
from zlbench.config.schema import shipped_axis_vars

# Switch env vars recorded for every backend (FlagGems' own, Triton's cache-invalidating ones).
COMMON_SWITCH = re.compile(r"^(FLAGTREE_|FLAGGEMS_|GEMS_VENDOR$|USE_FLAGTUNE$|TRITON_|ZL_)")
# Matched by it and no switch: the old runner's variables, which zlbench reads into its config (their
# effect is in the identity's config: config/command_line.py ENV_MIGRATION; no benchmark process
# reads them), and where the corpus is (FLAGGEMS_ROOT, corpus.root's default). Recorded, they told a
# run started with ZL_BACKEND=cpu from its resume with backend=cpu, which was then refused.
NOT_SWITCHES = frozenset({"ZL_BACKEND", "ZL_ENABLE_CUDAGRAPH", "ZL_DIRECT_REPEAT", "ZL_ISOLATE_TUNER_CACHE",
                          "FLAGGEMS_ROOT"})


def switch_env(backend: DeviceBackend, environ: Mapping[str, str], named: Iterable[str] = ()) -> Dict[str, str]:
    """The set variables that can change a number: by prefix, the backend's list, the switches of
    the shipped A/B axes, and named ones (identity.env, the A/B axis' variables)."""
    prefixes = tuple(backend.switch_env_prefixes)
    listed = set(backend.identity_env) | set(shipped_axis_vars()) | set(named)
    return {k: v for k, v in sorted(environ.items())
            if k in listed or (k not in NOT_SWITCHES and (COMMON_SWITCH.match(k)
                                                          or (prefixes and k.startswith(prefixes))))}


def named_env(cfg: Mapping[str, Any]) -> List[str]:
    ab = cfg.get("ab") or {}
    return [str(v) for v in (cfg.get("identity") or {}).get("env") or []] + \
        ([str(ab["var"])] if ab.get("var") else []) + [str(k) for k in ab.get("fixed") or {}]


def set_apart(a: Mapping[str, Any], b: Mapping[str, Any]) -> Dict[str, Tuple[Optional[str], Optional[str]]]:
    """The switch variables two run identities recorded apart: {VAR: (A's value, B's value)}, None
    where one did not set it (resume's refusal and a plain pair's A/B command word it each their way)."""
    env_a, env_b = a.get("switch_env") or {}, b.get("switch_env") or {}
    return {k: (env_a.get(k), env_b.get(k)) for k in sorted({*env_a, *env_b}) if env_a.get(k) != env_b.get(k)}
