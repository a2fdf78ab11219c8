"""Reports at corpus scale (zlbench.report.condensed): a 3,000-row A/B fits a GitHub comment with
its real changes on top, and plots keep one size whatever the number of rows."""

import random

import matplotlib.image as mpimg
import pytest

from zlbench.report.ab import compare
from zlbench.report.condensed import GITHUB_COMMENT_LIMIT, ab_markdown, ab_overview_plot, main, speedup_overview_plot

from . import history_runs as H


def corpus_scale_ab(n_ops=250, rounds=4, seed=0):
    """n_ops x 3 dtypes x 4 shapes rows per side, 1% noise; op007 and op123 are 20% faster on B."""
    rng = random.Random(seed)
    a, b = [], []
    for o in range(n_ops):
        for dtype in ("torch.float16", "torch.bfloat16", "torch.float32"):
            for s in range(4):
                shape = f"[[{64 << s},{1024}]]"
                effect = 0.8 if o in (7, 123) else 1.0
                for r in range(rounds):
                    base = 0.01 * (1 + s) * (1 + o % 5)
                    a.append(H.row(f"op{o:03d}", shape, base * rng.lognormvariate(0, 0.01), base, side="off", rnd=r, dtype=dtype))
                    b.append(H.row(f"op{o:03d}", shape, base * effect * rng.lognormvariate(0, 0.01), base, side="on", rnd=r,
                                   dtype=dtype))
    return compare(a, b, "X=0 (off)", "X=1 (on)")


@pytest.mark.slow  # 3,000 rows compared: seconds
def test_a_corpus_scale_ab_fits_a_github_comment(tmp_path):
    result = corpus_scale_ab()
    assert len(result["rows"]) == 3000 and len(result["markdown"]) > GITHUB_COMMENT_LIMIT  # the full table does not fit
    text = ab_markdown(result)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    top = text.split("<details>")[0]
    # op007 and op123: 12 rows each, all found and all on top (the largest changes come first)
    assert result["summary"]["verdicts"]["faster"] == 24 and "## Top 25 change(s) of" in top
    assert top.count("| faster ") == 24 and top.count("| op007 ") == 12 and top.count("| op123 ") == 12
    assert "every row is in ab.csv" in text and text.rstrip().endswith("</details>")
    small = ab_markdown(result, limit=2500, top=40)  # a tight limit cuts the top table too, and says so
    assert len(small) <= 2500 and "did not fit: see ab.csv" in small and "(0 shown; every row is in ab.csv)" in small


def test_plots_keep_their_size_at_corpus_scale(tmp_path):
    result = corpus_scale_ab(n_ops=120, rounds=3)
    assert ab_overview_plot(result, tmp_path / "ab.png", "A/B - H200 - timer graph")
    rows = [{"op": f"op{i % 700}", "dtype": "torch.float16", "speedup": 0.5 + (i % 97) / 50, "status": "ok"}
            for i in range(8400)]
    assert speedup_overview_plot(rows, tmp_path / "speedup.png", "speedup - H200")
    for name in ("ab.png", "speedup.png"):
        img = mpimg.imread(tmp_path / name)
        assert img.shape[:2] == (750, 1300), (name, img.shape)  # 13 x 7.5 in at 100 dpi, whatever the rows


def test_cli_on_a_run_dir(tmp_path, capsys):
    result = corpus_scale_ab(n_ops=5, rounds=3)
    ident = H.identity(ab="X")
    rows = [H.row("op000", "[[64,64]]", 0.01, 0.012)]
    run = H.write_run(tmp_path / "run", ident, rows, ab={k: v for k, v in result.items() if k != "markdown"})
    assert main([str(run), "--out", str(tmp_path / "out")]) == 0
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"ab_condensed.md", "ab_overview.png", "speedup_overview.png"}
    assert (tmp_path / "out" / "ab_condensed.md").read_text().startswith("# A/B: X=0 (off) (A) vs X=1 (on) (B)")
    assert main([str(tmp_path)]) == 2 and "not a zlbench run dir" in capsys.readouterr().err


@pytest.mark.slow  # a run's whole A/B report of 480 rows, forest plot included: seconds
def test_a_run_at_corpus_scale_writes_the_condensed_forms_itself(tmp_path):
    # The run's own speedup.png, ab.png and ab.md switch to the fixed-size and under-the-limit forms
    # once there are more than LARGE groups / rows (ab.csv and ab.json keep every row).
    from zlbench.report.run_report import LARGE, _speedup_png, ab_report, write_ab

    rows = [{"op": f"op{i % 300}", "dtype": "torch.float16", "side": "main", "speedup": 0.5 + (i % 97) / 50,
             "status": "ok"} for i in range(3000)]
    assert _speedup_png(rows, tmp_path / "speedup.png", {"created": "2026-11-30", "timer": {"name": "graph"}})
    assert mpimg.imread(tmp_path / "speedup.png").shape[:2] == (750, 1300)
    # 480 rows: past LARGE, and a full table past the comment limit.
    result = corpus_scale_ab(n_ops=40)
    sides = ["off", "on"]
    assert len(result["rows"]) > LARGE and len(result["markdown"]) > GITHUB_COMMENT_LIMIT
    identity = {"config": {"ab": {"var": "X", "threshold": 0.02, "aa": False}, "isolate_caches": True},
                "sides": {"off": {"X": "0"}, "on": {"X": "1"}}, "switch_env": {}}
    out = ab_report(tmp_path, _rows_of(result, "a") + _rows_of(result, "b"), sides, identity)
    write_ab(out, tmp_path, identity)
    assert len(out["markdown"]) <= GITHUB_COMMENT_LIMIT
    assert (tmp_path / "ab.md").read_text() == out["markdown"]
    assert mpimg.imread(tmp_path / "ab.png").shape[:2] == (750, 1300)
    assert len((tmp_path / "ab.csv").read_text().splitlines()) == len(result["rows"]) + 1


def test_the_ab_report_decides_its_plot_before_drawing(tmp_path):
    """Issue 24 item 5: ab.write drew a forest-plot line per row and the run's report then drew the
    overview over it (166 s of a 226 s test at 3,000 rows). Now write() decides: a forest plot up to
    LARGE rows, past that the fixed-size overview, whoever calls it (batch_summary --ab too)."""
    from zlbench.report.ab import write
    from zlbench.report.overview import LARGE

    few, many = corpus_scale_ab(n_ops=1, rounds=3), corpus_scale_ab(n_ops=5, rounds=3)
    assert len(few["rows"]) <= LARGE < len(many["rows"])
    write(few, tmp_path / "few")
    write(many, tmp_path / "many")
    assert mpimg.imread(tmp_path / "few" / "ab.png").shape[1] == 880  # the forest plot: 8 in at 110 dpi
    assert mpimg.imread(tmp_path / "many" / "ab.png").shape[:2] == (750, 1300)
    assert len((tmp_path / "many" / "ab.csv").read_text().splitlines()) == len(many["rows"]) + 1


def _rows_of(result, which):
    """Rows of one side whose per-round latencies give the comparison's table (2 rounds each)."""
    side = "off" if which == "a" else "on"
    out = []
    for t in result["rows"]:
        value = t["a_ms"] if which == "a" else t["b_ms"]
        for rnd, wobble in enumerate((0.99, 1.01)):
            out.append({"op": t["op"], "dtype": "torch." + t["dtype"], "shape": t["shape"], "side": side,
                        "round": rnd, "latency": value * wobble, "latency_base": 1.0, "status": "ok", "markers": []})
    return out


def test_the_forest_plot_clips_a_wild_interval_and_marks_it(tmp_path):
    """Issue 26: one +3296% interval squashed every other row of ab.png to a dot. The axis now spans
    the rows' estimates (and intervals near them); the wild ends are clipped and labelled."""
    import matplotlib.pyplot as plt

    from zlbench.report import plots

    rows = [{"label": f"softmax float32 [[{n},1024]]", "ratio": r, "lo": lo, "hi": hi, "verdict": v}
            for n, (r, lo, hi, v) in enumerate([(0.9, 0.88, 0.92, "faster"), (1.01, 0.99, 1.03, "no difference"),
                                                (1.5, 0.2, 33.96, "inconclusive"), (1.05, 1.03, 1.07, "slower")])]
    xmin, xmax = plots.forest_range(rows)
    assert 0.2 < xmin < 0.88 and 1.5 < xmax < 3.0  # every estimate and narrow interval inside, 33.96 and 0.2 not
    labels = []
    orig = plt.Axes.annotate
    plt.Axes.annotate = lambda self, text, *a, **k: labels.append(text) or orig(self, text, *a, **k)
    try:
        assert plots.forest_plot(rows, tmp_path / "ab.png", "t")
    finally:
        plt.Axes.annotate = orig
    assert labels == ["-80%", "+3296%"]
    assert mpimg.imread(tmp_path / "ab.png").shape[1] == 880
    # Without a wild interval nothing is clipped: the axis takes in every interval.
    calm = rows[:2] + rows[3:]
    lo, hi = plots.forest_range(calm)
    assert lo < 0.88 and hi > 1.07


def test_speedup_png_says_what_where_when_and_its_ticks_do_not_collide(tmp_path):
    """Issue 26: speedup.png had no title and matplotlib's minor labels (3x10^-1, 4x10^-1) overlapped."""
    import matplotlib.pyplot as plt

    from zlbench.report import plots
    from zlbench.report.condensed import plot_title

    identity = {"corpus": {"name": "flaggems"}, "backend": {"name": "cuda"}, "devices": [{"name": "NVIDIA H200"}],
                "timer": {"name": "graph"}, "created": "2026-12-01T16:38:09+0000"}
    title = plot_title(identity, "speedup over torch")
    for part in ("flaggems", "cuda", "NVIDIA H200", "timer graph", "2026-12-01 16:38"):
        assert part in title
    fig, ax = plt.subplots()
    ax.set_xscale("log")
    plots.log_ticks(ax, [0.104, 0.3, 0.4, 1.0, 2.75])
    fig.canvas.draw()
    major = [t.get_text() for t in ax.get_xticklabels()]
    assert major == ["0.1x", "0.2x", "0.5x", "1x", "2x"]
    assert all(not t.get_text() for t in ax.xaxis.get_minorticklabels())
    plt.close(fig)
    rows = [{"op": "exp", "dtype": "torch.float16", "status": "ok", "speedup": s, "side": "main"} for s in (0.3, 0.4)]
    assert plots.speedup_plot(rows, tmp_path / "speedup.png", title)
