"""Offline: an A/B run's overall interval resampled over tests alone (as ab.json holds it, before
2026-12-04) against tests and rounds (zlbench.ab.stats.overall with each row's log ratio per round),
over archived node-level A/B run dirs. One Markdown table row per run dir.

    python3 benchmarks/gpu/overall23.py <unpacked run dirs, each with rows.jsonl, plan.json, ab.json>

The twenty-eighth session's table (RESULTS.md) came from the A/A, neutral-axis and live-axis run
dirs of results/*_issue23_runs.tar.xz (their aa*/abenv*/live* .tgz unpacked)."""
import json, math, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from zlbench.ab.pairing import pair
from zlbench.ab import stats

def load(run):
    rows = [json.loads(l) for l in open(run + '/rows.jsonl')]
    plan = json.load(open(run + '/plan.json'))
    sides = [s['name'] for s in plan['sides']]
    a = [r for r in rows if r.get('side') == sides[0]]; b = [r for r in rows if r.get('side') == sides[1]]
    p = pair(a, b, 'latency')
    ab = json.load(open(run + '/ab.json'))
    table = {}
    for r in ab['rows']:
        table[(r['op'], r['node'], json.dumps(r['shape'], separators=(',', ':')) if not isinstance(r['shape'], str) else r['shape'])] = r
    out = []
    for pr in p.rows:
        op, dt, sh, node = pr.key
        t = table.get((op, node, sh))
        if t is None or t['live'] == 'not live' or not t.get('ratio'):
            continue
        look = t.get('look') or len(pr.a)
        d = {r: math.log(y / x) for r, x, y in list(zip(pr.rounds, pr.a, pr.b))[:look]}
        out.append((node or op, d, t['ratio']))
    return out, ab['summary']

f = lambda x: f"{(x-1)*100:+.2f}%"
for run in sys.argv[1:]:
    try:
        rows, s = load(run)
    except (OSError, KeyError, ValueError) as e:
        print(f'{run}: skipped ({e})', file=sys.stderr)
        continue
    o = s['overall']
    new = stats.overall([r for _, _, r in rows], clusters=[n for n, _, _ in rows], rounds=[d for _, d, _ in rows])
    ex = lambda lo, hi: ' excludes 0' if lo > 1 or hi < 1 else ''
    archive = next((part[:11] for part in run.split('/') if part.endswith('_runs')), '')
    print(f"| {archive} {run.rstrip('/').split('/')[-1]} | {'A/A' if s.get('aa') else 'A/B'} | {len(rows)} of {o['rows']} | {f(o['geomean'])} | {f(o['lo'])} .. {f(o['hi'])}{ex(o['lo'], o['hi'])} | {f(new['lo'])} .. {f(new['hi'])}{ex(new['lo'], new['hi'])} |")
