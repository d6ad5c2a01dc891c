"""Job definitions: save, read, edit (a new version), pause, resume, delete, list, and
the history of their runs. Starting runs is :mod:`.ticker`'s.

Who may do what: the owner everything; admins see and act on every definition;
teachers see their students' (read only). A definition is checked like a submission
when it is saved (the flavor the owner's, a kernel the flavor has, the schedule valid
and not more frequent than ``schedules.min_interval``), and again at each run, against
what the owner may do then.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from nbjobs.models import JobState, SubmitRequest

from ..db import JobRecord, utcnow
from ..errors import Caller, Conflict, Forbidden, Invalid, NotFound, first_problem
from .cron import Schedule, ScheduleError, parse_schedule
from .models import (
    Definition,
    DefinitionList,
    DefinitionRequest,
    DefinitionRun,
    DefinitionUpdate,
    RunList,
    ScheduleInfo,
    ScheduleSpec,
)
from .store import (
    SETTINGS,
    DefinitionRecord,
    DefinitionRunRecord,
    DefinitionVersionRecord,
)

if TYPE_CHECKING:
    from ..context import Context


def schedule_of(record: DefinitionRecord) -> Schedule | None:
    return Schedule(record.cron, record.timezone) if record.cron else None


def next_run(record: DefinitionRecord, after: datetime) -> datetime | None:
    """The definition's first tick after ``after`` within its start and end; None when
    it has no schedule, is paused or has ended."""
    schedule = schedule_of(record)
    if schedule is None or record.paused or record.deleted_at is not None:
        return None
    if record.start_at is not None and after < record.start_at:
        after = record.start_at - timedelta(seconds=1)  # a tick at the very start counts
    tick = schedule.next_after(after)
    if record.end_at is not None and tick > record.end_at:
        return None
    return tick


class Definitions:
    """The service's job definitions (one per service)."""

    def __init__(
        self,
        ctx: Context,
        check_request: Callable[..., object],
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.ctx = ctx
        #: what a submit refuses at once (the service's check_request)
        self._check_request = check_request
        #: the schedules' clock, the ticker's too (a test injects its own here)
        self.clock = clock

    def now(self) -> datetime:
        """The time by the schedules' clock, the one the ticker starts runs by: a
        schedule's next tick is worked out on the clock that will start it."""
        return self.clock()

    # -- checks ----------------------------------------------------------------------

    def _check_submission(self, caller: Caller, settings: dict[str, Any]) -> None:
        """What a submit would refuse at once (flavor, kernel, limits), said now; the
        notebook itself is read at each run, as it is then."""
        try:
            request = SubmitRequest(
                **{k: v for k, v in settings.items() if k in SubmitRequest.model_fields}
            )
        except ValidationError as exc:  # an edit that set path or flavor to null
            raise Invalid(first_problem(exc)) from None
        self._check_request(caller, request, placeable=False)

    def _schedule(self, spec: ScheduleSpec, now: datetime) -> Schedule:
        config = self.ctx.config.schedules
        try:
            schedule = parse_schedule(
                spec.cron,
                spec.timezone or config.default_timezone,
                config.min_interval or 0,
                now,
            )
        except ScheduleError as exc:
            raise Invalid(str(exc)) from None
        if spec.start_at and spec.end_at and spec.end_at <= spec.start_at:
            raise Invalid("schedule.end_at must be after schedule.start_at")
        return schedule

    # -- create, read, edit -----------------------------------------------------------

    def create(self, caller: Caller, request: DefinitionRequest) -> Definition:
        if not caller.may_submit:
            raise Forbidden(
                "you may not submit jobs here (your hub account lacks the custom:nbjobs:submit "
                "scope), so you may not save job definitions either; ask your admin"
            )
        settings = request.model_dump(include=set(SETTINGS))
        self._check_submission(caller, settings)
        now = self.now()
        schedule = self._schedule(request.schedule, now) if request.schedule else None
        with self.ctx.sessions() as db:
            kept = db.scalar(
                select(func.count())
                .select_from(DefinitionRecord)
                .where(DefinitionRecord.user == caller.name, DefinitionRecord.deleted_at.is_(None))
            )
            limit = self.ctx.config.schedules.max_per_user
            if (kept or 0) >= limit:
                raise Conflict(
                    f"you keep {kept} job definitions, the most this service allows "
                    f"(schedules.max_per_user: {limit}); delete one first"
                )
            record = DefinitionRecord(
                id=uuid.uuid4().hex[:12],
                user=caller.name,
                groups=sorted(caller.groups),
                name=(request.name or "").strip() or _stem(request.path),
                version=1,
                settings=settings,
                paused=int(request.paused),
                created_at=now,
                updated_at=now,
            )
            _set_schedule(record, request.schedule, schedule)
            record.next_run_at = next_run(record, now)
            db.add(record)
            db.add(_version_of(record, caller.name, now))
            db.commit()
            self.ctx.log.info(
                "definition %s saved by %s (%s)", record.id, caller.name, record.cron or "on demand"
            )
            return self._to_model(db, record)

    def get(self, caller: Caller, definition_id: str) -> Definition:
        with self.ctx.sessions() as db:
            return self._to_model(db, self.visible(caller, db, definition_id))

    def list(self, caller: Caller, *, user: str | None = None) -> DefinitionList:
        """The caller's definitions; an admin's every one (or one user's); a teacher's
        their own and their students'."""
        query = select(DefinitionRecord).where(DefinitionRecord.deleted_at.is_(None))
        if user is not None:
            if user != caller.name and not (
                caller.admin or self.ctx.classes.teaches(caller.name, user)
            ):
                raise Forbidden(
                    "only admins and the user's teachers may list another user's definitions"
                )
            query = query.where(DefinitionRecord.user == user)
        elif not caller.admin:
            students = self._students_of(caller)
            query = query.where(DefinitionRecord.user.in_({caller.name, *students}))
        with self.ctx.sessions() as db:
            records = db.scalars(query.order_by(DefinitionRecord.created_at.desc())).all()
            self._refresh_groups(db, caller, records)
            return DefinitionList(definitions=[self._to_model(db, r) for r in records])

    def update(self, caller: Caller, definition_id: str, change: DefinitionUpdate) -> Definition:
        now = self.now()
        with self.ctx.sessions() as db:
            record = self.visible(caller, db, definition_id, act=True)
            given = change.model_fields_set
            settings = dict(record.settings)
            for key in SETTINGS:
                if key in given:
                    settings[key] = getattr(change, key)
            if settings.get("parameters") is None:
                settings["parameters"] = {}
            owner = self._owner(record, caller)
            self._check_submission(owner, settings)
            if "schedule" in given:
                spec = change.schedule
                _set_schedule(record, spec, self._schedule(spec, now) if spec else None)
            if "name" in given:
                record.name = (change.name or "").strip() or _stem(settings["path"])
            record.settings = settings
            record.version += 1
            record.updated_at = now
            record.next_run_at = next_run(record, now)
            db.add(_version_of(record, caller.name, now))
            db.commit()
            return self._to_model(db, record)

    def set_paused(self, caller: Caller, definition_id: str, paused: bool) -> Definition:
        now = self.now()
        with self.ctx.sessions() as db:
            record = self.visible(caller, db, definition_id, act=True)
            record.paused = int(paused)
            record.updated_at = now
            # resumed: from the next tick on (the ones missed while paused do not run)
            record.next_run_at = next_run(record, now)
            db.commit()
            return self._to_model(db, record)

    def delete(self, caller: Caller, definition_id: str) -> None:
        """Delete a definition: no more runs; its runs' jobs and outputs stay."""
        with self.ctx.sessions() as db:
            record = self.visible(caller, db, definition_id, act=True)
            record.deleted_at = self.now()
            record.next_run_at = None
            db.commit()

    def runs(self, caller: Caller, definition_id: str, *, limit: int = 50) -> RunList:
        """A definition's runs, newest first, with what their jobs became."""
        with self.ctx.sessions() as db:
            record = self.visible(caller, db, definition_id, deleted_ok=True)
            rows = db.scalars(
                select(DefinitionRunRecord)
                .where(DefinitionRunRecord.definition_id == record.id)
                .order_by(DefinitionRunRecord.scheduled_for.desc())
                .limit(limit + 1)
            ).all()
            total = db.scalar(
                select(func.count())
                .select_from(DefinitionRunRecord)
                .where(DefinitionRunRecord.definition_id == record.id)
            )
            versions = {
                v.version: v.settings
                for v in db.scalars(
                    select(DefinitionVersionRecord).where(
                        DefinitionVersionRecord.definition_id == record.id
                    )
                )
            }
            runs = [self._run_model(db, r, versions) for r in rows]
            # what changed since the run before (the older neighbour), for each shown
            for newer, older in pairwise(runs):
                newer.parameters_changed = _changed(older.parameters, newer.parameters)
            return RunList(runs=runs[:limit], total=total or 0)

    def run(self, caller: Caller, run_id: str) -> DefinitionRun:
        """One run, as its history shows it."""
        with self.ctx.sessions() as db:
            run = db.get(DefinitionRunRecord, run_id)
            if run is None:
                raise NotFound(f"no run {run_id!r}")
            self.visible(caller, db, run.definition_id, deleted_ok=True)
            return self._run_model(db, run, None)

    # -- helpers ------------------------------------------------------------------------

    def _students_of(self, caller: Caller) -> set[str]:
        return {
            student
            for cls in self.ctx.classes.visible_to(caller)
            if caller.name in cls.teachers
            for student in cls.students
        }

    def visible(
        self,
        caller: Caller,
        db: Session,
        definition_id: str,
        *,
        act: bool = False,
        deleted_ok: bool = False,
    ) -> DefinitionRecord:
        record = db.get(DefinitionRecord, definition_id)
        missing = NotFound(
            f"no job definition {definition_id!r} of yours; `nbjobs schedule list` shows them"
        )
        if record is None or (record.deleted_at is not None and not deleted_ok):
            raise missing
        if record.user == caller.name or caller.admin:
            return record
        if self.ctx.classes.teaches(caller.name, record.user):
            if act:
                raise Forbidden(
                    f"definition {definition_id} is {record.user}'s; teachers see their "
                    "students' definitions but only their owner or an admin changes them"
                )
            return record
        raise missing

    def _owner(self, record: DefinitionRecord, caller: Caller) -> Caller:
        if caller.name == record.user:
            return caller
        return Caller(record.user, frozenset(record.groups))

    def _refresh_groups(self, db: Session, caller: Caller, records: Any) -> None:
        """The owner's groups as their latest call says (runs use them for flavor access
        and quotas when the owner is not there to ask)."""
        groups = sorted(caller.groups)
        changed = False
        for record in records:
            if record.user == caller.name and record.groups != groups:
                record.groups = groups
                changed = True
        if changed:
            db.commit()

    def _to_model(self, db: Session, record: DefinitionRecord) -> Definition:
        settings = record.settings
        schedule = schedule_of(record)
        last = db.scalars(
            select(DefinitionRunRecord)
            .where(DefinitionRunRecord.definition_id == record.id)
            .order_by(DefinitionRunRecord.created_at.desc())
            .limit(1)
        ).first()
        return Definition(
            id=record.id,
            user=record.user,
            name=record.name,
            version=record.version,
            path=settings["path"],
            flavor=settings["flavor"],
            parameters=settings.get("parameters") or {},
            kernel=settings.get("kernel"),
            outputs=settings.get("outputs"),
            html=settings.get("html"),
            time_limit=settings.get("time_limit"),
            schedule=None
            if schedule is None
            else ScheduleInfo(
                cron=schedule.cron,
                timezone=schedule.timezone,
                start_at=record.start_at,
                end_at=record.end_at,
                catch_up="skip" if record.catch_up == "skip" else "once",
                description=schedule.explain(),
            ),
            paused=bool(record.paused),
            next_run_at=record.next_run_at,
            created_at=record.created_at,
            updated_at=record.updated_at,
            last_run=None if last is None else self._run_model(db, last, None),
        )

    def _run_model(
        self,
        db: Session,
        run: DefinitionRunRecord,
        versions: dict[int, dict[str, Any]] | None,
    ) -> DefinitionRun:
        job = db.get(JobRecord, run.job_id) if run.job_id else None
        if versions is None:
            version = db.get(DefinitionVersionRecord, (run.definition_id, run.version))
            settings = version.settings if version is not None else {}
        else:
            settings = versions.get(run.version, {})
        duration = None
        if job is not None and job.started_at and job.finished_at:
            duration = (job.finished_at - job.started_at).total_seconds()
        return DefinitionRun(
            id=run.id,
            definition_id=run.definition_id,
            version=run.version,
            scheduled_for=run.scheduled_for,
            kind=run.kind,  # type: ignore[arg-type]
            state=run.state,  # type: ignore[arg-type]
            reason=run.reason,
            missed=run.missed or 0,
            requested_by=run.requested_by,
            job_id=run.job_id,
            job_state=JobState(job.state) if job is not None else None,
            output_path=job.output_path if job is not None else None,
            duration_seconds=duration,
            parameters=settings.get("parameters") or {},
        )


def _set_schedule(
    record: DefinitionRecord, spec: ScheduleSpec | None, schedule: Schedule | None
) -> None:
    """Give ``record`` the schedule ``spec`` asked for (checked: ``schedule``), or none."""
    record.cron = schedule.cron if schedule else None
    record.timezone = schedule.timezone if schedule else "UTC"
    record.start_at = spec.start_at if spec else None
    record.end_at = spec.end_at if spec else None
    record.catch_up = spec.catch_up if spec else "once"


def _version_of(record: DefinitionRecord, by: str, now: datetime) -> DefinitionVersionRecord:
    return DefinitionVersionRecord(
        definition_id=record.id,
        version=record.version,
        settings=dict(record.settings),
        cron=record.cron,
        timezone=record.timezone,
        created_at=now,
        created_by=by,
    )


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[: -len(".ipynb")] if name.endswith(".ipynb") else name


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    return {
        name: [before.get(name), after.get(name)]
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    }


def aware(when: datetime) -> datetime:
    """``when`` with a zone (a naive time is taken as UTC)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
