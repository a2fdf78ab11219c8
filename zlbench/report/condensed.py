"""Reports that stay readable at corpus scale (700 files x 3 dtypes x shapes): a pull-request
Markdown under GitHub's comment limit and plots of a fixed size, whatever the number of rows.

- Markdown: the headline, the top changes, then every other row inside <details>, cut where the
  text would pass the limit (the cut is said, and the CSV keeps every row).
- Plots of a fixed size (report/overview.py): the A/B overview and the speedup overview.

    python -m zlbench.report.condensed RUN_DIR [--out DIR] [--top 25] [--limit 65536]

This command reads a run dir's outputs (ab.json, rows.jsonl) and reuses report/ab.py's headline; a
run at corpus scale writes the same forms itself (report/run_report.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

from tabulate import tabulate

from zlbench.report.ab import MD_HEADERS, table_cells, title
from zlbench.report.overview import ab_overview_plot, change_size, speedup_overview_plot  # noqa: F401 (API)
from zlbench.errors import UsageError

GITHUB_COMMENT_LIMIT = 65_536
CHANGED = ("slower", "faster", "changed below threshold", "unstable")


def _md_table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    return tabulate(rows, headers=list(headers), tablefmt="github")


def fit_markdown(head: str, top_title: str, top_rows: Sequence[Sequence[str]], rest_rows: Sequence[Sequence[str]],
                 headers: Sequence[str], limit: int = GITHUB_COMMENT_LIMIT, where_all: str = "the CSV") -> str:
    """head + the top rows + the rest in <details>, cut to stay under `limit` characters. The top
    table is cut too when it alone would pass the limit."""
    reserve = 400  # the closing lines and the note about the cut

    def fitting(rows, budget):
        lo, hi = 0, len(rows)  # the most rows whose table fits the budget (tables grow with rows)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(_md_table(rows[:mid], headers)) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return lo

    out = head.rstrip() + "\n\n"
    budget = limit - len(out) - reserve
    n_top = fitting(list(top_rows), budget - len(top_title) - 4)
    if top_rows:
        out += f"{top_title}\n\n{_md_table(top_rows[:n_top], headers)}\n"
        if n_top < len(top_rows):
            out += f"\n{len(top_rows) - n_top} more changed row(s) did not fit: see {where_all}.\n"
    else:
        out += f"{top_title}\n\nNone.\n"
    if rest_rows:
        budget = limit - len(out) - reserve
        n_rest = fitting(list(rest_rows), budget) if budget > 0 else 0
        summary = f"The other {len(rest_rows)} row(s)" + ("" if n_rest == len(rest_rows) else
                                                          f" ({n_rest} shown; every row is in {where_all})")
        if n_rest:
            out += f"\n<details><summary>{summary}</summary>\n\n{_md_table(rest_rows[:n_rest], headers)}\n\n</details>\n"
        else:
            out += f"\n{summary}.\n"
    return out


def ab_markdown(result: Mapping, limit: int = GITHUB_COMMENT_LIMIT, top: int = 25) -> str:
    """The A/B report (report.ab.compare's result or ab.json) for a pull request, under `limit`."""
    from zlbench.report.ab import headline

    s = result["summary"]
    head = f"{title(s)}\n\n" + "\n".join(f"- {l}" for l in headline(s))
    rows = sorted(result["rows"], key=lambda t: (-change_size(t), t["op"], t["dtype"], t["shape"]))
    changed = [t for t in rows if t["verdict"] in CHANGED]
    top_rows, rest = changed[:top], changed[top:] + [t for t in rows if t["verdict"] not in CHANGED]
    text = fit_markdown(head, f"## Top {len(top_rows)} change(s) of {len(changed)}, largest first",
                        [table_cells(t) for t in top_rows], [table_cells(t) for t in rest], MD_HEADERS, limit,
                        "ab.csv")
    if result.get("unpaired") and len(text) < limit - 200:
        text += f"\n{len(result['unpaired'])} row(s) unpaired: listed in ab.json.\n"
    return text


def plot_title(identity: Optional[Mapping], what: str) -> str:
    if not identity:
        return what
    dev = next((p.get("device_name") for p in identity.get("processes") or [] if p.get("device_name")), None) \
        or ", ".join(sorted({d.get("name", "") for d in identity.get("devices") or []}))
    return (f"{what} - {(identity.get('corpus') or {}).get('name')} corpus - "
            f"{(identity.get('backend') or {}).get('name')} {dev} - timer {(identity.get('timer') or {}).get('name')} - "
            f"{identity.get('created', '')[:16].replace('T', ' ')}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m zlbench.report.condensed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, help="folder for the outputs (default: the run dir)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--limit", type=int, default=GITHUB_COMMENT_LIMIT, help="Markdown size limit (characters)")
    args = p.parse_args(argv)
    try:
        from zlbench.results.tables import load_rows

        run_dir, out = args.run_dir, args.out or args.run_dir
        if not (run_dir / "run_identity.json").is_file():
            raise UsageError(f"{run_dir} is not a zlbench run dir (no run_identity.json). Fix: pass a run dir.")
        identity = json.loads((run_dir / "run_identity.json").read_text(encoding="utf-8"))
        out.mkdir(parents=True, exist_ok=True)
        written = []
        if speedup_overview_plot(load_rows(run_dir), out / "speedup_overview.png", plot_title(identity, "speedup")):
            written.append("speedup_overview.png")
        if (run_dir / "ab.json").is_file():
            result = json.loads((run_dir / "ab.json").read_text(encoding="utf-8"))
            (out / "ab_condensed.md").write_text(ab_markdown(result, args.limit, args.top), encoding="utf-8")
            written.append("ab_condensed.md")
            if ab_overview_plot(result, out / "ab_overview.png", plot_title(identity, "A/B"), args.top):
                written.append("ab_overview.png")
        print(f"[zlbench] wrote {', '.join(written) or 'nothing (no rows)'} in {out}", file=sys.stderr)
        return 0
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
