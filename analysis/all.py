"""Every figure and the claims report, from one results directory.

    python -m analysis.all --results results --out figures

Bad input is refused before anything is written, in one line with exit code 2: a results directory
that does not exist or holds no run logs, a run whose config.json or meta.json is damaged
(`analysis.common.check_results`). A figure whose logs are corrupt fails with a one-line message
naming the file and the others go on; runs without a logged iteration are listed as incomplete
(REPORT.md says which verdicts they withhold). The exit code is 1 when anything failed or a run
is incomplete.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from analysis.common import InputError, LogError, check_inputs, render, report_result
from analysis.measurements import EXPERIMENTS, SPECS, Logs
from analysis.report import write_report
from prunex.cluster.exits import one_line
from prunex.training.config import ArgumentParser, ConfigError  # one-line refusals (it imports no torch)


def run_all(results: Path, out: Path) -> list[str]:
    """Render every figure, then the report; returns one message per failure or incomplete run."""
    failures = []
    for spec in SPECS:
        try:
            report_result(render(spec, results, out))
        except LogError as e:
            failures.append(f"{spec.name}: {e}")
            print(f"error: {one_line(failures[-1])}", file=sys.stderr)
        except Exception as e:  # a bug must not stop the other figures; the exit code still says so
            failures.append(f"{spec.name}: unexpected {type(e).__name__}: {e}")
            print(f"error: {one_line(failures[-1])}", file=sys.stderr)
    try:
        table, error = write_report(results, out)
        counts = table["verdict"].value_counts()
        print(f"report: wrote {out / 'REPORT.md'} and claims.csv: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
        for r in table[table["verdict"] == "error"].to_dict("records"):
            failures.append(f"report: claim {r['claim_id']}: {r['detail']}")
            print(f"error: {one_line(failures[-1])}", file=sys.stderr)
        if error and not (table["verdict"] == "error").any():
            failures.append("report: a figure's logs could not be read (see REPORT.md)")
        for _, path, why in Logs(results).incomplete():
            failures.append(f"incomplete run {path}: {why}")
    except Exception as e:
        failures.append(f"report: unexpected {type(e).__name__}: {e}")
        print(f"error: {one_line(failures[-1])}", file=sys.stderr)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m analysis.all", description="every PruneX figure and the report")
    parser.add_argument("--results", default="results", help="results directory (default: results)")
    parser.add_argument("--out", default="figures", help="output directory (default: figures)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    try:
        check_inputs(Path(args.results), Path(args.out), EXPERIMENTS)
        failures = run_all(Path(args.results), Path(args.out))
    except (InputError, ConfigError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted; {args.out} may hold some new figures and some old ones: run it again", file=sys.stderr)
        return 130
    if failures:
        print(f"{len(failures)} failure(s):", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
