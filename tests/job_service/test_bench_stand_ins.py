"""The service benchmark's own parts: its stand-in runners and its FIFO bound.

If a stand-in wrote a status file the service cannot read, every benchmark job
would end ``failed`` and the figures would measure nothing; if the bound were
wrong, the service's share would be misread.
"""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path

import pytest
from nbjobs.job_runner import read_status

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def service_bench():
    spec = importlib.util.spec_from_file_location("service_bench", BENCH / "service_bench.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("runner", ["python", "sh"])
def test_each_stand_in_takes_the_time_asked_and_reports_success(service_bench, runner, tmp_path):
    status = tmp_path / "status.json"
    command = [*service_bench.stand_in(runner), "in.ipynb", "out.ipynb"]
    command += ["--status-file", str(status), "--parameters", '{"seconds": 0.3}']

    t0 = time.monotonic()
    subprocess.run(command, check=True, timeout=30)
    took = time.monotonic() - t0

    assert took >= 0.3
    final = read_status(status)  # what the job service reads
    assert final is not None
    assert (final.state, final.exit_code) == ("succeeded", 0)
    assert final.finished_at is not None
    assert not list(tmp_path.glob("*.tmp"))


def test_the_fifo_bound_is_first_come_first_served_list_scheduling(service_bench):
    # two slots: the 2-second job holds one while the others go through the other
    assert service_bench.list_schedule([2, 1, 1, 1, 1], 2) == 3
    assert service_bench.list_schedule([2, 1, 1, 1, 1], 2, overhead=0.5) == 4.5
    # the tail: the long job comes last and runs alone
    assert service_bench.list_schedule([1, 1, 2], 2) == 3
