"""`rlvr report` and `rlvr dashboard`. Imports stay inside the commands: `rlvr --help` stays light."""
from __future__ import annotations

import argparse
from pathlib import Path


def cmd_report(args: argparse.Namespace) -> int:
    from rlvr.viz.report import write_report

    path = write_report([Path(p) for p in args.runs], Path(args.output) if args.output else None, args.force)
    print(f"rlvr report: wrote {path} (open it in a browser; it works offline)", flush=True)
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from rlvr.rewards.typed_answer import answer_scorer
    from rlvr.viz.dashboard import serve

    runs = [Path(p) for p in args.runs]
    # built when the first run has a config.yaml (at once, or as soon as a run started with the dashboard writes it)
    return serve(runs, args.host, args.port, scorer_factory=lambda: answer_scorer(runs[0]))


def port_number(text: str) -> int:
    """--port: 0 (any free port) to 65535, refused by argparse in one line otherwise."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535)")
    return int(text)


def register(sub) -> None:
    report = sub.add_parser(
        "report", help="write one self-contained HTML page of a run (curves, completions, groups, explainer)",
        description="Write one HTML file that opens offline: the run's curves, config, completions from the start, "
                    "middle and end, the group view of those steps and the GRPO explainer. Several runs are "
                    "overlaid on the same charts. One run: RUN_DIR/report.html unless --output. Several runs: "
                    "--output is required. An existing file is replaced only if rlvr report wrote it (else --force).")
    report.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (holding metrics.jsonl)")
    report.add_argument("--output", metavar="FILE", help="where to write the page (default: RUN_DIR/report.html)")
    report.add_argument("--force", action="store_true", help="replace FILE even if rlvr report did not write it")
    report.set_defaults(func=cmd_report)
    dash = sub.add_parser(
        "dashboard", help="serve a live page of a run that redraws as the run writes its logs",
        description="Serve the report's page on http://HOST:PORT/; it re-reads the run's logs every 2 s and redraws "
                    "without a reload. Several RUN_DIRs are overlaid. Ctrl-C stops it.")
    dash.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (holding metrics.jsonl)")
    dash.add_argument("--port", type=port_number, default=8765, help="TCP port (default 8765)")
    dash.add_argument("--host", default="127.0.0.1",
                      help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 serves the network)")
    dash.set_defaults(func=cmd_dashboard)
