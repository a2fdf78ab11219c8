"""Reports at corpus scale (zlbench.report.condensed): a 3,000-row A/B fits a GitHub comment with
its real changes on top, and plots keep one size whatever the number of rows."""

import random
import time

import matplotlib.image as mpimg

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
    t = time.perf_counter()
    assert ab_overview_plot(result, tmp_path / "ab.png", "A/B - H200 - timer graph")
    rows = [{"op": f"op{i % 700}", "dtype": "torch.float16", "speedup": 0.5 + (i % 97) / 50, "status": "ok"}
            for i in range(8400)]
    assert speedup_overview_plot(rows, tmp_path / "speedup.png", "speedup - H200")
    assert time.perf_counter() - t < 20
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
