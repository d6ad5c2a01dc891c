"""The job service assembled: its configuration, database, backend and every part,
built once and started and stopped together (the composition root).

No rule lives here: each is in the module named for it (:mod:`.offers` which flavors a
caller may use, :mod:`.submit`, :mod:`.listing`, :mod:`.changes` cancel and re-run,
:mod:`.reports` usage, :mod:`.quotas`, :mod:`.dispatch`...). The API calls the
operations this object exposes (:class:`~.facade.ServiceFacade`), each a rule
module's own method. :func:`build` makes one from a configuration, for the service's
program and the single-user server extension alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from nbjobs.config import NbjobsConfig
from nbjobs.storage import user_folder

from . import drains
from .approvals import ApprovalExpiry, Decisions
from .audit import Audit
from .backends import Backend
from .budgets import Budgets
from .changes import JobChanges
from .classes import ClassRegistry, HubGroups
from .context import Context
from .counters import ServiceMetrics
from .credits import Credits
from .db import JobRecord, ReadsFirst, connect, engine_of
from .deleted_users import BY as DEPARTURES_BY
from .deleted_users import Departures
from .dispatch import Dispatcher
from .errors import Caller
from .events import ChangeFeed
from .invitations import Invitations
from .jobview import JobView
from .lease import DispatcherLease
from .listing import Listing
from .live import RunnerStatuses
from .notebooks import NotebookChecks
from .notifications.outbox import Outbox
from .notifications.settings import NotifySettingsStore
from .offers import Offers
from .periodic import Loop
from .queue import QueuePositions
from .quotas import Quotas
from .reclaim import IdleReclaimer
from .reports import UsageReports
from .retention import Retention
from .schedules.definitions import Definitions
from .schedules.ticker import Ticker
from .submit import Submissions
from .telemetry import TelemetryCollector
from .usage import UsageRoller

T = TypeVar("T")
#: seconds a stopping service waits for its database calls still running to end
STOP_WAIT = 5.0


class JobService:
    """Every part of the job service over one backend and database, made and wired once."""

    # Over 80 lines: the composition root, a statement per part in the order they need
    # each other; split up, the order would be in several places.
    def __init__(
        self,
        config: NbjobsConfig,
        backend: Backend,
        sessions: sessionmaker[Session],
        log: logging.Logger | None = None,
        folder_for: Callable[[str], Path] | None = None,
        classes: ClassRegistry | None = None,
        lease: DispatcherLease | None = None,
        concurrent_starts: int = 8,
        database_threads: int = 1,
        read_threads: int = 2,
    ) -> None:
        self.config = config
        #: where submitted notebooks are checked, within limits.cells / check_memory
        self.notebooks = NotebookChecks(config.limits)
        #: classes from nbjobs.yaml and, in a hub, teachers' groups
        self.classes = classes or ClassRegistry(config, log=log)
        #: a user's folder; by default from nbjobs.yaml's storage (single-user: the server's root)
        self.folder_for = folder_for or functools.partial(user_folder, config.storage)
        self.backend = backend
        self.sessions = sessions
        self.log = log or logging.getLogger("nbjobs.job_service")
        #: each queued job's place, worked out again after each change of the queue
        self.positions = QueuePositions(sessions)
        #: a record as the API shows it, with the runner's and the backend's latest word
        #: each started job's status file, read once however many ask (see live.py)
        self.runners = RunnerStatuses(self.log)
        self.view = JobView(backend, self.positions, self.runners.latest)
        #: database work runs here, never on the event loop (which keeps answering)
        self._db_threads = ThreadPoolExecutor(
            max_workers=max(1, database_threads), thread_name_prefix="nbjobs-db"
        )
        #: what a caller asks to see runs on threads of its own: a list or a job's details
        #: never waits behind a burst of submits and the dispatcher's rounds
        self._read_threads = ThreadPoolExecutor(
            max_workers=max(1, read_threads), thread_name_prefix="nbjobs-db-read"
        )
        #: and go first: the database threads' next piece of work waits for them a moment
        self._reads_first = ReadsFirst()
        self.stopping = False
        #: what Prometheus scrapes beside the database (see metrics.py)
        self.metrics = ServiceMetrics()
        #: what the collaborators share (they get this, not the service)
        self.ctx = Context(
            config,
            sessions,
            self.in_db,
            self.log,
            backend,
            self.classes,
            self.metrics,
            self.runners,
        )
        #: teachers' extra GPU-hours for their students, and every quota rule with them
        self.budgets = Budgets(self.ctx)
        self.quotas = Quotas(self.ctx, self.budgets)
        #: one dispatcher per database: taken at start, given back at stop
        self.lease = lease or DispatcherLease(sessions, log=self.log)
        self.dispatcher = Dispatcher(
            self.ctx,
            lease=self.lease,
            positions=self.positions,
            quotas=self.quotas,
            concurrent_starts=concurrent_starts,
        )
        self.follower = self.dispatcher.follower
        #: jobs as a caller may read them: one, a page of the list, a log
        self.listing = Listing(self.ctx, self.view, self.positions)
        #: the started jobs' GPU telemetry, kept as series (see telemetry.py)
        self.telemetry = TelemetryCollector(self.ctx, self.listing.visible)
        self.audit = Audit(self.ctx, self.listing.visible, self.folder_for)
        #: warns about (and stops) jobs that leave their GPUs idle (see reclaim.py)
        self.reclaimer = IdleReclaimer(self.ctx, self.telemetry)
        self.approvals = ApprovalExpiry(self.ctx)
        #: the inputs of long-ended jobs removed, users' job files measured and capped
        self.retention = Retention(self.ctx, self.folder_for)
        #: ended jobs' GPU time summed per day, for usage reports over months
        self.usage_sums = UsageRoller(self.ctx)
        #: accounts that pay for jobs on priced flavors: holds, charges, grants
        self.credits = Credits(self.ctx)
        #: the flavors a caller may use, and what each offers now
        self.offers = Offers(self.ctx)
        #: a submit's checks, snapshot and record
        self.submissions = Submissions(
            self.ctx,
            view=self.view,
            notebooks=self.notebooks,
            folder_for=self.folder_for,
            retention=self.retention,
            quotas=self.quotas,
            credits=self.credits,
            wake=self.dispatcher.wake,
        )
        #: cancel, re-run, forget, a new priority
        self.changes = JobChanges(
            self.ctx,
            listing=self.listing,
            submissions=self.submissions,
            view=self.view,
            positions=self.positions,
            dispatcher=self.dispatcher,
            credits=self.credits,
        )
        #: the usage a caller may see
        self.reports = UsageReports(self.ctx, quotas=self.quotas)
        #: approving and rejecting requests
        self.decisions = Decisions(
            self.ctx, self.view, self.positions.changed, self.dispatcher.wake, self.listing.get
        )
        self.definitions = Definitions(self.ctx, self.submissions.check_request)
        self.ticker = Ticker(self.ctx, self.definitions, self.submissions.submit)
        self.notify_settings = NotifySettingsStore(self.ctx)
        #: invitations the hub makes for the names rosters and admins add (invitations.py)
        self.invitations = Invitations(self.ctx, self.classes.hub)
        self.classes.invite_new = self.invitations.for_new_users
        self.outbox = Outbox(self.ctx)
        #: what changed, pushed to the open ``api/events`` streams (see events.py); it
        #: watches while one is open, whether or not this service dispatches
        self.feed = ChangeFeed(self.ctx, self.positions)
        #: a user deleted in the hub, or made again under the same name, retired: the next
        #: person of the name finds nothing of the earlier one's
        departed = Caller(DEPARTURES_BY, admin=True)
        self.departures = Departures(
            self.ctx,
            folder_for=self.folder_for,
            cancel=functools.partial(self.changes.cancel, departed),
            charge=self.credits.charge,
            after=self.budgets.load,
        )
        # The operations the API calls (facade.py), each its rule module's own.
        self.flavors = self.offers.flavors
        self.submit = self.submissions.submit
        self.get = self.listing.get
        self.list_jobs = self.listing.list_jobs
        self.open_log = self.listing.open_log
        self.is_final = self.listing.is_final
        self.cancel = self.changes.cancel
        self.rerun = self.changes.rerun
        self.forget = self.changes.forget
        self.update = self.changes.update
        self.usage = self.reports.report
        #: what works in the background while this service holds the lease, in the order
        #: it starts (and halts); it stops in the reverse order
        self.loops: list[Loop] = [
            self.dispatcher,
            self.telemetry,
            self.reclaimer,
            self.approvals,
            self.outbox,
            self.retention,
            self.usage_sums,
            self.credits,
            self.departures,
            self.ticker,
        ]
        #: called when another service took the lease over (the app stops then)
        self.on_lease_lost: Callable[[], None] | None = None

    # -- life ------------------------------------------------------------------

    async def start(self, *, standby: bool = True) -> None:
        """Take the database's dispatcher lease, recover jobs a previous run left, then
        start scheduling.

        While another service holds the lease this waits as a standby (``standby``)
        or raises :class:`~.lease.LeaseHeld` saying who holds it.
        """
        await self.lease.take(wait=standby)
        self.lease.keep(self._lease_lost)
        self.submissions.numbers.last = await self.in_db(self._last_seq)
        await drains.apply(self.ctx)  # before the first job is placed
        await self.in_db(self.budgets.load)
        await self.dispatcher.recover()
        for loop in self.loops:
            loop.run()

    def _last_seq(self) -> int:
        with self.sessions() as db:
            return db.scalar(select(func.max(JobRecord.seq))) or 0

    async def stop(self) -> None:
        """Stop scheduling; running jobs go on (a restart adopts them).

        Takes seconds whatever the backend is doing: starts in flight get a few
        seconds to be recorded (one that is not is queued again at the next start),
        the followers are dropped, and no database call is waited on for longer.
        """
        self.stopping = True
        self.dispatcher.halt()  # starts nothing more from now on (its loop stops below)
        await self.feed.close()
        for loop in reversed(self.loops):  # what starts runs stops first (the ticker)
            await loop.stop()
        self.outbox.close()
        await self.follower.stop()
        await self.backend.shutdown()
        await self.lease.aclose()
        self._db_threads.shutdown(wait=False, cancel_futures=True)
        self._read_threads.shutdown(wait=False, cancel_futures=True)
        # Its connections go with it (a PostgreSQL server counts them against its
        # max_connections; a service started again opens its own): once the calls still
        # running have handed theirs back, a few seconds at most.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.to_thread(self._threads_done), STOP_WAIT)
        engine_of(self.sessions).dispose()

    def _threads_done(self) -> None:
        self._db_threads.shutdown(wait=True)
        self._read_threads.shutdown(wait=True)

    def _lease_lost(self) -> None:
        """Another service dispatches from this database now: stop scheduling at once."""
        self.stopping = True
        for loop in self.loops:
            loop.halt()
        if self.on_lease_lost is not None:
            self.on_lease_lost()

    async def in_db(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``func`` (database work) on the service's database threads and return
        what it returns: the event loop meanwhile answers other requests."""
        loop = asyncio.get_running_loop()
        work = functools.partial(self._reads_first.after_reads, func, *args, **kwargs)
        return await loop.run_in_executor(self._db_threads, work)

    async def read_db(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """As :meth:`in_db`, on the threads kept for what callers ask to see (the API's
        GETs): 200 submits queued on the database threads made a list wait 200 ms
        behind them (bench/dispatch_bench.py)."""
        loop = asyncio.get_running_loop()
        work = functools.partial(self._reads_first.read, func, *args, **kwargs)
        return await loop.run_in_executor(self._read_threads, work)

    async def schedule(self) -> None:
        """One pass of the dispatcher over the queue (see :class:`~.dispatch.Dispatcher`)."""
        await self.dispatcher.schedule()


def build(
    config: NbjobsConfig,
    backend: Backend,
    *,
    log: logging.Logger,
    hub: HubGroups | None = None,
    folder_for: Callable[[str], Path] | None = None,
    lease_seconds: float | None = None,
    concurrent_starts: int = 8,
    database_threads: int = 1,
    read_threads: int = 2,
) -> JobService:
    """The job service for ``config`` on ``backend``: its database opened, its classes
    (with teachers' hub groups when ``hub`` is given), its dispatcher lease. The service's
    program (``app.py``) and the single-user server extension both build it here."""
    sessions = connect(config.database.url)
    lease = None
    if lease_seconds is not None:
        lease = DispatcherLease(sessions, seconds=lease_seconds, log=log)
    return JobService(
        config,
        backend,
        sessions,
        log=log,
        folder_for=folder_for,
        classes=ClassRegistry(config, hub, log=log),
        lease=lease,
        concurrent_starts=concurrent_starts,
        database_threads=database_threads,
        read_threads=read_threads,
    )
