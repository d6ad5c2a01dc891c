"""Every rule about how much a user may run, in one place and one wording: a user's quota
(their own entry, their groups', their class's GPU-hours and what a teacher granted),
the GPU-hours they used in its period, the check at submit, and why a queued job may not
start yet because of it. Submit, the dispatcher and the usage report all ask here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from nbjobs.config import PERIOD_WORDS, PERIODS, Flavor, Quota
from nbjobs.models import ClassInfo, JobState
from nbjobs.units import figure, limit_figure

from .budgets import Budgets
from .context import Context
from .db import JobRecord, utcnow
from .errors import Caller, Forbidden, OverQuota
from .metering import gpu_hours_in


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
        best = self._best_class(caller)
        if best is not None:
            # A class's GPU-hours (and what its teacher granted this student on top)
            # replace the usual budget; its other limits stay.
            cls, hours = best
            mine = [
                q.model_copy(update={"gpu_hours": hours, "period": cls.period})
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
        deleting never gives hours back), by the one rule of :mod:`.metering`."""
        now = utcnow()
        return gpu_hours_in(db, user, now - PERIODS[period], now)

    def granted(self, caller: Caller) -> float:
        """Of the caller's GPU-hour budget, the hours a teacher granted on top of their
        class's (0: none, or their budget is not a class's)."""
        best = self._best_class(caller)
        return 0.0 if best is None else best[1] - (best[0].gpu_hours or 0.0)

    def _best_class(self, caller: Caller) -> tuple[ClassInfo, float] | None:
        """The class whose GPU-hours (with what its teacher granted this student) make
        the caller's budget, and those hours; None when no class's budget is theirs."""
        if caller.name in self.ctx.config.quotas.users:
            return None
        classes = self.ctx.classes.of_student(caller.name)
        budgets = [
            (c, (c.gpu_hours or 0.0) + self.budgets.extra(c, caller.name))
            for c in classes
            if c.gpu_hours is not None
        ]
        return max(budgets, key=lambda b: b[1]) if budgets else None

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


def too_big_for_quota(flavor: Flavor, quota: Quota) -> str:
    """Why a flavor can never start under a quota's running-GPU limit, and what to do."""
    return (
        f"flavor {flavor.name!r} needs {flavor.gpu_equivalents:g} GPU(s) at once and your "
        f"quota (max_running_gpus) allows {quota.max_running_gpus:g}; pick a flavor with "
        "fewer GPUs or ask your admin to raise your quota"
    )
