"""`python -m zlbench [overrides]` and the `zlbench` console script.

The task function never exits the process: it records each job's exit code, so a Hydra multirun
sweep (-m) runs every job even when one fails, then exits with the most serious code and a table
of the jobs. Codes: zlbench/exitcodes.py (README: "Exit codes")."""

from __future__ import annotations

import difflib
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from zlbench import __version__
from zlbench.config import output_dir
from zlbench.config.command_line import env_origin, normalize_argv, set_keys
from zlbench.config.schema import conf_dir, register_schemas
from zlbench.config.validate import config_notes
from zlbench.config.group_files import CHECKED, group_file_problems
from zlbench.errors import UsageError
from zlbench.exitcodes import Exit
from zlbench.terminal import let_readers_leave

log = logging.getLogger("zlbench")
_provenance: dict = {}
# Folders that did not exist before Hydra made the run (or sweep) dir: a refused run removes them.
_made: List[Path] = []
# (job label, run dir, exit code) of every job this process ran (one, or a multirun sweep's).
_jobs: List[Tuple[str, str, int]] = []
# (job label, the command that runs it) of a sweep's jobs an interrupt left unrun.
_not_run: List[Tuple[str, str]] = []
# Most serious first: the code a sweep exits with.
SEVERITY = (Exit.INTERRUPTED, Exit.USAGE, Exit.INTERNAL, Exit.DEAD_AXIS, Exit.CUT, Exit.NOT_OK)


# Hydra composes its own help without zlbench's config (and advertises a shell completion that
# cannot work for `python -m zlbench`): zlbench answers --hydra-help itself.
HYDRA_HELP = """zlbench takes its configuration through Hydra. Flags:
  --help,-h        zlbench's help: config groups, examples, outputs
  --cfg,-c job     show the composed config and run nothing (add --resolve to resolve it)
  --multirun,-m    a sweep, one run per value: -m ab=musa_rlc ab.side=off,on
  --info,-i        what Hydra sees: config search path, defaults tree
  --version,-V     zlbench's version
Any key of the config is an override: key=value (README: Configuration)."""


# Hydra's long flags that take a value, also spelt --flag=value.
HYDRA_VALUE_FLAGS = ("--config-path", "--config-name", "--config-dir", "--cfg", "--package", "--info",
                     "--experimental-rerun", "--shell-completion")
# Flags with which Hydra shows something and runs nothing (no run dir).
INFO_FLAGS = ("--help", "-h", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc", "--resolve")


def _error(message: str) -> None:
    print(f"zlbench: error: {message}", file=sys.stderr)


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def _app(cfg: DictConfig) -> None:
    from zlbench.engine.run import execute

    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    # As typed: iterating hc.overrides.task would resolve an interpolation in it (${oc.env:UNSET} died here).
    label = " ".join(OmegaConf.to_container(hc.overrides.task, resolve=False)) or "(defaults)"
    if any(code == Exit.INTERRUPTED for _, _, code in _jobs):  # the sweep was interrupted: skip
        import shlex

        overrides = [*OmegaConf.to_container(hc.overrides.task, resolve=False), f"hydra.run.dir={run_dir}"]
        _not_run.append((label, "python -m zlbench " + shlex.join(overrides)))
        return
    try:
        # An axis or corpus file of the user's with `values: [off, on]`: the command line's are checked before Hydra.
        problems = group_file_problems(OmegaConf.to_container(hc.runtime.choices),
                                       OmegaConf.to_container(hc.runtime.config_sources),
                                       {g: OmegaConf.to_container(cfg[g], resolve=False) for g in CHECKED if g in cfg},
                                       set_keys(OmegaConf.to_container(hc.overrides.task, resolve=False)),
                                       primary=hc.job.config_name)
        if problems:
            raise UsageError("\n".join(problems))
        for note in config_notes(cfg):
            log.info(f"[zlbench] note: {note}")
        # The job's own overrides (a sweep's job has its values, not the sweep's): the resume command
        # is read from them in run_identity.json, which no refused or dry run rewrites.
        job = OmegaConf.to_container(hc.overrides.task, resolve=False)
        # The store it records itself in, for a later `zlbench collect` (a password is masked).
        store_url = OmegaConf.select(cfg, "store.url", default="default", throw_on_resolution_failure=False)
        # The run's own id, drawn as it starts (a resume keeps the run's provenance, this with it): two
        # runs of one config started in the same second on one host are two runs in the store.
        code = int(execute(cfg, run_dir, {**_provenance, "job_overrides": job, "store_url": str(store_url),
                                          "run_uid": secrets.token_hex(8)}))
    except UsageError as e:
        output_dir.remove_refused_run_dir(run_dir)
        _error(str(e) + env_origin(str(e), _provenance))
        code = int(Exit.USAGE)
    except Exception:  # a bug in zlbench: one line here, the traceback in zlbench.log
        log.debug("internal error", exc_info=True)  # zlbench.log only (its handler takes DEBUG)
        _error(f"internal error ({sys.exc_info()[1]!r}); the traceback is in {run_dir / 'zlbench.log'}. "
               "Please report it with that file.")
        code = int(Exit.INTERNAL)
    if not run_dir.exists():  # a refused or dry run: nothing of it stays, zl_runs/<date>/ neither
        output_dir.remove_made_folders(run_dir, _made)
    # A resumed job measured into the run dir it resumed, not Hydra's job dir (which holds its log only).
    resumed = OmegaConf.select(cfg, "resume", default=None, throw_on_resolution_failure=False)
    where = Path(str(resumed)).expanduser().resolve() if resumed and code != Exit.USAGE else run_dir
    _jobs.append((label, str(where), code))


def _check_output_dir(argv: List[str]) -> None:
    """Before Hydra makes the run (or sweep) dir and writes .hydra/ into it: refuse a dir that cannot
    be written, or that a live run holds (its .hydra/ files would be overwritten by a run that is
    then refused), and remember which folders Hydra will make for it."""
    key, value, path = output_dir.planned(argv)
    _made.clear()
    if path is None or any(a in INFO_FLAGS for a in argv):
        return
    output_dir.check_writable(key, value, path)
    from zlbench.results.rundir import RUN_LOCK_FILE

    if key == "hydra.run.dir" and (path / RUN_LOCK_FILE).exists():
        from zlbench.engine.locks import RunDirLock

        with RunDirLock(path):  # raises UsageError (naming the holder) while that run is alive
            pass
    _made.extend(output_dir.missing_folders(path))
    output_dir.remember_contents(path)


def _remove_refused_sweep() -> None:
    """No job of a sweep left a run dir (each was refused, or a dry run): its dir holds only Hydra's
    multirun.yaml."""
    sweep = {Path(d).parent for _, d, _ in _jobs}
    if len(sweep) != 1 or any(Path(d).exists() for _, d, _ in _jobs):
        return
    folder = sweep.pop()
    if folder.is_dir() and [p.name for p in folder.iterdir()] == ["multirun.yaml"]:
        (folder / "multirun.yaml").unlink()
        folder.rmdir()
        output_dir.remove_made_folders(folder, _made)


def _sweep_table() -> None:
    print("\n[zlbench] multirun jobs:", file=sys.stderr)
    for label, run_dir, code in _jobs:
        print(f"  exit {code:3d}  {label}  -> {run_dir}", file=sys.stderr)
    for label, command in _not_run:  # after an interrupt: nothing of them ran
        print(f"  not run   {label}  -> run it: {command}", file=sys.stderr)


# One front door: `zlbench VERB ...` (or `python -m zlbench VERB ...`) for the commands that read run
# dirs and the store; anything else is a run's Hydra overrides.
VERBS = {"collect": "zlbench.report.collect", "summary": "zlbench.report.batch_summary", "history": "zlbench.history.__main__"}


def _verb(argv: List[str]) -> None:
    """Run `zlbench VERB ARGS` and exit with its code, when argv starts with a verb."""
    if argv and argv[0] in VERBS:
        import importlib

        try:
            sys.exit(importlib.import_module(VERBS[argv[0]]).main(argv[1:]))
        except KeyboardInterrupt:  # Ctrl-C: as a run says it (tables and the store are written atomically)
            print(f"zlbench: {argv[0]} interrupted", file=sys.stderr)
            sys.exit(Exit.INTERRUPTED)


def _bare_word_problem(argv: List[str]) -> Optional[str]:
    """A word that is neither an override (key=value, ~key) nor a flag or a flag's value: a misspelt
    verb, a run dir given alone, a stray word. Hydra would say "missing EQUAL at '<EOF>'"."""
    for i, word in enumerate(argv):
        key = word.split("=", 1)[0]
        if word.startswith("--") and "=" in word and key not in HYDRA_VALUE_FLAGS:
            return f"{word} is an override with dashes; zlbench's take none. Fix: {word.lstrip('-')}."
        if word.startswith(("-", "~")) or "=" in word or (i and argv[i - 1].startswith("-")):
            continue
        verbs = ", ".join(VERBS)
        if word in VERBS:
            return f"{word} is a verb and comes first: zlbench {word} ... Fix: move it to the front."
        path = os.path.expanduser(word)
        if os.path.isdir(path) and os.path.isdir(os.path.join(path, "benchmark")) and not os.path.isfile(
                os.path.join(path, "run_identity.json")):
            return (f"{word} is a folder, not an override: it looks like a corpus checkout (it holds "
                    f"benchmark/). Fix: corpus=flaggems corpus.root={word}.")
        if word == "compare":
            return "compare is a history verb. Fix: zlbench history compare A B (run dirs or store ids)."
        if os.path.isdir(path):
            return (f"{word} is a folder, not an override: a run dir is read by a verb. Fix: zlbench summary "
                    f"{word} (or collect {word}); a run into that dir: hydra.run.dir={word}, resuming it: "
                    f"resume={word}.")
        if os.path.isfile(path):
            return f"{word} is a file, not an override: a result log is read by a verb. Fix: zlbench summary {word}."
        near = difflib.get_close_matches(word, VERBS, n=1, cutoff=0.6)
        if i == 0 and near and not any(c in word for c in "/."):
            return f"unknown verb {word!r}. Fix: zlbench {near[0]} {' '.join(argv[1:])}".rstrip() + "."
        return (f"{word!r} is neither an override (key=value) nor a verb ({verbs}). Fix: key=value, e.g. "
                "ops=[exp]; `zlbench --help` lists the keys and verbs.")
    return None


def main() -> None:
    let_readers_leave()
    _verb(sys.argv[1:])
    if (problem := _bare_word_problem(sys.argv[1:])):
        _error(problem)
        sys.exit(Exit.USAGE)
    if "--version" in sys.argv[1:] or "-V" in sys.argv[1:]:
        print(f"zlbench {__version__}")
        sys.exit(0)
    if not conf_dir().is_dir():  # a copy of the package without its configs (Hydra: a traceback)
        _error(f"zlbench's configs are missing: no {conf_dir()} (nor zlbench/conf in the package). Fix: install "
               "zlbench from its checkout or wheel (pip install -e . in the checkout that holds conf/), or run from "
               "that checkout.")
        sys.exit(Exit.USAGE)
    register_schemas()
    if "--hydra-help" in sys.argv[1:]:
        print(HYDRA_HELP)
        sys.exit(0)
    try:
        argv, provenance = normalize_argv(sys.argv[1:], os.environ)
        _check_output_dir(argv)
    except UsageError as e:
        _error(str(e))
        sys.exit(Exit.USAGE)
    for line in [*provenance["env_ignored"].values(), *provenance.get("notes", [])]:
        print(f"zlbench: note: {line}", file=sys.stderr)
    _provenance.clear()
    _provenance.update(provenance)
    sys.argv = [sys.argv[0]] + argv
    _jobs.clear()
    _not_run.clear()
    try:
        _app()
    except KeyboardInterrupt:
        # Ctrl-C outside a run's own handling (it stops the run and writes its tables): after a run
        # returned, between a sweep's jobs, or while one starts. Say which, not a bare traceback.
        done = [f"{run_dir} (exit {code})" for _, run_dir, code in _jobs]
        sweep = any(a in ("-m", "--multirun") for a in argv)
        _error("interrupted" + (f" after {'job(s) of the sweep' if sweep else 'the run'} ended: {', '.join(done)}; "
                                "their tables are complete" if done else " before any run ended")
               + ("; the sweep's later jobs did not run: run them again (into a new hydra.sweep.dir, or "
                  "those values alone)" if sweep else ""))
        sys.exit(Exit.INTERRUPTED)
    except SystemExit as e:
        # Hydra rejected the command line or the composed config before any job ran (it printed
        # why): bad input, so zlbench's usage code rather than Hydra's 1.
        if not _jobs and e.code not in (0, None):
            sys.exit(Exit.USAGE)
        raise
    if len(_jobs) + len(_not_run) > 1:
        _sweep_table()
    if any(a in ("-m", "--multirun") for a in argv):
        _remove_refused_sweep()
    codes = {code for _, _, code in _jobs}
    sys.exit(next((int(c) for c in SEVERITY if c in codes), 0))


if __name__ == "__main__":
    main()
