"""How the Jobs panel copes with 2 000 jobs, in real chromium: first paint, a poll, scrolling.

    python bench/panel_bench.py [--jobs 2000] [--reps 5] [--step 600]

The page (``bench/panel_bench_page.ts``, bundled here with the esbuild in
node_modules) mounts the real ``JobsPanel`` over its real ``JobsModel`` with
``Widget.attach``; a stand-in API answers ``GET jobs`` from ``--jobs`` generated
ended jobs, 100 a page as the service does. Chromium is Debian's, launched as the
Lab tests launch it (``tests/lab/conftest.py``). Each repetition is a fresh page;
printed are medians over ``--reps``, each against a baseline measured in the same
page (absolute times depend on the machine; the ratios are the result):

1. first paint: mounting until the newest page's rows are painted, against a plain
   list of as many equally tall ``<div>`` rows built at once; as the time until the
   painted frame (whole frames: the wait for the next one counts) and as the main
   thread's busy time over it (Chrome's TaskDuration: the work itself). The panel
   draws the rows a screen shows first (``FIRST_ROWS``) and the rest just after that
   frame: the time until every row of the page is made is printed too;
2. all jobs: mounting and loading every page ("Show older jobs" until there is no
   more) until painted, against a plain list of ``--jobs`` rows built at once;
3. a poll with every page loaded: the newest page asked for again and drawn, against
   the same poll with only the newest page loaded (near 1: a poll costs the newest
   page, however many older rows are shown);
4. scrolling top to bottom, ``--step`` px a frame (a quick fling): the median and
   95th-percentile time between frames, and the main thread's busy time over the
   whole scroll (Chrome's TaskDuration), against the plain list; and again with
   ``content-visibility: auto`` (on rows and their groups) turned off, to show what it
   buys.

Frame times are those of the headless compositor (about 16.7 ms a frame at best).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/, for the Lab tests' way of launching chromium

from playwright.sync_api import Page, sync_playwright  # noqa: E402

from tests.lab.conftest import CHROMIUM, CHROMIUM_FLAGS  # noqa: E402

ESBUILD = ROOT / "node_modules" / ".bin" / "esbuild"
PAGE_SOURCE = ROOT / "bench" / "panel_bench_page.ts"
#: what the page needs of JupyterLab's CSS: Lumino's widget rules (hidden widgets) and
#: nbjobs' own styles; the theme's variables are stood in for below
STYLES = [
    ROOT / "node_modules" / "@lumino" / "widgets" / "style" / "widget.css",
    ROOT / "labextension" / "style" / "index.css",
]
#: a few of JupyterLab's light theme variables, so rows have borders, fonts and sizes
THEME = """
:root {
  --jp-layout-color1: #fff; --jp-layout-color2: #eee; --jp-ui-font-color1: #212121;
  --jp-ui-font-color2: #616161; --jp-ui-font-family: system-ui, sans-serif;
  --jp-ui-font-size0: 11px; --jp-ui-font-size1: 13px; --jp-border-width: 1px;
  --jp-border-color1: #bdbdbd; --jp-border-color2: #e0e0e0; --jp-brand-color1: #1976d2;
  --jp-success-color1: #388e3c; --jp-error-color1: #d32f2f; --jp-warn-color1: #f57c00;
}
body { margin: 0; }
#host { width: 300px; height: 800px; display: flex; }
#host > .nbjobs-JobsPanel { flex: 1 1 auto; min-height: 0; }
.plain-list { width: 100%; height: 100%; overflow-y: auto; }
.plain-row { box-sizing: border-box; padding: 8px 12px; border-bottom: 1px solid #e0e0e0; }
"""


def build_page(folder: Path) -> Path:
    """The bench page's HTML and its script bundle in ``folder``; the HTML's path."""
    if not ESBUILD.exists():
        raise SystemExit("esbuild is missing: run `jlpm install` in the checkout first")
    subprocess.run(
        [
            str(ESBUILD),
            str(PAGE_SOURCE),
            "--bundle",
            "--format=iife",
            "--target=es2020",
            "--log-level=warning",
            # JupyterLab's icons are SVG files imported as text, as its webpack does
            "--loader:.svg=text",
            '--define:process.env.NODE_ENV="production"',
            f"--outfile={folder / 'page.js'}",
        ],
        check=True,
        cwd=ROOT,
    )
    links = "\n".join(f'<link rel="stylesheet" href="{p.as_uri()}">' for p in STYLES)
    html = folder / "index.html"
    html.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'>{links}"
        f"<style>{THEME}</style></head><body><script src='page.js'></script></body></html>"
    )
    return html


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


class Bench:
    """One chromium page running the bench page's measures."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.url = url
        self.cdp = page.context.new_cdp_session(page)
        self.cdp.send("Performance.enable")

    def fresh(self) -> None:
        self.page.goto(self.url)
        self.page.wait_for_function("window.nbjobsBench !== undefined")

    def call(self, name: str, *args: Any) -> Any:
        return self.page.evaluate(f"([a]) => window.nbjobsBench.{name}(...a)", [list(args)])

    def busy(self) -> float:
        """Seconds the page's main thread has spent on tasks so far."""
        metrics = self.cdp.send("Performance.getMetrics")["metrics"]
        return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))

    def timed(self, name: str, *args: Any) -> tuple[float, float]:
        """What the page's ``name`` measured (ms), and the main thread's busy time (ms)
        from the call to its end: the work, whatever frame the painting waited for."""
        self.call("unmount")  # what was mounted goes first, outside the measure
        self.call("settle")
        before = self.busy()
        measured = float(self.call(name, *args))
        return measured, (self.busy() - before) * 1000

    def scroll(self, step: int) -> tuple[float, float, float]:
        """Median and p95 frame time (ms) and main-thread busy time (ms) of one scroll."""
        before = self.busy()
        frames: list[float] = self.call("scroll", step)
        return statistics.median(frames), p95(frames), (self.busy() - before) * 1000


def one_repetition(bench: Bench, jobs: int, step: int) -> dict[str, float]:
    """Every measure once, on a fresh page."""
    took: dict[str, float] = {}
    bench.fresh()
    took["first page"], took["first page busy"] = bench.timed("mountPanel", jobs, False)
    took["first page, every row"] = bench.call("allRows")
    took["poll, newest page loaded"] = bench.call("poll")
    height = bench.call("rowHeight")
    took["all pages"] = bench.call("mountPanel", jobs, True)
    took["poll, all pages loaded"] = bench.call("poll")
    took["scroll median"], took["scroll p95"], took["scroll busy"] = bench.scroll(step)
    bench.call("contentVisibility", False)
    bench.call("mountPanel", jobs, True)
    took["no-cv median"], took["no-cv p95"], took["no-cv busy"] = bench.scroll(step)
    bench.call("contentVisibility", True)
    took["plain first page"], took["plain first busy"] = bench.timed(
        "mountPlain", min(jobs, 100), height
    )
    took["plain all"] = bench.call("mountPlain", jobs, height)
    took["plain median"], took["plain p95"], took["plain busy"] = bench.scroll(step)
    bench.call("unmount")
    took["row height"] = height
    return took


def report(runs: list[dict[str, float]], jobs: int, step: int) -> None:
    median: Callable[[str], float] = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    print(
        f"Jobs panel, {jobs} jobs (rows {median('row height'):.0f} px), "
        f"medians of {len(runs)} fresh pages"
    )
    print(f"{'measure':<38} {'panel':>9} {'baseline':>9} {'ratio':>7}  baseline")
    rows = [
        ("first paint, newest page", "first page", "plain first page", "plain list, 100 rows"),
        (
            "first paint, main thread busy",
            "first page busy",
            "plain first busy",
            "plain list, 100 rows",
        ),
        ("newest page, every row made", "first page, every row", "plain first page", "plain"),
        (f"first paint, all {jobs} (paged)", "all pages", "plain all", f"plain list, {jobs}"),
        (
            f"poll with {jobs} rows shown",
            "poll, all pages loaded",
            "poll, newest page loaded",
            "poll, 100 rows shown",
        ),
        (f"scroll frame, median ({step} px/frame)", "scroll median", "plain median", "plain"),
        (f"scroll frame, p95 ({step} px/frame)", "scroll p95", "plain p95", "plain"),
        ("scroll, main thread busy (whole)", "scroll busy", "plain busy", "plain"),
        ("scroll frame, p95, no content-visib.", "no-cv p95", "scroll p95", "with it"),
        ("scroll busy, no content-visibility", "no-cv busy", "scroll busy", "with it"),
    ]
    for what, measured, baseline, against in rows:
        value, base = median(measured), median(baseline)
        ratio = value / base if base else float("nan")
        print(f"{what:<38} {value:>7.1f}ms {base:>7.1f}ms {ratio:>7.2f}  {against}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--step", type=int, default=600, help="px scrolled per frame")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="nbjobs-panel-bench-") as folder:
        html = build_page(Path(folder))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
            )
            try:
                page = browser.new_page(viewport={"width": 1360, "height": 860})
                page.on("pageerror", lambda exc: print(f"page error: {exc}", file=sys.stderr))
                bench = Bench(page, html.as_uri())
                one_repetition(bench, min(args.jobs, 200), args.step)  # warm up, unmeasured
                runs = [one_repetition(bench, args.jobs, args.step) for _ in range(args.reps)]
            finally:
                browser.close()
    report(runs, args.jobs, args.step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
