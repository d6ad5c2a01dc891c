"""Every rule about how much a user may run, in one place and one wording: a user's quota
(their own entry, their groups', their class's GPU-hours and what a teacher granted),
the GPU-hours they used in its period, the check at submit, and why a queued job may not
start yet because of it. Submit, the dispatcher and the usage report all ask here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from nbjobs.config import PERIOD_WORDS, PERIODS, Flavor, Quota
from nbjobs.models import ClassInfo, JobState
from nbjobs.units import figure, limit_figure

from .budgets import Budgets
from .context import Context
from .db import JobRecord, KeptUsage, utcnow
from .errors import Caller, Forbidden, OverQuota


class Quotas:
    """A user's limits (``quotas`` of nbjobs.yaml, classes' GPU-hours, teachers' grants)
    and what they used against them."""

    def __init__(self, ctx: Context, budgets: Budgets) -> None:
        self.ctx = ctx
        self.budgets = budgets

    def of(self, caller: Caller) -> Quota:
        """The caller's quota: their own entry, else the most generous of their groups.

        With several groups in ``quotas.groups``, each limit is the most generous
        any of them grants (no limit beats every number): ``max_running_gpus`` and
        ``max_queued_jobs`` each on their own, while the GPU-hours budget is taken
        whole, hours and period together, from the group whose budget allows the
        most hours per day (10 a day beats 30 a month); a tie goes to the longer
        period, then to the group first by name. A class's GPU-hours replace the
        budget; a user's own entry replaces all of it.
        """
        quotas = self.ctx.config.quotas
        if caller.name in quotas.users:
            return quotas.users[caller.name]
        mine = [quotas.groups[g] for g in sorted(caller.groups) if g in quotas.groups]
        classes = self.ctx.classes.of_student(caller.name)
        budgets = [c for c in classes if c.gpu_hours is not None]
        if budgets:
            # A class's GPU-hours (and what its teacher granted this student on top)
            # replace the usual budget; its other limits stay.
            def hours(c: ClassInfo) -> float:
                return (c.gpu_hours or 0.0) + self.budgets.extra(c, caller.name)

            best = max(budgets, key=hours)
            mine = [
                q.model_copy(update={"gpu_hours": hours(best), "period": best.period})
                for q in (mine or [quotas.default])
            ]
        if not mine:
            return quotas.default

        def most(values: list[Any]) -> Any:
            return None if any(v is None for v in values) else max(values)

        def per_day(q: Quota) -> tuple[float, timedelta]:
            rate = float("inf") if q.gpu_hours is None else q.gpu_hours / PERIODS[q.period].days
            return rate, PERIODS[q.period]

        budget = max(mine, key=per_day)  # max keeps the first of equals: first by name
        return Quota(
            max_running_gpus=most([q.max_running_gpus for q in mine]),
            max_queued_jobs=most([q.max_queued_jobs for q in mine]),
            gpu_hours=budget.gpu_hours,
            period=budget.period,
        )

    def gpu_hours(self, db: Session, user: str, period: str) -> float:
        """GPU-hours ``user``'s jobs held in the ``period`` up to now (deleted jobs' too:
        deleting never gives hours back)."""
        now = utcnow()
        since = now - PERIODS[period]
        records = db.scalars(
            select(JobRecord).where(
                JobRecord.user == user,
                JobRecord.gpu_count > 0,
                JobRecord.started_at.is_not(None),
                (JobRecord.finished_at.is_(None)) | (JobRecord.finished_at >= since),
            )
        ).all()
        used = sum(
            gpu_hours_held(r.started_at, r.finished_at, r.charged_gpus, since, now) for r in records
        )
        kept = db.execute(
            select(KeptUsage.started_at, KeptUsage.finished_at, KeptUsage.gpus).where(
                KeptUsage.user == user, KeptUsage.finished_at >= since
            )
        ).all()
        return used + sum(gpu_hours_held(*row, since, now) for row in kept)

    def check_submit(self, db: Session, caller: Caller, flavor: Flavor) -> None:
        """Refuse a submit the caller's quota does not allow: a flavor bigger than their
        running-GPU limit (:class:`Forbidden`: it could never start), too many jobs
        waiting, or their GPU-hours used up (:class:`OverQuota`)."""
        quota = self.of(caller)
        if quota.max_running_gpus is not None and flavor.gpu_equivalents > quota.max_running_gpus:
            # It could never start: refuse now rather than let it wait forever.
            raise Forbidden(too_big_for_quota(flavor, quota))
        if quota.max_queued_jobs is not None:
            queued = db.scalar(
                select(func.count())
                .select_from(JobRecord)
                .where(
                    JobRecord.user == caller.name,
                    JobRecord.state.in_([JobState.QUEUED.value, JobState.PENDING_APPROVAL.value]),
                )
            )
            if (queued or 0) >= quota.max_queued_jobs:
                raise OverQuota(
                    f"you have {queued} jobs waiting, the most you may have queued; "
                    "wait for some to start or cancel some"
                )
        if flavor.gpus and quota.gpu_hours is not None:
            used = self.gpu_hours(db, caller.name, quota.period)
            if used >= quota.gpu_hours:
                raise OverQuota(
                    f"you have used {figure(used, against=quota.gpu_hours)} of your "
                    f"{limit_figure(quota.gpu_hours)} GPU-hours in "
                    f"{PERIOD_WORDS[quota.period]}; use a CPU flavor, wait until older GPU "
                    "time leaves that window, or ask your teacher or admin for more"
                )

    def why_waiting(
        self,
        caller: Caller,
        flavor: Flavor,
        running_gpus: Mapping[str, float],
        hours: Mapping[tuple[str, str], float],
    ) -> str | None:
        """Why the caller's queued job on ``flavor`` may not start now because of their
        quota (said of them by name: admins and teachers read it too), or None.
        ``running_gpus``: the GPUs each user's running jobs hold; ``hours``: the
        GPU-hours each (user, period) used, as :meth:`gpu_hours` counts them."""
        user = caller.name
        quota = self.of(caller)
        gpus = flavor.gpu_equivalents
        if quota.max_running_gpus is not None and gpus > quota.max_running_gpus:
            # queued before the quota shrank: it waits, and says it never fits
            return too_big_for_quota(flavor, quota) + "; cancel it"
        used_gpus = running_gpus.get(user, 0.0)
        if (
            flavor.gpus
            and quota.max_running_gpus is not None
            and used_gpus + gpus > quota.max_running_gpus + 1e-9
        ):
            return (
                f"waiting for {user}'s running jobs: {user} may use "
                f"{limit_figure(quota.max_running_gpus)} GPU(s) at once and uses "
                f"{figure(used_gpus, against=quota.max_running_gpus)}"
            )
        if flavor.gpus and quota.gpu_hours is not None:
            used = hours.get((user, quota.period), 0.0)
            if used >= quota.gpu_hours:
                return (
                    f"{user}'s {limit_figure(quota.gpu_hours)} GPU-hours in "
                    f"{PERIOD_WORDS[quota.period]} are used up; it starts as older GPU time "
                    "leaves that window, or cancel it"
                )
        return None


def gpu_hours_held(
    started: datetime | None, finished: datetime | None, gpus: float, since: datetime, now: datetime
) -> float:
    """The GPU-hours a job of ``gpus`` GPUs held between ``since`` and ``now``: from its
    start (or ``since``) to its end (or ``now``, while it runs); none before it started.
    The one way nbjobs counts a job's GPU-hours against a budget."""
    if started is None:
        return 0.0
    held = ((finished or now) - max(started, since)).total_seconds()
    return max(0.0, held) * gpus / 3600


def too_big_for_quota(flavor: Flavor, quota: Quota) -> str:
    """Why a flavor can never start under a quota's running-GPU limit, and what to do."""
    return (
        f"flavor {flavor.name!r} needs {flavor.gpu_equivalents:g} GPU(s) at once and your "
        f"quota (max_running_gpus) allows {quota.max_running_gpus:g}; pick a flavor with "
        "fewer GPUs or ask your admin to raise your quota"
    )
