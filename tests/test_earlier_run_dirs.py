"""Run dirs and store rows written by zlbench before the timer settings were deleted (adaptive
stopping, clock screening, placements) and before the identity held each setting once: such a run
at defaults measured what a run now measures, so it resumes and its history series goes on."""

import hashlib
import json

from .conftest import EXP_RUN, zlbench

# The timer settings an identity written before held (at their defaults, which are what every run
# now does), copied from a run made at commit dcdacd2, and the cpu backend's clocks entry of then.
EARLIER_TIMER = {"placements": 1, "placement_max_mb": 256.0, "placement_tol": None, "stop": "fixed",
                 "target_rel": 0.005, "min_samples": 10, "max_samples": 1000, "max_time_ms": 1000.0,
                 "throttle_threshold": 0.75, "throttle_retries": 3, "throttle_pause_ms": 20.0, "clock_reader": "none"}
EARLIER_CPU_CLOCKS = {"sources": [], "reading": "none: the cpu backend has no device clock to read (host frequency "
                                                "scaling is not screened); samples are not screened for clocks"}


def as_written_before(run_dir):
    """Rewrite a run's identity as zlbench at dcdacd2 wrote it, with that code's hash."""
    path = run_dir / "run_identity.json"
    ident = json.loads(path.read_text())
    timer = {**ident["timer"], **EARLIER_TIMER}
    ident.update(timer=timer, clocks=EARLIER_CPU_CLOCKS,
                 config={**ident["config"], "timer": timer, "autotune": ident["autotune"] == "1"})
    hashed = {k: v for k, v in ident.items()
              if k not in ("identity_hash", "provenance", "created", "host", "processes", "fail_on")}
    text = json.dumps(hashed, sort_keys=True, default=str, separators=(",", ":"))
    ident["identity_hash"] = hashlib.sha256(text.encode()).hexdigest()
    path.write_text(json.dumps(ident, indent=1))


def test_a_run_written_before_resumes_and_its_history_series_goes_on(tmp_path):
    earlier, later = tmp_path / "zl_runs" / "earlier", tmp_path / "zl_runs" / "later"
    res = zlbench(f"hydra.run.dir={earlier}", *EXP_RUN, "progress=none", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    as_written_before(earlier)
    rows = (earlier / "rows.jsonl").read_text()

    res = zlbench(f"resume={earlier}", *EXP_RUN, "progress=none", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "made with other settings" not in res.stderr
    assert (earlier / "rows.jsonl").read_text() == rows  # every node was complete: nothing measured again

    res = zlbench(f"hydra.run.dir={later}", *EXP_RUN, "progress=none", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    res = zlbench("history", "list", cwd=tmp_path, defaults=True)
    calibers = {line.split("|")[10].strip() for line in res.stdout.splitlines()[2:] if line.startswith("|")}
    assert res.returncode == 0 and len(calibers) == 1, res.stdout  # one series
    # one-process runs: nothing to judge on, so no gate (--fail-on none); the two are one series
    res = zlbench("history", "compare", "--latest", "--fail-on", "none", cwd=tmp_path, defaults=True)
    assert res.returncode == 0 and "only run of its caliber" not in res.stderr, res.stderr[-2000:]
