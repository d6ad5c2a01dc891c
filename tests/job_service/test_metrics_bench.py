"""The metrics benchmark runs end to end at a tiny size and prints what it compares.

If it broke (the service's set-up or the tables changed under it), its figures would
be missing when someone needs them; this runs it as a user does, in a process of its
own, with 300 jobs and 5 requests of each kind.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "metrics_bench.py"


def test_the_bench_fills_the_database_times_each_request_and_prints_its_ratios():
    done = subprocess.run(
        [sys.executable, str(BENCH), "--jobs", "300", "--requests", "5"],
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("300 jobs (")
    header = next(line for line in lines if line.startswith("request"))
    assert header.split() == ["request", "p50", "ms", "p99", "ms", "p50/health", "p50/list"]
    for what in ("api/health", "api/jobs?limit=50", "metrics (Prometheus)", "(720)", "(30)"):
        row = next(line for line in lines if what in line)
        figures = re.findall(r"\d+\.\d+", row)
        assert len(figures) == 4, row  # p50, p99 and both ratios
    health = next(line for line in lines if "api/health" in line)
    assert health.split()[-2] == "1.00"  # the baseline against itself
    assert re.search(r"^goal: metrics p50 < 50 ms: (met|MISSED) \(\d+\.\d ms\)$", done.stdout, re.M)
