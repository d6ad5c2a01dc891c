"""Starting queued jobs: never holding the database while the backend works.

A pass of the dispatcher reads the queue (one short read on the service's
database threads), decides in :mod:`.queue` order what may start now (quotas from
what it read, capacity from the backend's own view, on the event loop), and for
each such job:

1. **claims** it in a transaction of its own: ``queued`` -> ``starting`` with a
   fresh claim token, only if it is still queued (a cancel that came first wins);
2. **starts** it on the backend with no transaction open, several at once
   (``concurrent_starts``): a Kubernetes create that an admission webhook holds
   for a second delays no other job, no API request and no cancel;
3. **records** what the backend made (its handle, GPUs, start time) in another
   short transaction, only if the claim is still this pass's. A cancel that
   arrived while the backend was starting the job is honoured here: what was just
   made is stopped at once.

A backend takes a job's capacity when :meth:`~.backends.Backend.start` is called,
before that first waits (the local backend picks its GPUs, the Kubernetes backend
counts the Job it is creating), so :meth:`~.backends.Backend.free_for` sees the
jobs still being started and a pass never over-fills the machine.

A crash between a backend's start and the record leaves a job ``starting``
without a handle; the next start puts it back in the queue if the backend makes
jobs under names of their own (Kubernetes: the same Job name is created again,
answered 409, and adopted, so it neither runs twice nor is lost), and records it
as lost otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from asyncio import FIRST_COMPLETED
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Text, cast, select, update

from nbjobs.models import JobState

from .backends import Launched, LaunchSpec
from .db import ACTIVE_VALUES, JobRecord, instance_id, rowcount, utcnow
from .errors import Caller
from .follow import Follower
from .live import STATUS_FILE
from .queue import fair_share, in_queue_order
from .retention import StartRooms

if TYPE_CHECKING:
    from .context import Context
    from .lease import DispatcherLease
    from .queue import QueuePositions
    from .quotas import Quotas

#: jobs whose GPU-hours are summed per query when a pass reads the budgets
_CHUNK = 500

#: what a pass decides from: the queued jobs, each user's running jobs, GPUs and last
#: start, and the GPU-hours of users whose quota has a budget
_Plan = tuple[
    list[Any],
    Counter[str],
    defaultdict[str, float],
    dict[str, float],
    dict[tuple[str, str], float],
]


class Dispatcher:
    """The service's scheduling loop: passes over the queue, started jobs recorded."""

    def __init__(
        self,
        ctx: Context,
        *,
        lease: DispatcherLease,
        positions: QueuePositions,
        quotas: Quotas,
        concurrent_starts: int = 8,
    ) -> None:
        self.ctx = ctx
        #: only the service that holds it dispatches
        self._lease = lease
        #: each queued job's place (told when a start changes the queue)
        self._positions = positions
        #: every rule about how much a user may run (quotas.py)
        self._quotas = quotas
        #: who watches each started job to its end; a job's end wakes the dispatcher
        self.follower = Follower(ctx, self.wake)
        #: backend starts at most in flight at once
        self.concurrent_starts = max(1, concurrent_starts)
        #: what each starting job's owner may still write into their job files
        self.rooms = StartRooms()
        #: the starts in flight, by job id (a cancel waits for one to be recorded)
        self.launches: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        #: seconds a stop waits for the starts in flight to be recorded
        self.stop_grace = 5.0
        #: passes over the queue finished (what a watcher waits on: "a pass ran since")
        self.passes = 0

    @property
    def log(self) -> logging.Logger:
        return self.ctx.log

    # -- life --------------------------------------------------------------------

    def run(self) -> None:
        """Pass over the queue from now on: when woken, and every 2 seconds."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        """Ask for a pass soon; safe from any thread (the service's database threads)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    def halt(self) -> None:
        """Start nothing more, at once (the lease was lost, the service stops)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        """Start nothing more; let the starts in flight be recorded for up to
        :attr:`stop_grace` seconds (a start that is not is queued again at the next
        start of the service)."""
        self.halt()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        launches = list(self.launches.values())
        if launches:
            _, pending = await asyncio.wait(launches, timeout=self.stop_grace)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self.schedule()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("scheduling failed; trying again")
            self.passes += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=2.0)
            self._wake.clear()

    # -- a pass ------------------------------------------------------------------

    async def schedule(self) -> None:
        """Start every queued job that capacity and quotas allow, best first.

        Order: priority, then fair share (users running fewer jobs first, then
        round-robin: the user who started a job least recently), then
        submission. A job that does not fit now is passed over, with the
        reason recorded, and the rest may start.

        A pass starts nothing unless this service still holds the dispatcher lease
        (renewed here when it is getting old), so two services never both start jobs.
        """
        ctx = self.ctx
        if self._stopping:
            return
        # one trip to the database threads, not two: a submit's job starts that much sooner
        plan = await ctx.in_db(self._read_queue_if_dispatching)
        if plan is None:
            return
        queued, running_jobs, running_gpus, last_start, hours = plan
        verdicts: dict[tuple[str, str, str], str | None] = {}
        reasons: dict[str, str] = {}
        for row in in_queue_order(queued, running_jobs, last_start):
            if self._stopping:
                break
            verdict_key = (row.user, row.groups or "[]", row.flavor)
            if verdict_key not in verdicts:
                groups = json.loads(row.groups) if row.groups else []
                verdicts[verdict_key] = self._why_waiting(
                    row.user, groups, row.flavor, running_gpus, hours
                )
            reason = verdicts[verdict_key]
            if reason is not None:
                reasons[row.id] = reason
                continue
            # the limit is the dispatcher's, not the pass's: the starts of an earlier
            # pass may still be in flight
            while len(self.launches) >= self.concurrent_starts:
                await asyncio.wait(list(self.launches.values()), return_when=FIRST_COMPLETED)
            token = uuid.uuid4().hex
            # The claim, and what its owner's job files take now (a walk, off the loop:
            # the runner stops the job where they would pass storage.max_job_files), side
            # by side rather than one after the other: on a loaded machine each trip to a
            # thread costs tens of ms before the runner can start.
            limit = ctx.config.storage.max_job_files
            claiming = asyncio.gather(
                ctx.in_db(self._claim, row.id, token),
                asyncio.to_thread(self.rooms.measure, limit, Path(row.job_dir)),
            )
            try:
                spec, room = await asyncio.shield(claiming)
            except asyncio.CancelledError:
                # The service stops: a claim made meanwhile goes back to the queue here,
                # while the lease is still this service's. Left "starting" with nothing
                # started, the next service could only call it lost.
                with contextlib.suppress(Exception):
                    if (await claiming)[0] is not None:
                        await ctx.in_db(self._unclaim, row.id, token)
                raise
            if spec is None:
                continue  # cancelled (or changed) since the queue was read
            spec.job_files = room
            self.launches[row.id] = asyncio.ensure_future(self._launch(spec, token))
            # Let the start run up to its first wait: the backend takes the job's
            # capacity there, and free_for() counts it for the next job of this pass.
            await asyncio.sleep(0)
            running_jobs[row.user] += 1
            last_start[row.user] = utcnow().timestamp()
            running_gpus[row.user] += spec.flavor.gpu_equivalents
            verdicts.clear()  # capacity and this user's share changed
        changed: dict[str, list[str]] = {}
        for row in queued:
            reason = reasons.get(row.id)
            if reason is not None and reason != row.waiting_reason:
                changed.setdefault(reason, []).append(row.id)
        if changed:
            await ctx.in_db(_write_reasons, ctx, changed)

    def _read_queue_if_dispatching(self) -> _Plan | None:
        """:meth:`_read_queue`, if this service holds a fresh dispatcher lease (None if not)."""
        return self._read_queue() if self._lease.fresh() else None

    def _read_queue(self) -> _Plan | None:
        """What a pass decides from: the queued jobs as plain rows, each user's share,
        and the GPU-hours used by each user whose quota has a budget."""
        ctx = self.ctx
        with ctx.sessions() as db:
            queued = db.execute(
                select(
                    JobRecord.id,
                    JobRecord.user,
                    # as the stored text: decoded once per distinct value, not per job
                    cast(JobRecord.groups, Text).label("groups"),
                    JobRecord.flavor,
                    JobRecord.priority,
                    JobRecord.seq,
                    JobRecord.waiting_reason,
                    JobRecord.job_dir,
                ).where(JobRecord.state == JobState.QUEUED.value)
            ).all()
            if not queued:
                return None
            running_jobs, running_gpus, last_start = fair_share(db, {r.user for r in queued})
            hours: dict[tuple[str, str], float] = {}
            seen: set[tuple[str, str]] = set()
            for row in queued:
                if (row.user, row.groups or "[]") in seen:
                    continue
                seen.add((row.user, row.groups or "[]"))
                groups = json.loads(row.groups) if row.groups else []
                quota = self._quotas.of(Caller(row.user, frozenset(groups or [])))
                key = (row.user, quota.period)
                if quota.gpu_hours is not None and key not in hours:
                    hours[key] = self._quotas.gpu_hours(db, row.user, quota.period)
        return list(queued), running_jobs, running_gpus, last_start, hours

    def _why_waiting(
        self,
        user: str,
        groups: list[str],
        flavor_name: str,
        running_gpus: defaultdict[str, float],
        hours: dict[tuple[str, str], float],
    ) -> str | None:
        """Why a job of ``user`` (in ``groups``) on ``flavor_name`` cannot start now, or None."""
        ctx = self.ctx
        flavor = ctx.config.flavor(flavor_name)
        if flavor is None:
            return f"flavor {flavor_name!r} no longer exists; cancel and resubmit"
        over = self._quotas.why_waiting(
            Caller(user, frozenset(groups)), flavor, running_gpus, hours
        )
        if over is not None:
            return over
        backend = ctx.backend
        if not backend.hands_over(flavor) and backend.free_for(flavor) < 1:
            waiting = f"waiting for a free {'GPU' if flavor.gpus else 'slot'} for {flavor.label}"
            maintenance = backend.maintenance(flavor)
            return f"{waiting} ({maintenance})" if maintenance else waiting
        return None

    # -- one job -----------------------------------------------------------------

    def _claim(self, job_id: str, token: str) -> LaunchSpec | None:
        """queued -> starting under ``token``, if still queued; what the backend needs."""
        ctx = self.ctx
        with ctx.sessions() as db:
            claimed = rowcount(
                db,
                update(JobRecord)
                .where(JobRecord.id == job_id, JobRecord.state == JobState.QUEUED.value)
                .values(state=JobState.STARTING.value, waiting_reason=None, claim=token),
            )
            if not claimed:
                db.rollback()
                return None
            record = db.get(JobRecord, job_id)
            assert record is not None
            flavor = ctx.config.flavor(record.flavor)
            if flavor is None:  # removed from nbjobs.yaml this very moment
                record.state = JobState.QUEUED.value
                record.claim = None
                db.commit()
                return None
            db.commit()
        self._positions.changed()
        jobdir = Path(record.job_dir)
        return LaunchSpec(
            job_id=record.id,
            user=record.user,
            flavor=flavor,
            snapshot_file=Path(record.snapshot_file),
            output_file=Path(record.output_file),
            status_file=jobdir / STATUS_FILE,
            log_file=jobdir / "log.txt",
            cwd=Path(record.source_file).parent,
            parameters=record.parameters,
            time_limit=record.time_limit,
            attempt=record.requeues or 0,
            queue=ctx.classes.queue_for(record.user, flavor.name),
            source_name="the command"
            if record.kind == "command"
            else Path(record.source_file).name,
            kernel=record.kernel,
            html_file=Path(record.output_file).with_suffix(".html") if record.html else None,
            output_in_folder=Path(record.output_file).parent != Path(record.source_file).parent,
            script=bool(record.kind),
        )

    async def _launch(self, spec: LaunchSpec, token: str) -> None:
        """Start one claimed job on the backend, outside any transaction; record it."""
        ctx, job_id = self.ctx, spec.job_id
        claimed = time.monotonic()
        try:
            try:
                launched = await ctx.backend.start(spec)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.log.exception("job %s: could not start", job_id)
                ctx.metrics.start_failed(spec.flavor.name)
                await ctx.in_db(self._record_failed_start, job_id, token, str(exc))
                return
            try:
                cancel = await ctx.in_db(self._record_start, job_id, token, launched)
            except Exception:
                # Not recorded: a job nobody follows must not run on.
                self.log.exception("job %s: its start could not be recorded; stopping it", job_id)
                await ctx.backend.cancel(launched.ref)
                ctx.backend.release(launched.ref)
                await ctx.in_db(
                    self._record_failed_start, job_id, token, "its start could not be recorded"
                )
                return
            if cancel is None:
                self.log.warning("job %s: changed while it started; left to its new owner", job_id)
                return
            ctx.metrics.job_dispatched(spec.flavor.name, time.monotonic() - claimed)
            if cancel:
                # Cancelled while the backend was starting it: stop what was made.
                self.log.info("job %s: cancelled while it started; stopping it", job_id)
                await ctx.backend.cancel(launched.ref)
            self.follower.follow(job_id, launched.ref)
        finally:
            self.launches.pop(job_id, None)
            self.wake()

    def _record_start(self, job_id: str, token: str, launched: Launched) -> bool | None:
        """The backend's handle for a claimed job; whether a cancel came meanwhile
        (None: the claim is no longer this pass's)."""
        with self.ctx.sessions() as db:
            done = rowcount(
                db,
                update(JobRecord)
                .where(
                    JobRecord.id == job_id,
                    JobRecord.claim == token,
                    JobRecord.state == JobState.STARTING.value,
                )
                .values(backend_ref=launched.ref, gpus=launched.gpus, started_at=utcnow()),
            )
            if not done:
                db.rollback()
                return None
            cancel, flavor, submitted, started = db.execute(
                select(
                    JobRecord.cancel_requested,
                    JobRecord.flavor,
                    JobRecord.submitted_at,
                    JobRecord.started_at,
                ).where(JobRecord.id == job_id)
            ).one()
            db.commit()
        self._positions.changed()
        if submitted is not None and started is not None:
            self.ctx.metrics.job_started(flavor, (started - submitted).total_seconds())
        return bool(cancel)

    def _unclaim(self, job_id: str, token: str) -> None:
        """A claim whose start was never begun (the service stopped): queued again."""
        with self.ctx.sessions() as db:
            record = db.get(JobRecord, job_id)
            if (
                record is not None
                and record.claim == token
                and record.state == JobState.STARTING.value
                and not record.backend_ref
            ):
                _queue_again(record)
                db.commit()
                self._positions.changed()

    def _record_failed_start(self, job_id: str, token: str, why: str) -> None:
        with self.ctx.sessions() as db:
            record = db.get(JobRecord, job_id)
            if record is None or record.claim != token or record.state != "starting":
                return
            record.finished_at = utcnow()
            if record.cancel_requested:
                record.state = JobState.CANCELLED.value
            else:
                record.state = JobState.FAILED.value
                record.message = f"the backend could not start the job: {why}"
            db.commit()

    # -- after a restart -----------------------------------------------------------

    async def recover(self) -> None:
        """Catch up with what a previous run of the service left: adopt the jobs that
        still run, record the ones that ended meanwhile, queue again the starts it
        did not record."""
        ctx, backend = self.ctx, self.ctx.backend
        wanted = await ctx.in_db(_ids_in, ctx, [JobState.QUEUED.value, *ACTIVE_VALUES])
        # what the backend makes carries the database's id: it stops only its own
        backend.instance = await ctx.in_db(instance_id, ctx.sessions)
        # The backend catches up with what runs (and stops what no job wants) first.
        await backend.reconcile(set(wanted))
        active = await ctx.in_db(_active_jobs, ctx)
        lost: list[str] = []
        retired: dict[str, str] = {}
        again: list[str] = []
        found: dict[str, tuple[str, list[str]]] = {}
        for job_id, ref, gpus, flavor_name, job_dir in active:
            flavor = ctx.config.flavor(flavor_name)
            status_file = Path(job_dir) / STATUS_FILE
            if not ref and not backend.idempotent_starts:
                # started, but killed before it was recorded? its runner says so
                unrecorded = backend.unrecorded_start(job_id, status_file)
                if unrecorded is not None:
                    ref, gpus = unrecorded
                    found[job_id] = unrecorded
                    self.log.info("job %s: its start was not recorded; found it running", job_id)
            if ref and flavor is not None and backend.adopt(ref, gpus, flavor):
                self.log.info("job %s: adopted after restart", job_id)
                self.follower.follow(job_id, ref)
            elif not ref and (backend.idempotent_starts or not status_file.exists()):
                again.append(job_id)  # never started: nothing can run twice
            else:
                # Gone while we were away: the status file says how it ended, if it did.
                found.pop(job_id, None)
                lost.append(job_id)
                if ref and flavor is None:  # nothing here knows what it may hold now
                    retired[job_id] = flavor_name
        # What the lost jobs left (processes given the cancel's grace, folders) is cleared
        # off the loop and side by side: one after the other on the loop, each job whose
        # leftovers ignored SIGTERM held the service's start for a whole grace.
        await asyncio.gather(*(asyncio.to_thread(backend.lost, job_id) for job_id in lost))
        await ctx.in_db(self._record_recovery, lost, again, found, retired)

    def _record_recovery(
        self,
        lost: list[str],
        again: list[str],
        found: dict[str, tuple[str, list[str]]],
        retired: dict[str, str],
    ) -> None:
        with self.ctx.sessions() as db:
            for job_id, (ref, gpus) in found.items():
                record = db.get(JobRecord, job_id)
                if record is not None and not record.backend_ref:
                    record.backend_ref, record.gpus = ref, gpus
                    record.started_at = record.started_at or utcnow()
            for job_id in lost:
                record = db.get(JobRecord, job_id)
                if record is not None and job_id in retired:
                    note = (
                        f"its flavor {retired[job_id]!r} was taken out of nbjobs.yaml while "
                        "the job service was stopped, so the job was stopped when it "
                        "started again; re-run it on another flavor"
                    )
                    self.follower.finish(record, None, note, backend_state=JobState.FAILED.value)
                elif record is not None:
                    self.follower.finish(record, None, None, lost=True)
            for job_id in again:
                record = db.get(JobRecord, job_id)
                if record is None:
                    continue
                self.log.info("job %s: its start was not recorded; queued again", job_id)
                _queue_again(record)
            db.commit()


def _queue_again(record: JobRecord) -> None:
    """A claimed job nothing was started for: queued again (or cancelled, if asked)."""
    if record.cancel_requested:
        record.state = JobState.CANCELLED.value
        record.finished_at = utcnow()
    else:
        record.state = JobState.QUEUED.value
    record.claim = None


def _ids_in(ctx: Context, states: list[str]) -> list[str]:
    with ctx.sessions() as db:
        return list(db.scalars(select(JobRecord.id).where(JobRecord.state.in_(states))).all())


def _active_jobs(ctx: Context) -> list[tuple[str, str | None, list[str], str, str]]:
    with ctx.sessions() as db:
        rows = db.execute(
            select(
                JobRecord.id,
                JobRecord.backend_ref,
                JobRecord.gpus,
                JobRecord.flavor,
                JobRecord.job_dir,
            ).where(JobRecord.state.in_(ACTIVE_VALUES))
        ).all()
        return [(r[0], r[1], list(r[2] or []), r[3], r[4]) for r in rows]


def _write_reasons(ctx: Context, changed: dict[str, list[str]]) -> None:
    """Record why queued jobs wait (only reasons that changed; still queued only)."""
    with ctx.sessions() as db:
        for reason, ids in changed.items():
            for i in range(0, len(ids), _CHUNK):
                db.execute(
                    update(JobRecord)
                    .where(
                        JobRecord.id.in_(ids[i : i + _CHUNK]),
                        JobRecord.state == JobState.QUEUED.value,
                    )
                    .values(waiting_reason=reason)
                    .execution_options(synchronize_session=False)
                )
        db.commit()
