"""Offline: an A/B run's overall interval as its ab.json holds it (resampled over tests alone,
before 2026-12-04) against this checkout's report (tests and rounds), over archived node-level A/B
run dirs. One Markdown table row per run dir; nothing is written into them.

    python3 benchmarks/gpu/overall23.py <unpacked run dirs, each with rows.jsonl, plan.json, ab.json>

The twenty-eighth session's table (RESULTS.md) came from the A/A, neutral-axis and live-axis run
dirs of results/*_issue23_runs.tar.xz (their aa*/abenv*/live* .tgz unpacked)."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from zlbench.report.ab import compare  # noqa: E402
from zlbench.results.tables import load_artifacts, stopped_nodes  # noqa: E402


def overall_now(run: Path) -> dict:
    """The summary this checkout's report makes of the run (as run_report.ab_report calls compare)."""
    rows = [json.loads(line) for line in (run / "rows.jsonl").read_text().splitlines() if line.strip()]
    plan = json.loads((run / "plan.json").read_text())
    ab = json.loads((run / "run_identity.json").read_text())["config"]["ab"]
    sides = [s["name"] for s in plan["sides"]]
    schedule = plan.get("schedule")
    artifacts = load_artifacts(run)
    return compare([r for r in rows if r.get("side") == sides[0]], [r for r in rows if r.get("side") == sides[1]],
                   sides[0], sides[1], threshold=float(ab.get("threshold", 0.02)),
                   artifacts_a=artifacts.get(sides[0], {}), artifacts_b=artifacts.get(sides[1], {}),
                   aa=bool(ab.get("aa")), stops=stopped_nodes(run, plan) if schedule else {},
                   rounds={"min": schedule["min_rounds"], "max": int(plan["rounds"])} if schedule else None,
                   round_period=int(ab.get("respawn_every", 1)) if ab.get("schedule", "node") == "node" else 1,
                   )["summary"]


def pct(x):
    return f"{(x - 1) * 100:+.2f}%"


def interval(o):
    out = f"{pct(o['lo'])} .. {pct(o['hi'])}"
    return out + (" **excludes 0**" if o["lo"] > 1 or o["hi"] < 1 else "")


for arg in sys.argv[1:]:
    run = Path(arg)
    try:
        before = json.loads((run / "ab.json").read_text())["summary"]
        now = overall_now(run)
    except (OSError, KeyError, ValueError, TypeError) as e:
        print(f"{run}: skipped ({e!r})", file=sys.stderr)
        continue
    archive = next((part[:11] for part in run.parts if part.endswith("_runs")), "")
    o, n = before["overall"], now["overall"]
    print(f"| {archive} {run.name} | {'A/A' if before.get('aa') else 'A/B'} | {n['rows']} (then {o['rows']}) | "
          f"{pct(n['geomean'])} | {interval(o)} | {interval(n)} ({n.get('resampled')}) |")
