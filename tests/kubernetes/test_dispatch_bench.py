"""The dispatch benchmark runs end to end at a tiny size and prints what it compares.

If it broke (the fake's or the service's set-up changed under it), its figures would
be missing when someone needs them; this runs it as a user does, in a process of its
own, with 4 jobs and 50 ms creates.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "dispatch_bench.py"


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_the_bench_creates_every_job_and_prints_its_ratios(database):
    command = [sys.executable, str(BENCH), "--jobs", "4", "--create-ms", "50"]
    done = subprocess.run(
        [*command, "--database", database],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout
    header = next(line for line in table.splitlines() if line.startswith("database"))
    assert header.split() == ["database", "what", "measured", "compared", "with", "ratio"]
    # every time is next to what it is compared with
    assert "serial 4 x create 0.20 s" in table
    assert "ideal ceil(4/" in table
    assert "idle p99" in table
    assert "goal 100 ms" in table
    created = re.search(r"Jobs created +(\d+) of 4 .* ([\d.]+)$", table, re.MULTILINE)
    assert created is not None, table
    assert created.groups() == ("4", "1.00")
    submits = next(line for line in table.splitlines() if "submits accepted" in line)
    assert submits.split()[-1] == "1.00"
