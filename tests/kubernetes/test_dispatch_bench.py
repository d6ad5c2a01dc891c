"""The dispatch benchmark runs end to end at a tiny size and prints what it compares.

If it broke (the fake's or the service's set-up changed under it), its figures would
be missing when someone needs them; this runs it as a user does, in a process of its
own, with 4 jobs and 50 ms creates: each round's figures are printed on a line of their
own, and the worst round against the goal (every round must meet it). Two rounds on
SQLite; one on PostgreSQL, whose server start is the costly part of a round.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "dispatch_bench.py"


@pytest.mark.parametrize(("database", "repeat"), [("sqlite", 2), ("postgresql", 1)])
def test_the_bench_creates_every_job_and_prints_its_ratios(database, repeat):
    command = [sys.executable, str(BENCH), "--jobs", "4", "--create-ms", "50"]
    command += ["--repeat", str(repeat)]
    done = subprocess.run(
        [*command, "--database", database],
        capture_output=True,
        text=True,
        timeout=300,
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
    # each round on a line of its own: p50, p99, max, p99 / goal, loop lag, CPU, load
    rounds = re.findall(
        rf"^{database} +(\d) +([\d.]+) ms +([\d.]+) ms +([\d.]+) ms +([\d.]+) +[\d.]+ ms"
        r" +[\d.]+ +[\d.]+$",
        table,
        re.MULTILINE,
    )
    assert [r[0] for r in rounds] == [str(n + 1) for n in range(repeat)], table
    for _, p50, p99, most, against_goal in rounds:
        assert float(p50) <= float(p99) <= float(most)
        assert abs(float(against_goal) - float(p99) / 100) < 0.006  # both rounded
    worst = max(float(r[2]) for r in rounds)
    assert re.search(
        rf"^{database}: worst round \d, GET /jobs p99 {worst:.1f} ms / goal 100 ms = "
        rf"[\d.]+ \(load [\d.]+\); under the goal in \d of {repeat} rounds?",
        table,
        re.MULTILINE,
    ), table
