"""nbjobs.yaml's telemetry.hint_after: how long a GPU job's samples must cover before the
service says it used its GPUs little."""

from __future__ import annotations

from nbjobs.job_service.telemetry import usage_hint

from nbjobs.config import parse_config
from nbjobs.models import TelemetrySummary

A_MINUTE_AT_5_PERCENT = TelemetrySummary(
    samples=60,
    gpu_busy_seconds=3.0,
    gpu_allocated_seconds=60.0,
    gpu_utilization_mean_percent=5.0,
    gpu_utilization_peak_percent=9.0,
)


def test_the_hint_waits_for_hint_after_of_samples():
    assert parse_config("telemetry: {interval: 1s, hint_after: 40s}\n").telemetry.hint_after == 40
    assert parse_config("telemetry: {}\n").telemetry.hint_after == 300  # five minutes
    assert usage_hint(1, A_MINUTE_AT_5_PERCENT) is None  # a minute: too soon to say
    assert usage_hint(1, A_MINUTE_AT_5_PERCENT, min_seconds=40) == (
        "GPU busy 5 % on average: a CPU or a smaller GPU flavor would do"
    )
