"""Changes pushed to whoever watches: ``GET api/events``, a stream of server-sent events.

The Jobs panel, the dashboard and any client that keeps a list open learn here that a
job appeared, moved in the queue, ran a cell, ended or went, and that a user's
definitions (schedules) changed, wherever the change came from: this service, the
command line, a schedule, or another job service on the same database. So they ask the
API again when something changed, rather than polling on a timer.

One :class:`ChangeFeed` per service watches the database for everyone: while at least
one stream is open it takes a small snapshot, right after each commit of this service's
(two looks at least :data:`COALESCE` s apart) and at least every ``interval`` (1 s, for
what other services and the command line write), of the jobs not yet ended and those
ended since the last look (only of users someone watches: the
stream's callers, their students for teachers, everyone for an admin), with each started
job's progress from its runner (:class:`~.live.RunnerStatuses`), and compares it with
the one before. Each difference becomes an event, sent to the streams whose caller may
see that user's jobs (the API's rule: the owner, admins, the owner's teachers). With no
stream open it does nothing.

Events are hints, small and self-contained (a job's id, owner, state, progress, place in
the queue): a client asks the API for what it shows. A stream's first event is
``hello`` (ask for everything now); a stream that fell behind (its queue of
:data:`QUEUE_LIMIT` events full) gets ``resync`` instead of what it missed. A stream ends
after :data:`STREAM_SECONDS` and the client opens a new one, authenticated again, so a
revoked token stops being served within that time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from nbjobs.job_runner.status import FINAL_STATES
from sqlalchemy import case, func, or_, select
from sqlalchemy import event as sa_event

from nbjobs.models import (
    ACTIVE_STATES,
    DefinitionsEvent,
    JobEvent,
    JobRemovedEvent,
    JobState,
    Progress,
)

from .db import JobRecord, utcnow
from .errors import Caller
from .joblist import may_see
from .jobview import with_runner
from .schedules.store import DefinitionRecord, DefinitionRunRecord

if TYPE_CHECKING:
    from .context import Context
    from .queue import QueuePositions

#: the events a stream sends, by name: the stream's greeting, "start again", a job
#: changed, a job gone, a user's definitions changed (the Lab extension and the
#: dashboard take them from labextension/src/contract.ts, generated from this)
EventName = Literal["hello", "resync", "job", "job_removed", "definitions"]
EVENTS: tuple[EventName, ...] = get_args(EventName)
#: seconds between two looks at the database while a stream is open
INTERVAL = 1.0
#: the least time between two looks at the database after commits of this service's: the
#: first commit after a quiet spell is looked at at once, those that follow it within
#: this time together (a burst of submissions is looked at once)
COALESCE = 0.05
#: events a stream may fall behind by before it is told to start again (``resync``)
QUEUE_LIMIT = 256
#: a stream ends after this many seconds; the client opens another (authenticated again)
STREAM_SECONDS = 300.0
#: seconds between two comments that keep an idle stream's connection (and proxies) open
KEEPALIVE_SECONDS = 15.0
#: how far back a look finds ended jobs (covers clocks a little apart between services)
ENDED_WINDOW = timedelta(seconds=30)

FINAL_VALUES = tuple(sorted(FINAL_STATES))
STATE_VALUES = frozenset(state.value for state in JobState)


@dataclass(frozen=True)
class Change:
    """One event: what changed (``job``, ``job_removed``, ``definitions``) and whose."""

    kind: EventName
    user: str
    data: dict[str, Any]


@dataclass(eq=False)
class Stream:
    """One open ``GET api/events``: its caller and the events waiting to be sent."""

    caller: Caller
    queue: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))
    #: set when the stream ends (the service stops, the client went): an empty frame
    #: wakes its writer
    closed: bool = False

    def offer(self, frame: str) -> None:
        """Queue an event; a stream that fell behind gets ``resync`` instead of it all."""
        if self.closed:
            return
        try:
            self.queue.put_nowait(frame)
        except asyncio.QueueFull:
            self._drop_all()
            self.queue.put_nowait(frame_of("resync", {}))

    def end(self) -> None:
        """End the stream: its writer wakes to an empty frame and stops."""
        if not self.closed:
            self._drop_all()
            self.queue.put_nowait("")
            self.closed = True

    def _drop_all(self) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()


def frame_of(event: EventName, data: dict[str, Any], event_id: int | None = None) -> str:
    """One server-sent event as the wire carries it."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


#: what a look keeps of a job to compare: owner, state, cells done and in all, the cell
#: running, its place in the queue, why it waits
JobPrint = tuple[str, str, int, int, "int | None", "int | None", "str | None"]


class ChangeFeed:
    """Watches the database for the open streams (see the module)."""

    def __init__(
        self, ctx: Context, positions: QueuePositions, *, interval: float = INTERVAL
    ) -> None:
        self.ctx = ctx
        self.positions = positions
        self.interval = interval
        self.streams: set[Stream] = set()
        self._task: asyncio.Task[None] | None = None
        self._jobs: dict[str, JobPrint] = {}
        self._definitions: dict[str, tuple[Any, ...]] = {}
        self._watched: frozenset[str] | None = frozenset()
        self._next_id = 0
        self._closed = False
        #: set by a commit of this service's: look now rather than at the next interval
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        sa_event.listen(ctx.sessions, "after_commit", self._committed)
        #: looks taken (for tests and benchmarks), and when the last one read the database
        self.looks = 0
        self._looked = 0.0

    @property
    def log(self) -> logging.Logger:
        return self.ctx.log

    @property
    def watching(self) -> bool:
        """Whether the feed is watching the database (a stream is open); it does not
        otherwise: no stream, no query."""
        return self._task is not None and not self._task.done()

    def open(self, caller: Caller) -> Stream:
        """A new stream for ``caller``; the feed watches while any is open."""
        stream = Stream(caller)
        stream.offer(frame_of("hello", {"user": caller.name}))
        if self._closed:
            stream.end()
            return stream
        self.streams.add(stream)
        if self._task is None or self._task.done():
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._task = asyncio.ensure_future(self._watch())
        return stream

    def close_stream(self, stream: Stream) -> None:
        stream.end()
        self.streams.discard(stream)

    async def close(self) -> None:
        """End every stream and stop watching (the service stops)."""
        self._closed = True
        for stream in list(self.streams):
            stream.end()
        self.streams.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _committed(self, _session: object) -> None:
        """A commit (any thread): wake the watcher, if it watches."""
        loop, wake = self._loop, self._wake
        if self.streams and loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def _watch(self) -> None:
        # The first look is the baseline (each new stream starts with hello and asks
        # for everything); a user watched anew has their jobs sent once, as news.
        first = True
        while self.streams and not self._closed:
            self._watched = self._watched_users()
            try:
                await self.look(publish=not first)
                first = False
            except Exception:
                self.log.exception("events: a look at the database failed; trying again")
            await self._until_next_look()
        self._jobs.clear()
        self._definitions.clear()

    async def _until_next_look(self) -> None:
        """Wait for a commit of this service's or the interval, whichever comes first.

        Two looks are at least :data:`COALESCE` apart: a commit after a quiet spell is
        looked at at once (a job's end reaches its watchers in a few ms, not 50), those
        that follow it within that time are looked at together (a burst of submissions
        is one look, not one each)."""
        wake = self._wake
        assert wake is not None
        try:
            await asyncio.wait_for(wake.wait(), self.interval)
            rest = self._looked + COALESCE - time.monotonic()
            if rest > 0:
                await asyncio.sleep(rest)
        except asyncio.TimeoutError:
            pass
        wake.clear()

    def _watched_users(self) -> frozenset[str] | None:
        """The users whose jobs some stream may see; None: everyone's (an admin watches)."""
        users: set[str] = set()
        for stream in list(self.streams):
            if stream.caller.admin:
                return None
            users.add(stream.caller.name)
            for cls in self.ctx.classes.taught_by(stream.caller.name):
                users.update(cls.students)
        return frozenset(users)

    async def look(self, *, publish: bool = True) -> list[Change]:
        """Compare the database with the last look; send each difference to its streams."""
        self.looks += 1
        try:
            jobs, definitions = await self.ctx.in_db(self._snapshot, self._watched)
        finally:
            # a look that failed counts too: the next is no sooner for it
            self._looked = time.monotonic()
        changes = list(self._differences(jobs, definitions))
        self._jobs, self._definitions = jobs, definitions
        if publish:
            self._publish(changes)
        return changes

    def _snapshot(
        self, watched: frozenset[str] | None
    ) -> tuple[dict[str, JobPrint], dict[str, tuple[Any, ...]]]:
        """The jobs not ended and those ended lately, and each user's definitions, of
        the watched users (a database thread; the runners' files after the session)."""
        since: datetime = utcnow() - ENDED_WINDOW
        jobs: dict[str, JobPrint] = {}
        with self.ctx.sessions() as db:
            query = select(
                JobRecord.id,
                JobRecord.user,
                JobRecord.state,
                JobRecord.cells_done,
                JobRecord.cells_total,
                JobRecord.current_cell,
                JobRecord.waiting_reason,
                JobRecord.job_dir,
            ).where(or_(JobRecord.state.not_in(FINAL_VALUES), JobRecord.finished_at >= since))
            definitions_query = select(
                DefinitionRecord.user,
                func.count(DefinitionRecord.id),
                func.max(DefinitionRecord.updated_at),
                func.max(DefinitionRecord.next_run_at),
                func.max(DefinitionRecord.deleted_at),
            ).group_by(DefinitionRecord.user)
            runs_query = (
                select(
                    DefinitionRecord.user,
                    func.count(DefinitionRunRecord.id),
                    func.sum(case((DefinitionRunRecord.state == "starting", 1), else_=0)),
                )
                .join(DefinitionRecord, DefinitionRecord.id == DefinitionRunRecord.definition_id)
                .group_by(DefinitionRecord.user)
            )
            if watched is not None:
                query = query.where(JobRecord.user.in_(watched))
                definitions_query = definitions_query.where(DefinitionRecord.user.in_(watched))
                runs_query = runs_query.where(DefinitionRecord.user.in_(watched))
            rows = db.execute(query).all()
            queued = any(row.state == JobState.QUEUED.value for row in rows)
            places = self.positions.get(db) if queued else {}
            definitions: dict[str, tuple[Any, ...]] = {
                row[0]: tuple(row[1:]) for row in db.execute(definitions_query).all()
            }
            for row in db.execute(runs_query).all():
                definitions[row[0]] = (*definitions.get(row[0], ()), row[1], row[2])
        for row in rows:
            if row.state not in STATE_VALUES:
                continue  # a damaged record: the list says so, the stream leaves it out
            state = JobState(row.state)
            progress = Progress(
                cells_done=row.cells_done or 0,
                cells_total=row.cells_total or 0,
                current_cell=row.current_cell,
            )
            if state in ACTIVE_STATES:  # as the API shows it (JobView)
                live = self.ctx.runners.latest(row.id, row.job_dir)
                state, progress = with_runner(state, progress, live)
            waiting = row.waiting_reason if state is JobState.QUEUED else None
            jobs[row.id] = (
                row.user,
                state.value,
                progress.cells_done,
                progress.cells_total,
                progress.current_cell,
                places.get(row.id),
                waiting,
            )
        return jobs, definitions

    def _differences(
        self, jobs: dict[str, JobPrint], definitions: dict[str, tuple[Any, ...]]
    ) -> Iterable[Change]:
        for job_id, seen in jobs.items():
            if self._jobs.get(job_id) != seen:
                user, state, done, total, current, place, waiting = seen
                event = JobEvent(
                    id=job_id,
                    user=user,
                    state=JobState(state),
                    progress=Progress(cells_done=done, cells_total=total, current_cell=current),
                    queue_position=place,
                    waiting_reason=waiting,
                )
                yield Change("job", user, event.model_dump(mode="json"))
        for job_id, before in self._jobs.items():
            if job_id not in jobs and before[1] not in FINAL_STATES:
                # gone before it ended (deleted; an ended job just leaves the window)
                gone = JobRemovedEvent(id=job_id, user=before[0])
                yield Change("job_removed", before[0], gone.model_dump(mode="json"))
        for user in definitions.keys() | self._definitions.keys():
            if definitions.get(user) != self._definitions.get(user):
                yield Change("definitions", user, DefinitionsEvent(user=user).model_dump())

    def _publish(self, changes: list[Change]) -> None:
        if not changes:
            return
        classes = self.ctx.classes
        for change in changes:
            self._next_id += 1
            frame = frame_of(change.kind, change.data, self._next_id)
            for stream in list(self.streams):
                if may_see(stream.caller, classes, change.user):
                    stream.offer(frame)
