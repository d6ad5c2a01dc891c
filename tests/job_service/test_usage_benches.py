"""The metering and telemetry-storage benchmarks run end to end at a tiny size and print
what they compare (so their figures are there when someone needs them)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_the_metering_bench_times_each_breakdown_against_its_baselines():
    lines = run(str(BENCH / "metering_bench.py"), "--jobs", "2000", "--rounds", "2")
    assert lines[0].startswith("2000 jobs over 90 days written in")
    for what in ("count (SQL)", "ORM records", "by user", "by class", "by flavor", "by node"):
        assert sum(line.startswith(what) for line in lines) == 2, what  # a week, all 90 days
    assert lines[-1].startswith("slowest report / goal 200 ms: ")


def test_the_storage_bench_shows_growth_per_job_hour_levelling_off():
    lines = run(str(BENCH / "telemetry_storage_bench.py"), "--jobs", "3", "--interval", "5")
    assert re.fullmatch(
        r"3 jobs of 2 GPUs sampled every 5 s; their records alone: [\d,]+ bytes a job", lines[0]
    )
    rows = {int(line.split()[0]): line.split() for line in lines[2:]}
    assert sorted(rows) == [1, 2, 4, 12]
    assert rows[1][1] == "720"  # an hour at 5 s: 720 samples a job
    assert rows[12][1] == "720"  # thinned: it levels off
