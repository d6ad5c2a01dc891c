"""The metering, telemetry-storage and schedule benchmarks run end to end at a tiny size
and print what they compare (so their figures are there when someone needs them)."""

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
    # a pass every 30 s simulated (the default 10 s takes three times the CPU to show
    # the same: growth, then the thinning)
    lines = run(str(BENCH / "telemetry_storage_bench.py"), "--jobs", "3", "--interval", "30")
    assert re.fullmatch(
        r"3 jobs of 2 GPUs sampled every 30 s; their records alone: [\d,]+ bytes a job", lines[0]
    )
    rows = {int(line.split()[0]): line.split() for line in lines[2:]}
    assert sorted(rows) == [1, 2, 4, 12]
    assert [rows[hours][1] for hours in (1, 2, 4)] == ["120", "240", "480"]  # 120 an hour
    assert rows[12][1] == "720"  # not 1 440: thinned, it levels off
    per_hour = {hours: int(row[4].replace(",", "")) for hours, row in rows.items()}
    assert per_hour[12] < 0.8 * per_hour[1]


def test_the_schedule_bench_times_a_pass_against_its_baselines():
    lines = run(str(BENCH / "schedule_bench.py"), "--definitions", "100", "--rounds", "2")
    assert lines[0] == "100 definitions, medians of 2 passes (sqlite)"
    said = "\n".join(lines)
    for row in ("scheduler pass, nothing due", "scheduler pass, 20 due (runs recorded)"):
        assert re.search(rf"^  {re.escape(row)} +[\d.]+ ms$", said, re.MULTILINE), said
    assert re.search(r"^  pass, 20 due / naive pass +[\d.]+x$", said, re.MULTILINE), said
    assert lines[-1].startswith("  goal: under 50 ms: ")
