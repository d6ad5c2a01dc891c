"""Idle-GPU reclaim: whether a running job has left its GPUs idle long enough to be warned,
or (under a ``cancel`` policy) stopped.

A flavor's ``idle_gpu`` policy in nbjobs.yaml says what idle is (``below_percent``: the
job's GPU utilisation, the mean over its GPUs, stays below it), for how long (``after``)
before the owner is warned, and what then (``action``: ``warn`` only, or ``cancel`` once
the GPUs stay idle ``grace`` longer). The decision is made from the job's telemetry
samples alone; a job is idle only when the samples cover the whole period (a job whose
telemetry stopped is never stopped for it), and a single sample at or above the
threshold starts the count again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

#: samples further apart than this many intervals leave a gap: the GPUs' use is unknown
#: there, and an idle period cannot run across it
GAP_INTERVALS = 2.5


@dataclass(frozen=True)
class IdlePolicy:
    """A flavor's ``idle_gpu`` settings (see nbjobs.config)."""

    below_percent: float
    after: float  # seconds
    action: str  # "warn" or "cancel"
    grace: float = 300.0  # seconds


@dataclass(frozen=True)
class IdleVerdict:
    """What to do about one job now."""

    #: "busy" (nothing to do; a warning given earlier is taken back), "warn" or "cancel"
    action: str
    #: since when its GPUs have been idle without a break (None: they are not)
    idle_since: datetime | None = None
    #: the sentence for the job's owner (the warning, or why it was stopped)
    message: str | None = None


def idle_since(samples: Sequence[tuple[datetime, bool | None]], interval: float) -> datetime | None:
    """When the unbroken run of idle samples at the end of ``samples`` began (None: the
    last sample is not idle).

    ``samples`` are (time, idle: True, False, or None when the GPUs gave no reading),
    oldest first. A busy sample, a missing reading or a gap of more than
    :data:`GAP_INTERVALS` intervals between two samples ends the run.
    """
    since = None
    for at, idle in reversed(samples):
        if idle is not True:
            break
        if since is not None and (since - at).total_seconds() > GAP_INTERVALS * interval:
            break
        since = at
    return since


def judge(
    samples: Sequence[tuple[datetime, float | None]],
    *,
    policy: IdlePolicy,
    interval: float,
    now: datetime,
    warned_at: datetime | None,
) -> IdleVerdict:
    """What the policy says of a running job whose recent samples are ``samples``:
    (time, mean GPU utilisation %, or None when no GPU answered), oldest first.

    ``warned_at``: when its owner was warned (None: not yet). A ``cancel`` comes only
    after a warning, and only once the GPUs stayed idle ``grace`` past both the warning
    and the end of the ``after`` period.
    """
    if not samples or (now - samples[-1][0]).total_seconds() > GAP_INTERVALS * interval:
        return IdleVerdict("busy")  # no recent reading: nothing is known, nothing is done
    marks = [(at, None if u is None else u < policy.below_percent) for at, u in samples]
    since = idle_since(marks, interval)
    if since is None:
        return IdleVerdict("busy")
    idle_for = (now - since).total_seconds()
    threshold = _percent(policy.below_percent)
    if idle_for < policy.after:
        return IdleVerdict("busy", since)
    if policy.action == "cancel" and warned_at is not None:
        due = max(warned_at, since + timedelta(seconds=policy.after))
        if (now - due).total_seconds() >= policy.grace:
            return IdleVerdict(
                "cancel",
                since,
                f"stopped: its GPUs were idle (below {threshold}) for {_duration(idle_for)}",
            )
    if policy.action == "cancel":
        message = (
            f"its GPUs have been idle (below {threshold}) for {_duration(idle_for)}: it will "
            f"be cancelled after {_duration(policy.grace)} more unless it uses them (the "
            "output keeps the cells that ran)"
        )
    else:
        message = (
            f"its GPUs have been idle (below {threshold}) for {_duration(idle_for)}; if it "
            "does not need them, cancel it and use a CPU flavor, so that others can"
        )
    return IdleVerdict("warn", since, message)


def _percent(value: float) -> str:
    return f"{value:g} %"


def _duration(seconds: float) -> str:
    """``90 s``, ``30 min``, ``1 h 30 min``: for people."""
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h" + (f" {minutes} min" if minutes else "")
