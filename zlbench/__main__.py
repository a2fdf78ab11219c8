"""`python -m zlbench [overrides]` and the `zlbench` console script."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from .cli import normalize_argv
from .config import conf_dir, register_schemas
from .errors import UsageError

_provenance: dict = {}


def _fail(message: str) -> None:
    print(f"zlbench: error: {message}", file=sys.stderr)
    sys.exit(UsageError.exit_code)


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def _app(cfg: DictConfig) -> None:
    from .run import execute, remove_empty_run_dir

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        code = execute(cfg, run_dir, _provenance)
    except UsageError as e:
        remove_empty_run_dir(run_dir)
        _fail(str(e))
    if code:
        sys.exit(code)


def main() -> None:
    register_schemas()
    try:
        argv, provenance = normalize_argv(sys.argv[1:], os.environ)
    except UsageError as e:
        _fail(str(e))
    _provenance.clear()
    _provenance.update(provenance)
    sys.argv = [sys.argv[0]] + argv
    _app()


if __name__ == "__main__":
    main()
