"""Following started jobs to their end, and recording how they ended.

One task per started job waits on the backend (:meth:`~.backends.Backend.wait`),
holding nothing while it waits: no database session, no lock. When the job ends,
its record is written in one short transaction on the service's database threads:
a job the cluster disrupted goes back to the queue (``requeue_on_eviction``),
any other is finished from the runner's status file and the backend's word.

Only a cancel nbjobs recorded (a user's, an admin's, the idle-GPU reclaim's) makes a job
``cancelled``. A runner stopped by a signal nobody here sent (its pod deleted with
``kubectl``, a node drained on a cluster too old to say so, a machine shut down, a
``kill``) is stopped from outside: re-queued like an eviction where its flavor allows,
else failed with words that say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from nbjobs.job_runner import STATE_FOR_EXIT_CODE, ExitCode, rank_file
from sqlalchemy import update

from nbjobs.models import JobState
from nbjobs.storage import opened_job_dir

from .backends import Outcome
from .db import ACTIVE_VALUES, JobRecord, utcnow
from .live import STATUS_FILE, read_rank_statuses, read_status
from .telemetry import clear_summary, record_final, status_time

#: how often a job Kueue preempts goes back to the queue before it fails with the reason
#: (Kueue requeues what it preempts; this stops a job that is never let finish)
MOST_PREEMPTIONS = 20
#: seconds between looks for where a started job was placed, until the backend says
#: (a cluster binds a Job's pod after nbjobs created it)
PLACEMENT_LOOK = 3.0

if TYPE_CHECKING:
    from .context import Context


class Follower:
    """Waits on every started job and records its end."""

    def __init__(self, ctx: Context, wake: Callable[[], None]) -> None:
        self.ctx = ctx
        #: the dispatcher's: a job's end frees what it held
        self._wake = wake
        self.tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def log(self) -> logging.Logger:
        return self.ctx.log

    def follow(self, job_id: str, ref: str) -> None:
        self.tasks[job_id] = asyncio.ensure_future(self._follow(job_id, ref))

    def task_of(self, job_id: str) -> asyncio.Task[None] | None:
        return self.tasks.get(job_id)

    async def stop(self) -> None:
        """Stop following (the jobs go on; a restart adopts them)."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _follow(self, job_id: str, ref: str) -> None:
        ctx, backend = self.ctx, self.ctx.backend
        placed = asyncio.ensure_future(self._record_placement(job_id, ref))
        try:
            limit = await ctx.in_db(_time_limit_of, ctx, job_id)
            note = None
            try:
                # The runner enforces the limit itself; this is the backstop.
                grace = ctx.config.limits.time_limit_grace or 0.0
                backstop = limit + grace if limit and not backend.enforces_time_limit else None
                outcome = await asyncio.wait_for(backend.wait(ref), timeout=backstop)
            except asyncio.TimeoutError:
                await backend.cancel(ref)
                outcome = await backend.wait(ref)
                note = "timed_out"
            seen = backend.seen(ref)  # read here, on the loop that keeps the backend's view
            node = seen.node if seen is not None else None
            await ctx.in_db(self._record_end, job_id, outcome, note, node)
        finally:
            placed.cancel()
            backend.release(ref)
            self.tasks.pop(job_id, None)
            self._wake()

    async def _record_placement(self, job_id: str, ref: str) -> None:
        """Record the node a started job runs on once the backend knows it (one machine:
        at once; a cluster: when it binds the pod), so that while it runs it counts under
        its node in the usage, the overview and the nodes view, as it does once ended."""
        try:
            while True:
                seen = self.ctx.backend.seen(ref)  # on the loop, which keeps that view
                if seen is not None and seen.node:
                    await self.ctx.in_db(_record_node, self.ctx, job_id, seen.node)
                    return
                await asyncio.sleep(PLACEMENT_LOOK)
        except Exception as exc:  # its end records the node all the same
            self.log.warning("job %s: where it runs was not recorded: %s", job_id, exc)

    def _record_end(
        self, job_id: str, outcome: Outcome, note: str | None, node: str | None
    ) -> None:
        with self.ctx.sessions() as db:
            record = db.get(JobRecord, job_id)
            if record is None:
                return  # forgotten meanwhile
            outside = self._stopped_outside(record, outcome, note, node)
            if outside is not None:
                # as the cluster's own disruptions: back in the queue while the flavor allows
                outcome = dataclasses.replace(outcome, message=outside, disrupted=True)
            if self._may_requeue(record, outcome, note):
                self.requeue(record, outcome)
            else:
                self.finish(
                    record,
                    outcome.exit_code,
                    outcome.message,
                    forced=note,
                    backend_state=outcome.state,
                    started_at=outcome.started_at,
                    finished_at=outcome.finished_at,
                    node=node,
                )
            db.commit()

    def _stopped_outside(
        self, record: JobRecord, outcome: Outcome, forced: str | None, node: str | None
    ) -> str | None:
        """Why the job ended, when its runner was stopped by a signal nbjobs did not send
        (it stopped as for a cancel, and nobody cancelled it here); else None."""
        if record.cancel_requested or forced is not None or outcome.state is not None:
            return None
        if outcome.disrupted:
            return None  # the cluster said why (evicted, preempted): its words stand
        status = read_status(record.job_dir, self.log)
        runner_said = (
            status.message if status is not None and status.exit_code is not None else None
        )
        cancelled = (
            status.state == JobState.CANCELLED.value
            if status is not None and status.exit_code is not None
            else outcome.exit_code == ExitCode.CANCELLED
        )
        if not cancelled:
            return None
        return self._outside_words(runner_said, node or record.node)

    def _outside_words(self, runner_said: str | None, node: str | None) -> str:
        """What a job stopped from outside says: where, and by which signal."""
        signal = next(iter(re.findall(r"\bSIG[A-Z]+\b", runner_said or "")), "SIGTERM")
        if self.ctx.config.backend.kind == "kubernetes":
            on = f" on node {node}" if node else ""
            return (
                f"its pod was stopped outside nbjobs{on} ({signal}): deleted, or its node "
                "drained or shut down; nobody cancelled it here; re-run it"
            )
        return (
            f"its process was stopped outside nbjobs ({signal}): killed, or the machine shut "
            "down; nobody cancelled it here; re-run it"
        )

    def _may_requeue(self, record: JobRecord, outcome: Outcome, forced: str | None) -> bool:
        """A job the cluster disrupted goes back to the queue if its flavor allows more."""
        flavor = self.ctx.config.flavor(record.flavor)
        allowed = (
            MOST_PREEMPTIONS if outcome.requeue else flavor.requeue_on_eviction if flavor else 0
        )
        return (
            outcome.disrupted
            and forced is None
            and not record.cancel_requested
            and flavor is not None
            and (record.requeues or 0) < allowed
        )

    def requeue(self, record: JobRecord, outcome: Outcome) -> None:
        """Put a disrupted job back in the queue, in its old place; it runs from the top.

        What the disrupted attempt left (its status, its log) is kept beside the job's
        files as ``status.attempt-N.json`` and ``log.attempt-N.txt`` (and each further
        rank's, ``log-rank-1.attempt-N.txt``, ...); the GPU time it
        held is not charged (the cluster, not the user, cut it short).
        """
        attempt = (record.requeues or 0) + 1
        flavor = self.ctx.config.flavor(record.flavor)
        allowed = flavor.requeue_on_eviction if flavor is not None else attempt
        if outcome.requeue:
            allowed = MOST_PREEMPTIONS
        try:
            with opened_job_dir(Path(record.job_dir)) as folder:
                # each rank's of a multi-node job (status-rank-1.json, log-rank-1.txt, ...)
                files = [
                    rank_file(Path(base), rank)
                    for rank in range(record.nodes or 1)
                    for base in (STATUS_FILE, "log.txt")
                ]
                for name, kept in [(f.name, f.stem) for f in files]:
                    suffix = Path(name).suffix
                    with contextlib.suppress(FileNotFoundError):
                        # renamed in the job's folder itself: a link there is moved, not
                        # followed
                        os.replace(
                            name,
                            f"{kept}.attempt-{attempt}{suffix}",
                            src_dir_fd=folder,
                            dst_dir_fd=folder,
                        )
        except OSError as exc:  # the folder is gone or was changed: keep nothing
            self.log.warning("job %s: the last attempt's files not kept: %s", record.id, exc)
        why = (outcome.message or "the cluster stopped it").removesuffix("; re-run it")
        record.requeues = attempt
        record.state = JobState.QUEUED.value
        record.backend_ref = None
        record.claim = None
        record.gpus = []
        record.started_at = None
        record.cells_done = record.cells_total = 0
        record.current_cell = None
        record.exit_code = None
        clear_summary(record)  # the attempt's GPU time is not charged, nor its busy time
        self.ctx.runners.forget(record.id)  # the attempt's status went with its files
        record.message = (
            f"{why}; queued again (preempted {attempt} time(s)); it runs from the top when "
            f"Kueue admits it again (the log so far is kept as log.attempt-{attempt}.txt)"
            if outcome.requeue
            else f"re-queued ({attempt} of {allowed} allowed) after {why}; it runs again from "
            f"the top (the log so far is kept as log.attempt-{attempt}.txt)"
        )
        self.log.warning("job %s: %s", record.id, record.message)

    def finish(
        self,
        record: JobRecord,
        exit_code: int | None,
        note: str | None,
        *,
        lost: bool = False,
        forced: str | None = None,
        backend_state: str | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
        node: str | None = None,
    ) -> None:
        """Record how a job ended, from the runner's status file and the exit code.

        ``backend_state`` (with ``note`` saying why) is the backend's word on a job the
        cluster ended (its deadline, out of memory, eviction): it wins over the runner's.
        ``node`` is where the backend last saw it run.
        """
        if node:
            record.node = node
        # who asked for the cancel (set by cancel()); the runner only knows the signal
        cancelled_by = record.message if record.cancel_requested else None
        status = read_status(record.job_dir, self.log)  # the final word, read now
        self.ctx.runners.forget(record.id)
        final_status = status is not None and status.exit_code is not None
        if status is not None:
            record.cells_done, record.cells_total = status.cells_done, status.cells_total
            record.current_cell = status.current_cell
        # what its GPUs did (telemetry summary), on every rank of a multi-node job
        others = read_rank_statuses(record.job_dir, record.nodes or 1, self.log)
        record_final(record, status, self.log, others)
        if final_status:
            assert status is not None
            record.exit_code = status.exit_code
            state = status.state
            record.message = status.message
            if status.error is not None:
                record.error = {
                    "cell_index": status.error.cell_index,
                    "ename": status.error.ename,
                    "evalue": status.error.evalue,
                }
        elif exit_code is not None and exit_code >= 0 and exit_code in {e.value for e in ExitCode}:
            record.exit_code = exit_code
            state = STATE_FOR_EXIT_CODE[ExitCode(exit_code)]
            record.message = note
        else:
            record.exit_code = exit_code
            state = JobState.FAILED.value
            if lost:
                record.message = (
                    "the job's process was gone when the job service restarted; re-run it"
                )
            else:
                record.message = note or "the runner ended without reporting; see the log"
        if record.cancel_requested and state in (JobState.CANCELLED.value, JobState.FAILED.value):
            state = JobState.CANCELLED.value
            record.message = cancelled_by or record.message or "cancelled"
        elif state == JobState.CANCELLED.value and forced is None and backend_state is None:
            # the runner stopped as for a cancel nobody made here (a shutdown while the
            # service was away, found when it comes back)
            state = JobState.FAILED.value
            record.message = self._outside_words(record.message, node or record.node)
        if forced == "timed_out":
            state = JobState.TIMED_OUT.value
            record.message = (
                f"stopped by the job service after its time limit ({record.time_limit:g} s)"
            )
        elif backend_state is not None:
            # The backend knows better than the runner (the cluster's deadline, out of memory).
            state = backend_state
            record.message = note or record.message
        record.state = state
        if started_at is None and record.started_at is None and status is not None:
            started_at = _runner_start(record, status.started_at)
        _record_times(record, started_at, finished_at)
        self.log.info(
            "job %s: %s%s", record.id, state, f" ({record.message})" if record.message else ""
        )


def _runner_start(record: JobRecord, written: str | None) -> datetime | None:
    """When the runner says it began, for a job whose start the service never recorded
    (killed in between; found ended at its next start): without it the job's run, GPU
    time included, counted for nothing. The user's own process writes that file, so the
    time is kept within what the service knows: not before the submit, not after now."""
    when = status_time(written)
    if when is None:
        return None
    return min(max(when, record.submitted_at), utcnow())


def _record_times(
    record: JobRecord, started_at: datetime | None, finished_at: datetime | None
) -> None:
    """When an ended job ran, and the GPU-seconds it held. The backend's own record of the
    times (a cluster's) wins over when this service noticed: GPU-hours are charged for
    what ran, not for a restart's downtime."""
    if started_at is not None and (finished_at is None or started_at <= finished_at):
        record.started_at = started_at
    record.finished_at = finished_at or utcnow()
    if record.started_at is not None:
        held = (record.finished_at - record.started_at).total_seconds()
        record.gpu_seconds_held = max(0.0, held) * record.charged_gpus


def _record_node(ctx: Context, job_id: str, node: str) -> None:
    """Set a started job's node where none, or another, is recorded (a job that ends on
    more nodes than it began on gets them all at its end)."""
    with ctx.sessions() as db:
        db.execute(
            update(JobRecord)
            .where(
                JobRecord.id == job_id,
                JobRecord.state.in_(ACTIVE_VALUES),
                JobRecord.node.is_(None) | (JobRecord.node != node),
            )
            .values(node=node)
        )
        db.commit()


def _time_limit_of(ctx: Context, job_id: str) -> float | None:
    with ctx.sessions() as db:
        record = db.get(JobRecord, job_id)
        return record.time_limit if record else None
