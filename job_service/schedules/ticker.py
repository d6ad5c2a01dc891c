"""Starting the runs of job definitions: one job per tick, exactly.

Every ``schedules.check_every`` seconds the service holding the dispatcher lease asks
for the definitions whose next tick has come (one indexed query), and for each:

1. works out the latest tick that has passed, and how many before it were missed (the
   service was away, or busy): a tick more than a grace period late is a catch-up,
   run once or skipped as the definition says;
2. records the run and moves the definition to its next tick in one transaction,
   guarded twice: the run's (definition, tick) is unique in the database, and the
   move is a conditional UPDATE on the tick it read. A second process doing the same
   tick fails one or the other and starts nothing;
3. after that commit, with no transaction open, submits the job as its owner (their
   flavor access and quotas as they are now), the job recording the run in the same
   transaction that queues it; then records the job, or the refusal and its reason.

A run left ``starting`` by a crash between 2 and 3 is finished on the next round: its
job is found by the run it records, or submitted then (never both).

The clock is injectable, so tests step through days without sleeping.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from nbjobs.models import Job, SubmitRequest

from ..db import JobRecord, rowcount
from ..errors import Caller, Conflict, ServiceError
from ..periodic import InRounds, Periodic
from .definitions import next_run, schedule_of
from .models import DefinitionRun
from .store import DefinitionRecord, DefinitionRunRecord, DefinitionVersionRecord

if TYPE_CHECKING:
    from ..context import Context
    from .definitions import Definitions

#: at most this many due definitions are started per round (the rest in the next)
BATCH = 500
#: a run still ``starting`` after this long was interrupted (a crash): finish it
STALE_START = timedelta(seconds=60)
#: the most missed ticks counted one by one (a minute schedule down for a year stops here)
COUNT_MISSED_UP_TO = 10_000


@dataclass
class Due:
    """A run recorded and waiting for its job."""

    run_id: str
    definition_id: str
    owner: Caller
    request: SubmitRequest


class Ticker(InRounds):
    """Starts due definition runs while this service holds the dispatcher lease."""

    def __init__(
        self,
        ctx: Context,
        definitions: Definitions,
        submit: Callable[..., Awaitable[Job]],
    ) -> None:
        self.ctx = ctx
        self.definitions = definitions
        #: the service's submit: a run is submitted as its owner would
        self._submit = submit
        #: how the authenticator sees a user now (None: no authenticator to ask; the
        #: service sets it once its authenticator is known)
        self.owner_now: Callable[[str], Awaitable[Caller | None]] | None = None
        self._rounds = Periodic(
            self.round,
            lambda: float(ctx.config.schedules.check_every or 15),
            what="starting scheduled job definitions",
            log=lambda: ctx.log,
        )

    @property
    def clock(self) -> Callable[[], datetime]:
        """The schedules' clock (the definitions' own: one clock for both)."""
        return self.definitions.clock

    @clock.setter
    def clock(self, clock: Callable[[], datetime]) -> None:
        self.definitions.clock = clock

    @property
    def grace(self) -> timedelta:
        """How late a tick may start and still be its own time (not a catch-up)."""
        return timedelta(seconds=2 * float(self.ctx.config.schedules.check_every or 15) + 30)

    async def round(self) -> int:
        """One round: record the due runs, then submit their jobs; how many were started."""
        ctx = self.ctx
        due = await ctx.in_db(self.record_due)
        due += await ctx.in_db(self.unfinished)
        for item in due:
            await self.submit(item)
        return len(due)

    # -- step 1 and 2: record the runs, on a database thread -----------------------------

    def record_due(self) -> list[Due]:
        now = self.clock()
        with self.ctx.sessions() as db:
            plans = db.execute(
                select(DefinitionRecord.id, DefinitionRecord.next_run_at)
                .where(
                    DefinitionRecord.next_run_at.is_not(None),
                    DefinitionRecord.next_run_at <= now,
                    DefinitionRecord.paused == 0,
                    DefinitionRecord.deleted_at.is_(None),
                )
                .order_by(DefinitionRecord.next_run_at)
                .limit(BATCH)
            ).all()
        due = []
        for definition_id, tick in plans:
            item = self._record_one(definition_id, tick, now)
            if item is not None:
                due.append(item)
        return due

    def _record_one(
        self, definition_id: str, read_tick: datetime | None, now: datetime
    ) -> Due | None:
        ctx = self.ctx
        with ctx.sessions() as db:
            record = db.get(DefinitionRecord, definition_id)
            if record is None or read_tick is None or record.next_run_at != read_tick:
                return None  # moved on meanwhile (another process, an edit)
            schedule = schedule_of(record)
            if schedule is None:
                return None
            latest, missed = read_tick, 0
            while missed < COUNT_MISSED_UP_TO:
                following = schedule.next_after(latest)
                if following > now or (record.end_at is not None and following > record.end_at):
                    break
                latest, missed = following, missed + 1
            late = now - latest > self.grace
            kind = "catch_up" if late else "tick"
            skip = late and record.catch_up == "skip"
            reason = None
            if skip:
                reason = (
                    f"missed {missed + 1} tick(s) while the service was away; this definition "
                    "skips missed ticks (catch_up: skip)"
                )
            elif missed:
                reason = f"{missed} earlier tick(s) missed while the service was away; ran once"
            run = DefinitionRunRecord(
                id=uuid.uuid4().hex[:12],
                definition_id=record.id,
                version=record.version,
                scheduled_for=latest,
                kind=kind,
                state="skipped" if skip else "starting",
                reason=reason,
                missed=missed,
                created_at=now,
            )
            moved = rowcount(
                db,
                update(DefinitionRecord)
                .where(DefinitionRecord.id == record.id, DefinitionRecord.next_run_at == read_tick)
                .values(next_run_at=next_run(record, now)),
            )
            if not moved:
                db.rollback()
                return None
            db.add(run)
            try:
                db.commit()
            except IntegrityError:  # the same tick recorded by another process
                db.rollback()
                return None
            ctx.log.info(
                "definition %s of %s: %s for %s%s",
                record.id,
                record.user,
                "skipped" if skip else "run",
                latest.isoformat(),
                f" ({reason})" if reason else "",
            )
            if skip:
                return None
            return self._due(db, run, record)

    def _due(self, db: Session, run: DefinitionRunRecord, record: DefinitionRecord) -> Due:
        """What to submit for ``run``: the settings of the version it recorded."""
        settings = dict(record.settings)
        if run.version != record.version:
            old = db.get(DefinitionVersionRecord, (record.id, run.version))
            if old is not None:
                settings = dict(old.settings)
        request = SubmitRequest(
            **{k: v for k, v in settings.items() if k in SubmitRequest.model_fields}
        )
        return Due(run.id, record.id, Caller(record.user, frozenset(record.groups)), request)

    def unfinished(self) -> list[Due]:
        """Runs left ``starting`` by an interrupted round: their job if it was queued,
        else submitted now."""
        before = self.clock() - STALE_START
        with self.ctx.sessions() as db:
            stale = db.scalars(
                select(DefinitionRunRecord).where(
                    DefinitionRunRecord.state == "starting",
                    DefinitionRunRecord.created_at <= before,
                )
            ).all()
            due = []
            for run in stale:
                job_id = db.scalar(select(JobRecord.id).where(JobRecord.definition_run == run.id))
                if job_id is not None:
                    run.state, run.job_id = "submitted", job_id
                    continue
                record = db.get(DefinitionRecord, run.definition_id)
                if record is None:
                    continue
                due.append(self._due(db, run, record))
            db.commit()
            return due

    # -- step 3: the job, outside any transaction --------------------------------------

    async def submit(self, item: Due) -> None:
        ctx = self.ctx
        state, job_id, reason = "submitted", None, None
        try:
            gone = await self._owner_as_now(item)
            if gone is not None:
                state, reason = "refused", gone
                await ctx.in_db(self._pause_for, item.definition_id, gone)
            else:
                job = await self._submit(
                    item.owner, item.request, definition=(item.definition_id, item.run_id)
                )
                job_id = job.id
        except ServiceError as exc:
            state, reason = "refused", exc.message
        except IntegrityError:
            # queued already, by an interrupted round: recorded by unfinished() next time
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # recorded, and the next round goes on
            ctx.log.exception("definition %s: its run could not start", item.definition_id)
            state, reason = "refused", f"the service could not start it: {exc}"
        await ctx.in_db(self._record_outcome, item.run_id, state, job_id, reason)
        if state == "refused":
            ctx.log.info(
                "definition %s of %s: run refused: %s", item.definition_id, item.owner.name, reason
            )

    async def _owner_as_now(self, item: Due) -> str | None:
        """Make ``item`` act for its owner as they are now (their groups, hence flavors,
        quotas and class, as the authenticator sees them at this tick), not as when the
        definition was saved; why it cannot run when the owner is gone (None: it can)."""
        user_now = self.owner_now
        if user_now is None or item.owner.admin:
            return None  # an admin's "run now" acts with the admin's own rights
        await self.ctx.classes.refresh()  # which of their groups are classes, now
        try:
            owner = await user_now(item.owner.name)
        except NotImplementedError:
            return None
        if owner is None:
            return (
                f"{item.owner.name} is no longer a user here, so their definition is paused; "
                "an admin may delete it"
            )
        item.owner = owner
        return None

    def _pause_for(self, definition_id: str, why: str) -> None:
        with self.ctx.sessions() as db:
            record = db.get(DefinitionRecord, definition_id)
            if record is not None and not record.paused:
                record.paused, record.next_run_at = 1, None
                db.commit()
                self.ctx.log.warning("definition %s paused: %s", definition_id, why)

    def _record_outcome(
        self, run_id: str, state: str, job_id: str | None, reason: str | None
    ) -> None:
        with self.ctx.sessions() as db:
            rowcount(
                db,
                update(DefinitionRunRecord)
                .where(DefinitionRunRecord.id == run_id, DefinitionRunRecord.state == "starting")
                # a catch-up's reason ("4 earlier ticks missed...") stays when it starts
                .values(state=state, job_id=job_id, **({"reason": reason} if reason else {})),
            )
            db.commit()

    # -- "run now" ----------------------------------------------------------------------

    async def run_now(self, caller: Caller, definition_id: str) -> DefinitionRun:
        """Run a definition now (its owner, or an admin: the job is the owner's)."""
        item = await self.ctx.in_db(self._record_manual, caller, definition_id)
        await self.submit(item)
        return await self.ctx.in_db(self.definitions.run, caller, item.run_id)

    def _record_manual(self, caller: Caller, definition_id: str) -> Due:
        definitions = self.definitions
        with self.ctx.sessions() as db:
            record = definitions.visible(caller, db, definition_id, act=True)
            now = self.clock()
            version = record.version
            for attempt in range(10):
                # a "run now" is for its moment; two in one millisecond take the next one
                at = now + timedelta(milliseconds=attempt)
                run = DefinitionRunRecord(
                    id=uuid.uuid4().hex[:12],
                    definition_id=definition_id,
                    version=version,
                    scheduled_for=at,
                    kind="manual",
                    state="starting",
                    created_at=now,
                    requested_by=caller.name,
                )
                db.add(run)
                try:
                    db.commit()
                    break
                except IntegrityError:
                    db.rollback()
            else:
                raise Conflict("too many runs asked for at once; try again in a moment")
            record = definitions.visible(caller, db, definition_id, act=True)
            item = self._due(db, run, record)
            if caller.name == record.user:
                item.owner = caller  # their groups as this very call says
            return item
