"""The report decides: recommendation first, per-configuration intervals, unpooled families, fits 1,100 px."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from runners.cli import main
from runners.decisions.recommend import METRIC_DEFINITIONS
from runners.domain.evalset import BUILTIN_DIR
from runners.plan.options import BenchOptions
from runners.run.bench import plan_run, run_bench
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep
from tests._browser import Layout, Page, chromium, lay_out
from tests._db import open_read_only

# the ten older diagnosable cases (the file): the recommended point below was measured on them
FAMILIES = [str(BUILTIN_DIR / "diagnosable.yaml"), "empty_logs", "generic_kb"]
EPOCHS = 2


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    tmp = tmp_path_factory.mktemp("report")
    db = tmp / "r.duckdb"
    grid = SweepGrid(no_gain_threshold=(1, 2, 3, 4), max_tool_invocations=(6, 10))
    sweep = run_sweep(plan_sweep(SweepOptions(grid, BenchOptions.of(evalsets=FAMILIES,
    model="scripted:rewriter?k=2",
    db=db,
                                                      epochs=EPOCHS))))  # fmt: skip
    out = tmp / "out"
    assert main(["report", "--db", str(db), "--sweep", sweep.sweep_id, "--out", str(out)]) == 0
    return db, out, sweep.sweep_id


def test_recommendation_first_then_the_table_with_definitions(report: tuple[Path, Path, str]) -> None:
    _, out, sweep_id = report
    page = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    title = re.search(r"<title>(.*?)</title>", page)
    assert title and "`" not in title.group(1) and sweep_id in title.group(1)
    assert re.findall(r"<h2>(.*?)</h2>", page)[0] == "Recommendation"
    rec_html = page.split("<h2>Recommendation</h2>")[1].split("<h2>")[0]
    paragraphs = re.findall(r"<p>(.*?)</p>", rec_html)
    assert len(paragraphs) >= 3, "one paragraph per thought, not one run-on block"
    assert paragraphs[0].startswith("Recommended: no_gain_threshold=4 max_tool_invocations=10")
    assert paragraphs[1].startswith("Rule: non-inferiority with a margin of 2 points")
    assert any(p.startswith("Resolution: with ") and "the rule resolves recall differences of" in p for p in paragraphs)
    table = page.split("<h2>Per configuration</h2>")[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + 8, "header + one row per grid point"
    assert "★" in table and re.search(r"\d+% \[\d+%,&nbsp;\d+%\]", table), "rates with intervals"
    for term in METRIC_DEFINITIONS:
        assert f"<dt>{term}:</dt>" in page and f"**{term}**" in md
    assert md.index("## Recommendation") < md.index("## Per configuration") < md.index("## Per family")


def test_family_table_is_the_recommended_configuration_only(report: tuple[Path, Path, str]) -> None:
    db, out, sweep_id = report
    md = (out / "report.md").read_text()
    con = open_read_only(db)
    rows = con.execute(
        """SELECT family, count(DISTINCT case_id), count(*), avg(passed::INT),
                  count(*) FILTER (WHERE stop_reason IS NULL)
           FROM case_runs c JOIN bench_runs b USING (bench_run_id)
           WHERE b.sweep_id = ? AND c.no_gain_threshold = 4 AND c.max_tool_invocations = 10 GROUP BY 1""",
        [sweep_id],
    ).fetchall()
    con.close()
    section = md.split("## Per family at the recommended configuration")[1]
    for family, cases, runs, rate, own in rows:
        assert runs == cases * EPOCHS, "one grid point: cases x epochs, nothing pooled"
        cells = [c.strip() for c in next(ln for ln in section.splitlines() if ln.startswith(f"| {family} ")).split("|")]
        assert cells[2:5] == [str(cases), str(runs), f"{rate:.0%}"]
        stops = [int(x) for x in cells[7].split(" / ")]
        assert sum(stops) == runs and stops[3] == own, "runs that stopped on their own are counted"


def test_figures_are_drawn(report: tuple[Path, Path, str]) -> None:
    _, out, _ = report
    pngs = sorted(out.glob("*.png"))
    assert {p.name for p in pngs} == {"recall_wasted_vs_threshold.png", "pareto_front.png",
                                      "outcomes_per_family.png", "tool_call_distribution.png",
                                      "stop_rules_pareto.png"}  # fmt: skip
    page = (out / "report.html").read_text()
    for p in pngs:
        img = mpimg.imread(p)
        assert img.shape[0] > 200 and img.shape[1] > 500 and img.std() > 0.01, p.name
        assert p.name in (out / "report.md").read_text()
    assert page.count("data:image/png;base64,") == len(pngs), "the HTML is self-contained"


@pytest.fixture(scope="module")
def layouts(report: tuple[Path, Path, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Layout]:
    """The report laid out in headless Chromium at 1,100 and 700 pixels, beside the pages that show each check can
    fail: one element too wide, and headers allowed to break anywhere in a narrow table. One Chromium for all."""
    browser = chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium): cannot lay the page out in a real browser")
    page = (report[1] / "report.html").read_text()
    wide = page.replace("<h2>", "<div style='width:1500px'>x</div><h2>", 1)
    squeezed = page.replace("</style>", "th{overflow-wrap:anywhere}table{width:300px}</style>")
    pages = {"report": Page(page), "report-700": Page(page, 700), "wide": Page(wide),
             "squeezed": Page(squeezed), "squeezed-700": Page(squeezed, 700)}  # fmt: skip
    return lay_out(pages, browser, tmp_path_factory.mktemp("pages"))


def test_report_fits_a_1100_pixel_page_in_chromium(layouts: dict[str, Layout]) -> None:
    page = layouts["report"]
    assert page.client_width > 1000 and page.scroll_width <= page.client_width and page.right <= page.client_width, page
    # the check can fail: the same page with one element too wide overflows
    wide = layouts["wide"]
    assert wide.scroll_width > wide.client_width


@pytest.mark.parametrize("width", [1100, 700])
def test_report_headers_never_break_inside_a_word(layouts: dict[str, Layout], width: int) -> None:
    suffix = "" if width == 1100 else f"-{width}"
    assert layouts[f"report{suffix}"].broken_headers == ()
    # the check can fail: headers allowed to break anywhere, in a narrow table, break mid-word
    assert layouts[f"squeezed{suffix}"].broken_headers


def test_bench_run_report_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "b.duckdb"
    s = run_bench(plan_run(BenchOptions.of(evalsets=["missing_context"], db=db, label="x")))
    out = tmp_path / "br"
    assert main(["report", "--db", str(db), "--bench-run", s.bench_run_id, "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert f"## Bench run {s.bench_run_id}" in md and "| missing_context | 7 | 7 | 100% |" in md
    bad = tmp_path / "bad"
    assert main(["report", "--db", str(db), "--bench-run", s.bench_run_id, "--out", str(bad), "--margin", "2"]) == 2
    assert "--margin 2: a rate margin must be within [0, 1]" in capsys.readouterr().err and not bad.exists()


def test_a_refused_figure_path_draws_no_figure(report: tuple[Path, Path, str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The figures' names are checked before any is drawn: a refused output costs no drawing (and writes nothing)."""
    import matplotlib.figure

    db, _, sweep_id = report
    drawn: list[int] = []
    savefig = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda self, *a, **k: drawn.append(1) or savefig(self, *a, **k))  # fmt: skip
    refused = tmp_path / "refused"
    refused.mkdir()
    (refused / "pareto_front.png").symlink_to(db)  # a figure's path naming the database
    assert main(["report", "--db", str(db), "--sweep", sweep_id, "--out", str(refused)]) == 2
    assert drawn == [] and sorted(p.name for p in refused.iterdir()) == ["pareto_front.png"]
    assert main(["report", "--db", str(db), "--sweep", sweep_id, "--out", str(tmp_path / "fine")]) == 0
    assert len(drawn) == len(list((tmp_path / "fine").glob("*.png"))) >= 4, "every figure drawn once when written"
