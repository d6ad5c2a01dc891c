"""Idle-GPU reclaim: warn the owners of jobs that leave their GPUs idle, and stop them
where the flavor's policy says so.

Every telemetry interval (at least :data:`MIN_PERIOD` seconds) the reclaimer reads the
running jobs of flavors with an ``idle_gpu`` policy and their recent samples (one short
read on the database threads), judges each (:func:`~.idle.judge`), and records what
changed in another: a warning the job shows its owner (the Jobs panel, ``nbjobs
status``), a warning taken back once the GPUs work again. A job to stop is stopped as
a cancel is, with the reason in its record and, through ``stop-reason.txt`` beside
its status file, in its output's banner; its partial output is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbjobs.job_runner.status import STOP_REASON_FILE
from sqlalchemy import select, update

from nbjobs.config import Flavor
from nbjobs.storage import opened_job_dir

from .db import ACTIVE_VALUES, JobRecord, JobSample
from .idle import IdlePolicy, IdleVerdict, judge
from .periodic import InRounds, Periodic

if TYPE_CHECKING:
    from .context import Context
    from .telemetry import TelemetryCollector

#: the reclaimer looks at least this many seconds apart (and at the telemetry interval)
MIN_PERIOD = 5.0
#: how far back (in multiples of a policy's after + grace) a job's samples are read
LOOK_BACK = 4


@dataclass
class _Watched:
    job_id: str
    policy: IdlePolicy
    warned_at: datetime | None
    warning: str | None
    samples: list[tuple[datetime, float | None]]


def policy_of(flavor: Flavor) -> IdlePolicy | None:
    """A flavor's ``idle_gpu`` settings as the judge reads them (None: no policy)."""
    settings = flavor.idle_gpu
    if settings is None or not flavor.gpus:
        return None
    return IdlePolicy(
        below_percent=settings.below_percent,
        after=settings.after or 0.0,
        action=settings.action,
        grace=settings.grace or 0.0,
    )


class IdleReclaimer(InRounds):
    """Judges the running jobs of flavors with an idle-GPU policy, every interval."""

    def __init__(self, ctx: Context, telemetry: TelemetryCollector) -> None:
        self.ctx = ctx
        self.telemetry = telemetry
        self._rounds = Periodic(
            self.check,
            lambda: max(MIN_PERIOD, telemetry.interval),
            what="idle-GPU check",
            log=lambda: self.log,
            first_wait=True,
        )

    @property
    def log(self) -> logging.Logger:
        return self.ctx.log

    def policies(self) -> dict[str, tuple[IdlePolicy, frozenset[str]]]:
        """Each flavor with a policy: the policy and the groups it exempts."""
        found = {}
        for flavor in self.ctx.config.flavors:
            policy = policy_of(flavor)
            if policy is not None and flavor.idle_gpu is not None:
                found[flavor.name] = (policy, frozenset(flavor.idle_gpu.exempt_groups))
        return found

    def wanted(self) -> bool:
        """Nothing to look at without a policy or telemetry."""
        return bool(self.policies() and self.telemetry.interval)

    async def check(self, now: datetime | None = None) -> dict[str, IdleVerdict]:
        """One look at every watched job; what was decided for each (for tests and logs)."""
        now = now or datetime.now(timezone.utc)
        ctx = self.ctx
        policies = self.policies()
        interval = self.telemetry.interval
        if not policies or not interval:
            return {}
        watched = await ctx.in_db(self._read, policies, interval, now)
        verdicts = {
            w.job_id: judge(
                w.samples, policy=w.policy, interval=interval, now=now, warned_at=w.warned_at
            )
            for w in watched
        }
        await ctx.in_db(self._record, watched, verdicts, now)
        for job_id, verdict in verdicts.items():
            if verdict.action == "cancel" and verdict.message:
                await self._stop(job_id, verdict.message)
        return verdicts

    def _read(
        self,
        policies: dict[str, tuple[IdlePolicy, frozenset[str]]],
        interval: float,
        now: datetime,
    ) -> list[_Watched]:
        """The running jobs under a policy (not exempt) and their recent samples: enough
        to judge (``after`` and ``grace``) and to say for how long they idled, within
        :data:`LOOK_BACK` times that (a job keeps a bounded series anyway)."""
        longest = max(p.after + p.grace for p, _ in policies.values()) * LOOK_BACK
        since = now - timedelta(seconds=longest + 3 * interval)
        watched = []
        with self.ctx.sessions() as db:
            jobs = db.execute(
                select(
                    JobRecord.id,
                    JobRecord.flavor,
                    JobRecord.groups,
                    JobRecord.idle_warned_at,
                    JobRecord.warning,
                ).where(
                    JobRecord.state.in_(ACTIVE_VALUES),
                    JobRecord.flavor.in_(list(policies)),
                    JobRecord.cancel_requested == 0,
                )
            ).all()
            for job_id, flavor, groups, warned_at, warning in jobs:
                policy, exempt = policies[flavor]
                if exempt & set(groups or []):
                    continue
                samples = db.execute(
                    select(JobSample.at, JobSample.gpu_utilization_percent)
                    .where(JobSample.job_id == job_id, JobSample.at >= since)
                    .order_by(JobSample.at)
                ).all()
                watched.append(
                    _Watched(job_id, policy, warned_at, warning, [(a, u) for a, u in samples])
                )
        return watched

    def _record(
        self, watched: list[_Watched], verdicts: dict[str, IdleVerdict], now: datetime
    ) -> None:
        """Warnings given, changed or taken back (only for jobs still running)."""
        with self.ctx.sessions() as db:
            for w in watched:
                verdict = verdicts[w.job_id]
                values: dict[str, Any]
                if verdict.action == "warn" and verdict.message != w.warning:
                    values = {"warning": verdict.message}
                    if w.warned_at is None:
                        values["idle_warned_at"] = now
                        self.log.info("job %s: %s", w.job_id, verdict.message)
                elif verdict.action == "busy" and (w.warning or w.warned_at):
                    values = {"warning": None, "idle_warned_at": None}
                else:
                    continue
                db.execute(
                    update(JobRecord)
                    .where(JobRecord.id == w.job_id, JobRecord.state.in_(ACTIVE_VALUES))
                    .values(**values)
                    .execution_options(synchronize_session=False)
                )
            db.commit()

    async def _stop(self, job_id: str, reason: str) -> None:
        """Stop a job as a cancel does, saying why (its record, its output's banner)."""
        ctx = self.ctx
        ref, job_dir = await ctx.in_db(self._ask_stop, job_id, reason)
        if ref is None:
            return  # ended (or cancelled) meanwhile
        self.log.warning("job %s: %s", job_id, reason)
        try:
            await asyncio.to_thread(leave_stop_reason, job_dir, reason)
        except OSError as exc:  # the banner then says "cancelled by SIGTERM"; the record says why
            self.log.warning("job %s: the stop reason not left for its runner: %s", job_id, exc)
        await ctx.backend.cancel(ref)

    def _ask_stop(self, job_id: str, reason: str) -> tuple[str | None, str]:
        with self.ctx.sessions() as db:
            record = db.get(JobRecord, job_id)
            if record is None or record.state not in ACTIVE_VALUES or record.cancel_requested:
                return None, ""
            record.cancel_requested = 1
            record.message = reason
            record.warning = None
            db.commit()
            return record.backend_ref, record.job_dir


def leave_stop_reason(job_dir: str, reason: str) -> None:
    """Write ``stop-reason.txt`` in the job's folder, through no link, replacing any: the
    runner reads it when signalled, for its status message and the output's banner."""
    with opened_job_dir(Path(job_dir)) as folder:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(STOP_REASON_FILE, dir_fd=folder)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(STOP_REASON_FILE, flags, 0o644, dir_fd=folder)
        try:
            os.write(fd, (reason + "\n").encode("utf-8"))
        finally:
            os.close(fd)
