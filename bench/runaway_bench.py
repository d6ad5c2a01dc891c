"""Runaway-output benchmark: nbjobs' runner against papermill on notebooks that flood.

    python bench/runaway_bench.py [--repeat N] [--cases forever,big,images]

Cases (the same notebook for both tools, one after the other in rounds):
  forever  a teaching notebook's `while True: print(...)`, stopped by a 15 s limit
           (runner --timeout 15, papermill --execution-timeout 15)
  big      one cell printing 200 MB at once
  images   one cell displaying 1,000 PNG images of about 30 KB

Printed per case: median wall time, peak RSS of the largest process of the tool's
tree (the runner or papermill, or its kernel), and the size of the output notebook,
with the runner's figures as ratios of papermill's measured in the same run.
Goal: in both flood cases the runner's peak RSS < 400 MiB and output < 20 MB, and
its time no more than papermill's.
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
from runner_bench import notebook

LIMIT = 15

FOREVER = "i = 0\nwhile True:\n    print('hello, world', i)\n    i += 1"
BIG = "print('x' * 200_000_000)"
# a valid PNG of noise, made with the standard library (no plotting package needed)
IMAGES = """
import os, struct, zlib
from IPython.display import Image, display
def png(w=128, h=80):
    raw = b''.join(b'\\0' + os.urandom(w * 3) for _ in range(h))
    def chunk(kind, data):
        body = kind + data
        return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body))
    header = struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)
    return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', header)
            + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
for _ in range(1000):
    display(Image(data=png()))
"""

CASES: dict[str, Callable[[], nbformat.NotebookNode]] = {
    "forever": lambda: notebook([FOREVER]),
    "big": lambda: notebook([BIG]),
    "images": lambda: notebook([IMAGES]),
}


def commands(python: str, case: str) -> dict[str, Callable[[Path, Path], list[str]]]:
    limit = ["--timeout", str(LIMIT)] if case == "forever" else []
    pm_limit = ["--execution-timeout", str(LIMIT)] if case == "forever" else []
    papermill = str(Path(python).parent / "papermill")
    return {
        "runner": lambda i, o: [python, "-m", "nbjobs.job_runner", str(i), str(o), *limit],
        "papermill": lambda i, o: [papermill, "--no-progress-bar", *pm_limit, str(i), str(o)],
    }


def run_once(command: list[str], cwd: Path, output: Path) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (KiB, largest process of the tree), output size (bytes).

    A flood stopped by its limit exits non-zero by design; what counts is that an
    output notebook was written.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if not output.exists():
        raise SystemExit(f"no output notebook from: {' '.join(command)}")
    size = output.stat().st_size
    output.unlink()
    return elapsed, usage.ru_maxrss, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds per case (default 3)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")
    args = parser.parse_args()
    python = sys.executable
    if shutil.which("papermill", path=str(Path(python).parent)) is None:
        raise SystemExit("papermill is the baseline here: pip install papermill")

    results: dict[str, dict[str, tuple[float, int, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="nbjobs-runaway-") as tmp:
        work = Path(tmp)
        for case in args.cases.split(","):
            source = work / f"{case}.ipynb"
            nbformat.write(CASES[case](), source)
            tools = commands(python, case)
            samples: dict[str, list[tuple[float, int, int]]] = {t: [] for t in tools}
            print(f"{case}: {args.repeat} rounds of {', '.join(tools)}", flush=True)
            for round_ in range(args.repeat):
                order = list(tools) if round_ % 2 == 0 else list(reversed(tools))
                for tool in order:
                    out = work / f"{case}-{tool}.ipynb"
                    samples[tool].append(run_once(tools[tool](source, out), work, out))
            results[case] = {t: _medians(got) for t, got in samples.items()}
    report(results)
    return 0


def _medians(samples: list[tuple[float, int, int]]) -> tuple[float, int, int]:
    seconds = statistics.median(s[0] for s in samples)
    return (
        seconds,
        int(statistics.median(s[1] for s in samples)),
        int(statistics.median(s[2] for s in samples)),
    )


def report(results: dict[str, dict[str, tuple[float, int, int]]]) -> None:
    print()
    print(f"  {'case':<9}{'tool':<11}{'median s':>10}{'peak MiB':>10}{'output MB':>11}")
    for case, by_tool in results.items():
        for tool, (seconds, rss, size) in by_tool.items():
            print(f"  {case:<9}{tool:<11}{seconds:>10.2f}{rss / 1024:>10.0f}{size / 1e6:>11.1f}")
    print("\n  runner ÷ papermill (time, peak memory, output size)")
    for case, by_tool in results.items():
        r, p = by_tool["runner"], by_tool["papermill"]
        print(f"  {case:<9}{r[0] / p[0]:>8.2f}{r[1] / p[1]:>8.2f}{r[2] / max(1, p[2]):>10.3f}")
    floods = [c for c in ("forever", "big") if c in results]
    for case in floods:
        seconds, rss, size = results[case]["runner"]
        ok = rss / 1024 < 400 and size / 1e6 < 20
        print(
            f"  goal ({case}): peak < 400 MiB and output < 20 MB: "
            f"{rss / 1024:.0f} MiB, {size / 1e6:.1f} MB -> {'met' if ok else 'NOT met'}"
        )


if __name__ == "__main__":
    sys.exit(main())
