"""The dispatch benchmark runs end to end at a tiny size and prints what it compares.

If it broke (the fake's or the service's set-up changed under it), its figures would
be missing when someone needs them; this runs it as a user does, in a process of its
own, with 4 jobs and 50 ms creates, one round on each database (a round is a fresh
fake, service and database: each costs several seconds of CPU): each round's figures
are printed on a line of their own, and per database the worst round against the goal
(every round must meet it). How several rounds of one database are reported is
checked on the report itself, with rounds made up here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bench.dispatch_report import Round, round_lines, worst_rounds

BENCH = Path(__file__).resolve().parents[2] / "bench" / "dispatch_bench.py"
DATABASES = ("sqlite", "postgresql")


def test_the_bench_creates_every_job_and_prints_its_ratios():
    command = [sys.executable, str(BENCH), "--jobs", "4", "--create-ms", "50"]
    done = subprocess.run(
        [*command, "--repeat", "1", "--database", "both"],
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
    # on each database every Job was created and every submit accepted
    created = re.findall(r"Jobs created +(\d+) of 4 .* ([\d.]+)$", table, re.MULTILINE)
    assert created == [("4", "1.00")] * 2, table
    submits = [line for line in table.splitlines() if "submits accepted" in line]
    assert [line.split()[-1] for line in submits] == ["1.00"] * 2, table
    for database in DATABASES:
        # its round on a line of its own: p50, p99, max, p99 / goal, loop lag, CPU, load
        rounds = re.findall(
            rf"^{database} +(\d) +([\d.]+) ms +([\d.]+) ms +([\d.]+) ms +([\d.]+) +[\d.]+ ms"
            r" +[\d.]+ +[\d.]+$",
            table,
            re.MULTILINE,
        )
        assert [r[0] for r in rounds] == ["1"], table
        (_, p50, p99, most, against_goal) = rounds[0]
        assert float(p50) <= float(p99) <= float(most)
        assert abs(float(against_goal) - float(p99) / 100) < 0.006  # both rounded
        assert re.search(
            rf"^{database}: worst round 1, GET /jobs p99 {float(p99):.1f} ms / goal 100 ms = "
            r"[\d.]+ \(load [\d.]+\); under the goal in [01] of 1 rounds?",
            table,
            re.MULTILINE,
        ), table


def made_up_round(p99_ms: float, load: float) -> Round:
    """A round whose GETs during the storm all took ``p99_ms``."""
    done = Round(jobs=4, concurrent_starts=8, load=load, began=0.0, ended=1.0)
    done.burst = [p99_ms / 1000] * 20
    return done


def test_several_rounds_each_get_a_line_and_the_worst_is_held_to_the_goal():
    results = {
        "sqlite": [made_up_round(40, 1.0), made_up_round(130, 3.5), made_up_round(60, 2.0)],
        "postgresql": [made_up_round(70, 1.5), made_up_round(90, 1.0)],
    }

    lines = round_lines(results)
    said = worst_rounds(results)

    assert [line[:2] for line in lines[1:]] == [
        ("sqlite", "1"), ("sqlite", "2"), ("sqlite", "3"), ("postgresql", "1"), ("postgresql", "2")
    ]  # fmt: skip
    assert [line[4] for line in lines[1:]] == [
        "40.0 ms", "130.0 ms", "60.0 ms", "70.0 ms", "90.0 ms"
    ]  # fmt: skip
    assert said == [
        "sqlite: worst round 2, GET /jobs p99 130.0 ms / goal 100 ms = 1.30 (load 3.50); "
        "under the goal in 2 of 3 rounds: MISSED",
        "postgresql: worst round 2, GET /jobs p99 90.0 ms / goal 100 ms = 0.90 (load 1.00); "
        "under the goal in 2 of 2 rounds: met in every round",
    ]
