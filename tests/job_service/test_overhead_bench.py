"""The overhead benchmark runs end to end at a tiny size and prints what it compares.

It starts a real job service in a process of its own, runs the runner directly and
through the service, and prints the difference and the ratio of each, with the load:
if its set-up broke, the figures issue 44 asks for would be missing when needed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "overhead_bench.py"
FIGURE = r"[+-]?\d+\.\d+"


@pytest.mark.parametrize(
    ("client", "said"), [("watch", "watched through api/events"), ("poll", "asked every 50 ms")]
)
def test_the_bench_runs_a_notebook_both_ways_and_prints_difference_and_ratio(client, said):
    small = ["--quick", "--cases", "3", "--rounds", "1", "--at-once", "2"]
    done = subprocess.run(
        [sys.executable, str(BENCH), *small, "--client", client],
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"submit -> done through the API ({said}" in done.stdout
    header = next(line for line in lines if line.lstrip().startswith("case"))
    assert header.split() == ["case", "direct", "s", "service", "s", "difference", "ratio", "load"]
    for label, goal in (("3 cells, one", "goal < 0.15 s"), ("3 cells, 2 at once", "goal <= 1.1x")):
        row = next(line for line in lines if line.lstrip().startswith(label))
        # direct, service, difference, ratio, and the load's range
        assert re.search(rf"{FIGURE}\s+{FIGURE}\s+{FIGURE}\s+{FIGURE}\s+\d+\.\d-\d+\.\d", row), row
        assert re.search(rf"{re.escape(goal)}: (met|NOT met)$", row), row
    assert any(line.lstrip().startswith("where: submit -> started_at") for line in lines)
    # the runners' own runs (their status files) both ways, and the difference around them
    own = next(line for line in lines if "the runner's own run" in line)
    assert re.search(rf"alone {FIGURE} s, under the service {FIGURE} s \({FIGURE} x\)$", own)
    around = next(line for line in lines if line.lstrip().startswith("around it:"))
    assert re.search(
        rf"alone {FIGURE} s .* through the service {FIGURE} s: the service adds {FIGURE} s"
        r"  goal < 0.15 s: (met|NOT met)$",
        around,
    ), around
    # without a peer's Python, it says how to get jupyter-scheduler's figures
    assert "--peer-python" in done.stdout
