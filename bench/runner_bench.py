"""Runner benchmark: nbjobs' job_runner against papermill and `jupyter execute`.

    python bench/runner_bench.py [--repeat N] [--cases trivial,many,big,coalesced]

Every tool runs the same notebooks, one after the other in rounds (so that a
noisy neighbour slows all of them alike), as the separate process a job would
be. Printed per case: the median wall time and peak memory of each tool, and
ratios against the baselines measured in the same run. No absolute time is a
result here; the ratios are. Two peaks: "own" is the tool's process alone (its
high-water mark, read from /proc while it runs: what a job's runner holds, its
kernel not included), "tree" the largest process it waited for (the kernel, mostly).

Cases:
  trivial  3 tiny cells: start-up cost (interpreter, kernel, write)
  many     500 tiny cells: per-cell overhead, where the runner's status file
           (rewritten after every cell) and log echo would show
  big      one cell printing 50 MB: memory and time with large outputs
  coalesced  one cell writing 200 lines of 1 MB, which ipykernel would send as one
           message: the runner's own peak against papermill's and the floor's

Tools:
  runner         python -m nbjobs.job_runner IN OUT --status-file S (what a job runs)
  runner-quiet   the same without a status file (the progress reporting's cost)
  nbclient       plain nbclient in a fresh interpreter: execute, write (the floor)
  jupyter-execute  jupyter execute --output OUT IN (nbclient's own CLI)
  papermill      papermill IN OUT
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

PLAIN_NBCLIENT = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, kernel_name="python3").execute()
nbformat.write(nb, sys.argv[2])
"""


def notebook(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


CASES: dict[str, Callable[[], nbformat.NotebookNode]] = {
    "trivial": lambda: notebook(["x = 1", "y = x + 1", "print(y)"]),
    "many": lambda: notebook([f"v{i} = {i}" for i in range(500)]),
    # 50 MB in 1 MB writes, as a chatty training loop would print it.
    "big": lambda: notebook(["import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 2**20)"]),
    "coalesced": lambda: notebook(
        ["import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 2**20 + '\\n')"]
    ),
}
#: cases with large outputs: fewer rounds, and their peaks compared
MEMORY_CASES = {"big", "coalesced"}


def tools(python: str) -> dict[str, Callable[[Path, Path, Path], list[str]]]:
    bindir = Path(python).parent
    runner = [python, "-m", "nbjobs.job_runner"]
    return {
        "runner": lambda i, o, s: [*runner, str(i), str(o), "--status-file", str(s)],
        "runner-quiet": lambda i, o, s: [*runner, str(i), str(o)],
        "nbclient": lambda i, o, s: [python, "-c", PLAIN_NBCLIENT, str(i), str(o)],
        "jupyter-execute": lambda i, o, s: [
            str(bindir / "jupyter-execute"),
            f"--output={o.stem}",
            str(i),
        ],
        "papermill": lambda i, o, s: [
            str(bindir / "papermill"),
            "--no-progress-bar",
            str(i),
            str(o),
        ],
    }


#: wall seconds, own peak (KiB), tree peak (KiB), the output notebook's size (bytes)
Sample = tuple[float, int, int, int]


class RunFailed(Exception):
    """A tool's run ended with a non-zero exit code (papermill and plain nbclient give
    up on a 200 MB message that takes more than their 4 s to arrive, say)."""


def run_once(command: list[str], cwd: Path, out: Path) -> Sample:
    """Wall seconds, the process's own peak RSS (KiB, its high-water mark while it ran),
    the tree's (KiB, the largest process of the tree that was waited for) and the size of
    the notebook it wrote to ``out`` (bytes)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    own = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        own = max(own, _high_water_mark(proc.pid))
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RunFailed(f"exit code {proc.returncode}")
    return elapsed, own, usage.ru_maxrss, out.stat().st_size


def _high_water_mark(pid: int) -> int:
    """VmHWM of a running process (KiB); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds per case (default 5)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")
    parser.add_argument("--tools", default=None, help="comma-separated tools (default all)")
    args = parser.parse_args()

    python = sys.executable
    available = tools(python)
    if shutil.which("papermill", path=str(Path(python).parent)) is None:
        print("papermill is not installed (pip install papermill); skipping it")
        available.pop("papermill")
    chosen = args.tools.split(",") if args.tools else list(available)
    cases = args.cases.split(",")
    results: dict[str, dict[str, Sample | None]] = {}
    #: (case, tool): rounds that failed, and the last one's exit code
    failures: dict[tuple[str, str], tuple[int, str]] = {}
    #: per case, what the runner's last output notebook says it left out
    said: dict[str, str] = {}

    with tempfile.TemporaryDirectory(prefix="nbjobs-bench-") as tmp:
        work = Path(tmp)
        for case in cases:
            source = work / f"{case}.ipynb"
            nbformat.write(CASES[case](), source)
            rounds = _rounds(case, args.repeat)
            samples: dict[str, list[Sample]] = {t: [] for t in chosen}
            print(f"{case}: {rounds} rounds of {', '.join(chosen)}", flush=True)
            for round_ in range(rounds):
                order = chosen[round_ % len(chosen) :] + chosen[: round_ % len(chosen)]
                for tool in order:
                    out = work / f"{case}-{tool}.ipynb"
                    status = work / f"{case}-{tool}.status.json"
                    try:
                        samples[tool].append(
                            run_once(available[tool](source, out, status), work, out)
                        )
                        if tool == "runner":
                            said[case] = what_was_cut(out)
                    except RunFailed as exc:
                        failed = failures.get((case, tool), (0, ""))[0] + 1
                        failures[case, tool] = (failed, str(exc))
                    out.unlink(missing_ok=True)
            results[case] = {t: _medians(samples[t]) for t in chosen}

    report(results, chosen, said)
    for (case, tool), (failed, why) in failures.items():
        print(
            f"{case}: {tool} failed in {failed} of {_rounds(case, args.repeat)} rounds ({why}); "
            "its medians are of the rounds it finished"
        )
    return 0


def _rounds(case: str, repeat: int) -> int:
    return repeat if case not in MEMORY_CASES else max(3, repeat // 2)


def _medians(samples: list[Sample]) -> Sample | None:
    if not samples:
        return None
    return (
        statistics.median(s[0] for s in samples),
        int(statistics.median(s[1] for s in samples)),
        int(statistics.median(s[2] for s in samples)),
        int(statistics.median(s[3] for s in samples)),
    )


def what_was_cut(output: Path) -> str:
    """What a runner's output notebook tells its reader it left out: the count in its
    metadata and whether a cell's output says so in words."""
    nb = nbformat.read(output, as_version=4)
    dropped = nb.metadata.get("nbjobs", {}).get("output", {}).get("dropped_characters", 0)
    in_words = any(
        "characters of output were left out" in out.get("text", "")
        for cell in nb.cells
        for out in cell.get("outputs", [])
    )
    return f"{dropped:,} characters left out, {'said' if in_words else 'NOT said'} in the cell"


def report(
    all_results: dict[str, dict[str, Sample | None]], chosen: list[str], said: dict[str, str]
) -> None:
    print(f"\n(load average at the end: {os.getloadavg()[0]:.1f})")
    results: dict[str, dict[str, Sample]] = {}
    for case, with_failed in all_results.items():
        by_tool = {t: r for t, r in with_failed.items() if r is not None}
        results[case] = by_tool
        baselines = [b for b in ("nbclient", "papermill") if b in by_tool]
        print(f"== {case}")
        header = f"  {'tool':<16}{'median s':>10}{'own MiB':>9}{'tree MiB':>10}{'out MB':>8}"
        header += "".join(f"{'s ÷ ' + b:>16}" for b in baselines)
        if case in MEMORY_CASES:
            header += "".join(f"{'own ÷ ' + b:>18}" for b in baselines)
        print(header)
        for tool in with_failed:
            if tool not in by_tool:
                print(f"  {tool:<16}{'failed in every round':>29}")
                continue
            seconds, own, tree, size = by_tool[tool]
            line = f"  {tool:<16}{seconds:>10.2f}{own / 1024:>9.0f}{tree / 1024:>10.0f}"
            line += f"{size / 1e6:>8.1f}"
            line += "".join(f"{seconds / by_tool[b][0]:>16.2f}" for b in baselines)
            if case in MEMORY_CASES:
                line += "".join(f"{own / max(1, by_tool[b][1]):>18.2f}" for b in baselines)
            print(line)
    chosen = [t for t in chosen if all(t in r for r in results.values())]
    if {"many", "trivial"} <= results.keys() and {"runner", "nbclient"} <= set(chosen):
        print("\n== per-cell cost, (many - trivial) / 497 cells")
        per_cell = {t: (results["many"][t][0] - results["trivial"][t][0]) / 497 for t in chosen}
        for tool, cost in per_cell.items():
            ratio = cost / per_cell["nbclient"] if per_cell["nbclient"] > 0 else float("nan")
            print(f"  {tool:<16}{cost * 1000:>8.2f} ms  ÷ nbclient {ratio:.2f}")
        if per_cell["nbclient"] > 0:
            overhead = per_cell["runner"] / per_cell["nbclient"] - 1
            print(
                f"\nrunner's per-cell overhead over plain nbclient: {overhead:+.1%} (goal: <= +5%)"
            )
            print("  (a difference of two medians: on a busy machine, read it with the line below)")
        else:  # a ratio of two negative or zero costs would read as a result; it is noise
            print(
                "\nrunner's per-cell overhead over plain nbclient: not measurable in this run "
                "(nbclient's 500 cells were not slower than its 3: a busy machine); "
                "read the line below"
            )
    if "many" in results and {"runner", "runner-quiet"} <= set(chosen):
        many = results["many"]
        progress = many["runner"][0] / many["runner-quiet"][0] - 1
        print(
            f"progress reporting on 500 cells (runner ÷ runner-quiet): {progress:+.1%} "
            "(goal: <= +5%)"
        )
    coalesced = results.get("coalesced", {})
    if "runner" in coalesced:
        runner_own = coalesced["runner"][1]
        against = ", ".join(
            f"÷ {b} {runner_own / max(1, coalesced[b][1]):.2f}"
            for b in ("nbclient", "papermill")
            if b in coalesced
        )
        print(
            f"runner's own peak on 200 joined writes of 1 MB: {runner_own / 1024:.0f} MiB "
            "(goal: < 150 MiB)" + (f"; {against}" if against else "")
        )
        print(
            f"its output notebook: {coalesced['runner'][3] / 1e6:.1f} MB (goal: < 20 MB); "
            + said.get("coalesced", "")
        )
    if "papermill" in chosen and "runner" in chosen:
        worst = max(r["runner"][0] / r["papermill"][0] for r in results.values())
        print(f"runner ÷ papermill, worst case: {worst:.2f} (goal: <= 1.00)")


if __name__ == "__main__":
    sys.exit(main())
