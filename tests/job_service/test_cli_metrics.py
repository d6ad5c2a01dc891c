"""``nbjobs metrics ID``: a job's telemetry from a terminal, against a real service process."""

from __future__ import annotations

import json

from nbjobs.client.reports import metrics_text

from . import test_cli
from .telemetry_helpers import GIB

#: test_cli's module fixture: a real ``nbjobs service`` process and ada's folder
service = test_cli.service


def test_metrics_of_a_job_prints_what_it_used_and_json_for_scripts(service):
    test_cli.write(service, "m.ipynb", "1 + 1")
    submitted = test_cli.cli(service, "submit", "m.ipynb", "--flavor", "cpu", "--wait", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)

    shown = test_cli.cli(service, "metrics", job["id"])
    as_json = test_cli.cli(service, "metrics", job["id"], "--json")
    unknown = test_cli.cli(service, "metrics", "abc123")

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"job:        {job['id']} (succeeded)\n")
    body = json.loads(as_json.stdout)
    assert (body["job_id"], body["state"], body["hint"]) == (job["id"], "succeeded", None)
    assert unknown.returncode == 5
    assert "no job 'abc123' of yours" in unknown.stderr


def test_the_text_says_the_summary_the_latest_sample_and_the_hint():
    body = {
        "job_id": "abc",
        "state": "running",
        "interval_seconds": 10.0,
        "samples": [
            {
                "at": "2025-01-31T12:00:00+00:00",
                "gpu_utilization_percent": 4.0,
                "gpu_memory_used_bytes": 2 * GIB,
                "gpu_memory_total_bytes": 40 * GIB,
                "cpu_percent": 97.0,
                "memory_bytes": 3 * GIB,
                "gpus": [{"index": "1", "error": "GPU is lost"}],
            }
        ],
        "summary": {
            "samples": 90,
            "gpu_busy_seconds": 54.0,
            "gpu_allocated_seconds": 900.0,
            "gpu_utilization_mean_percent": 6.0,
            "gpu_utilization_peak_percent": 31.0,
            "gpu_memory_peak_bytes": int(1.5 * GIB),
            "gpu_memory_total_bytes": 40 * GIB,
            "cpu_mean_percent": 90.0,
            "cpu_peak_percent": 180.0,
            "memory_peak_bytes": 5 * GIB,
        },
        "hint": "GPU busy 6 % on average: a CPU or a smaller GPU flavor would do",
    }

    lines = metrics_text(body).splitlines()

    assert lines[:7] == [
        "job:        abc (running)",
        "samples:    90, every 10 s",
        "GPU busy:   6.0 % on average, peak 31 %",
        "GPU-hours:  0.01 busy of 0.25 sampled",
        "GPU memory: peak 1.5 GiB of 40.0 GiB",
        "CPU:        90 % on average, peak 180 % (100 % = one core)",
        "memory:     peak 5.0 GiB",
    ]
    assert lines[7].startswith(
        "latest:     GPU 4 % · GPU memory 2.0 GiB of 40.0 GiB · CPU 97 % · memory 3.0 GiB · "
        "GPU 1: GPU is lost (at "
    )
    assert lines[8] == "hint:       GPU busy 6 % on average: a CPU or a smaller GPU flavor would do"
    empty = {"job_id": "q", "state": "queued", "interval_seconds": None, "samples": []}
    assert metrics_text(empty).splitlines()[1] == "telemetry:  none yet (telemetry is off here)"
