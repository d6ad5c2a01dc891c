"""The idle-GPU policy's verdicts from a job's telemetry samples: warned after ``after``,
cancelled ``grace`` later under ``cancel``, and never for what the samples do not show."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from nbjobs.job_service.idle import IdlePolicy, judge

T0 = datetime(2026, 11, 25, 9, 0, tzinfo=timezone.utc)
INTERVAL = 10.0


def series(*utilisations: float | None, start: datetime = T0) -> list:
    """One sample every INTERVAL seconds from ``start``."""
    return [(start + timedelta(seconds=i * INTERVAL), u) for i, u in enumerate(utilisations)]


def at(samples: list) -> datetime:
    """Just after the last sample."""
    return samples[-1][0] + timedelta(seconds=1)


WARN = IdlePolicy(below_percent=5, after=60, action="warn")
CANCEL = IdlePolicy(below_percent=5, after=60, action="cancel", grace=30)


def test_a_busy_job_is_left_alone():
    samples = series(*([80.0] * 20))
    assert (
        judge(samples, policy=CANCEL, interval=INTERVAL, now=at(samples), warned_at=None).action
        == "busy"
    )


def test_idle_for_the_whole_period_is_warned_with_a_sentence():
    samples = series(*([90.0] * 3 + [1.0] * 7))  # idle from the 4th sample, 60 s before the last
    verdict = judge(samples, policy=WARN, interval=INTERVAL, now=at(samples), warned_at=None)
    assert verdict.action == "warn"
    assert verdict.idle_since == samples[3][0]
    assert verdict.message == (
        "its GPUs have been idle (below 5 %) for 61 s; if it does not need them, cancel it "
        "and use a CPU flavor, so that others can"
    )
    # a warn policy never cancels, however long it stays idle
    later = series(*([1.0] * 100))
    assert (
        judge(later, policy=WARN, interval=INTERVAL, now=at(later), warned_at=T0).action == "warn"
    )


def test_idle_for_less_than_the_period_is_not_warned():
    samples = series(*([90.0] * 3 + [1.0] * 5))  # 40 s idle
    verdict = judge(samples, policy=WARN, interval=INTERVAL, now=at(samples), warned_at=None)
    assert verdict.action == "busy"


def test_one_busy_sample_starts_the_count_again():
    samples = series(*([1.0] * 10 + [50.0] + [1.0] * 3))
    verdict = judge(samples, policy=CANCEL, interval=INTERVAL, now=at(samples), warned_at=T0)
    assert verdict.action == "busy"  # the warning is taken back


def test_cancel_comes_grace_after_the_warning():
    samples = series(*([1.0] * 8))  # 70 s idle: past `after`
    now = at(samples)
    first = judge(samples, policy=CANCEL, interval=INTERVAL, now=now, warned_at=None)
    assert first.action == "warn"
    assert "it will be cancelled after 30 s more unless it uses them" in (first.message or "")
    # warned now: 20 s later it is still only warned, 30 s later it is stopped
    more = series(*([1.0] * 10))
    assert (
        judge(more, policy=CANCEL, interval=INTERVAL, now=at(more), warned_at=now).action == "warn"
    )
    most = series(*([1.0] * 11))
    verdict = judge(
        most, policy=CANCEL, interval=INTERVAL, now=at(most) + timedelta(seconds=10), warned_at=now
    )
    assert verdict.action == "cancel"
    assert verdict.message == "stopped: its GPUs were idle (below 5 %) for 111 s"


def test_what_the_samples_do_not_show_is_not_idle():
    # the GPUs gave no reading for a while: the idle run starts after the gap
    samples = series(*([1.0] * 5 + [None] + [1.0] * 4))
    verdict = judge(samples, policy=WARN, interval=INTERVAL, now=at(samples), warned_at=None)
    assert verdict.action == "busy"
    # the samples stopped coming (telemetry off, the runner stuck): nothing is done
    stale = series(*([1.0] * 20))
    later = at(stale) + timedelta(minutes=5)
    assert judge(stale, policy=CANCEL, interval=INTERVAL, now=later, warned_at=T0).action == "busy"
    # a gap between samples breaks the run too
    gap = series(*([1.0] * 5)) + series(*([1.0] * 4), start=T0 + timedelta(minutes=10))
    assert judge(gap, policy=WARN, interval=INTERVAL, now=at(gap), warned_at=None).action == "busy"
