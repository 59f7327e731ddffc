"""Screenshots of `rlvr report` and `rlvr dashboard` for docs/runs.md and docs/explainer.md, from a real run
directory (headless Chromium, 1400 px wide): OUT_DIR/dashboard.png (the live page's curves), OUT_DIR/report.png
(the report's group view) and OUT_DIR/explainer-<view>.png, one per explainer view; with --full, the whole pages
instead (report-full.png, dashboard-full.png).

    .venv/bin/python scripts/screenshots.py runs/20250101-120000 docs/img

The run directory is only read: the report is written to a temporary directory.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rlvr.viz.browser import element_screenshot, full_page_screenshot, missing, start_chromium
from rlvr.viz.dashboard import DashboardServer
from rlvr.viz.jsonl import RunDataError
from rlvr.viz.report import write_report


def wait_for_charts(driver, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not driver.find_elements("css selector", "svg.chart circle.pt"):
        if time.monotonic() > deadline:
            raise RuntimeError("the page drew no chart within 10 s; see the browser console")
        time.sleep(0.1)


def section(driver, section_id: str, target: Path) -> None:
    """One section of the page as a PNG (the page is taller than a docs page wants)."""
    element_screenshot(driver, section_id, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--full", action="store_true", help="whole pages instead of the docs' sections")
    parser.add_argument("--explainer", action="store_true", help="only the explainer's views (explainer-*.png)")
    args = parser.parse_args(argv)
    reason = missing()
    if reason:
        print(f"screenshots: {reason}", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    driver = start_chromium()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            report = write_report([args.run_dir], Path(tmp) / "report.html")
            driver.get(report.resolve().as_uri())
            wait_for_charts(driver)
            if args.full:
                full_page_screenshot(driver, args.out_dir / "report-full.png")
            else:
                if not args.explainer:
                    section(driver, "groups", args.out_dir / "report.png")
                # the token view with a token picked (its numbers shown, and the worked example follows it)
                picked = driver.find_elements("css selector", "#view-token .tok:not(.env)")
                if len(picked) > 6:
                    picked[6].click()
                for view in driver.find_elements("css selector", "#ex-views > section.ex-view"):
                    name = view.get_attribute("id").removeprefix("view-")
                    section(driver, view.get_attribute("id"), args.out_dir / f"explainer-{name}.png")
        if args.explainer:
            print(f"screenshots: wrote the explainer's views in {args.out_dir}")
            return 0
        server = DashboardServer([args.run_dir], "127.0.0.1", 0)
        server.start_thread()
        try:
            driver.set_window_size(1400, 1000)
            driver.get(server.url)
            wait_for_charts(driver)
            if args.full:
                full_page_screenshot(driver, args.out_dir / "dashboard-full.png")
            else:
                section(driver, "curves", args.out_dir / "dashboard.png")
        finally:
            server.shutdown()
            server.server_close()
    except RunDataError as err:
        print(f"screenshots: {err}", file=sys.stderr)
        return 2
    finally:
        driver.quit()
    print(f"screenshots: wrote {', '.join(sorted(p.name for p in args.out_dir.glob('*.png')))} in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
