"""A student's GPU-hour budget, extended: a class's teacher (or an admin) grants one
student more GPU-hours than the class gives each ("ada may use 5 more for the next 7
days"). An extension counts for one of the class's periods from when it was granted (periods are
rolling windows, as budgets are); it is kept in the database and read into memory, so
working out a quota asks no database.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import delete, select

from nbjobs.config import PERIOD_SPANS, PERIODS
from nbjobs.models import ClassInfo

from .db import BudgetExtension, utcnow
from .errors import Caller, Conflict, NotFound

if TYPE_CHECKING:
    from .context import Context

#: the most hours one extension may grant
MOST_HOURS = 10_000.0
#: extensions older than this are dropped (no period is longer)
KEPT = timedelta(days=31)


class Budgets:
    """The extensions in force, per class and student."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        #: (class, student) -> [(granted_at, hours)]
        self._granted: dict[tuple[str, str], list[tuple[datetime, float]]] = {}

    def load(self) -> None:
        """Read the extensions (at start, after each grant), dropping expired ones."""
        with self.ctx.sessions() as db:
            db.execute(delete(BudgetExtension).where(BudgetExtension.granted_at < utcnow() - KEPT))
            rows = db.execute(
                select(
                    BudgetExtension.class_name,
                    BudgetExtension.student,
                    BudgetExtension.granted_at,
                    BudgetExtension.hours,
                )
            ).all()
            db.commit()
        granted: dict[tuple[str, str], list[tuple[datetime, float]]] = {}
        for name, student, at, hours in rows:
            granted.setdefault((name, student), []).append((at, hours))
        with self._lock:
            self._granted = granted

    def extra(self, cls: ClassInfo, student: str, now: datetime | None = None) -> float:
        """The hours granted to ``student`` in ``cls`` that count now."""
        since = (now or utcnow()) - PERIODS[cls.period]
        with self._lock:
            granted = list(self._granted.get((cls.name, student), []))
        return sum(hours for at, hours in granted if at > since)

    def annotate(self, info: ClassInfo) -> ClassInfo:
        """``info`` with the extensions in force for its students."""
        now = utcnow()
        extra = {s: h for s in info.students if (h := self.extra(info, s, now))}
        return info.model_copy(update={"extra_hours": extra})

    def grant(self, caller: Caller, name: str, student: str, hours: float) -> ClassInfo:
        """Give ``student`` of class ``name`` ``hours`` more GPU-hours for one period."""
        classes = self.ctx.classes
        info = classes.get(name)
        if info is None or not (caller.admin or caller.name in info.teachers):
            raise NotFound(f"no class {name!r} of yours; `nbjobs class list` shows your classes")
        if student not in info.students:
            raise NotFound(f"{student!r} is not a student of {name}")
        if info.gpu_hours is None:
            raise Conflict(
                f"class {name} sets no GPU-hour budget, so there is nothing to extend; give "
                "the class a budget first"
            )
        if not 0 < hours <= MOST_HOURS:
            raise Conflict(f"grant between 0 and {MOST_HOURS:g} hours, not {hours:g}")
        with self.ctx.sessions() as db:
            db.add(
                BudgetExtension(
                    class_name=name,
                    student=student,
                    hours=hours,
                    granted_by=caller.name,
                    granted_at=utcnow(),
                )
            )
            db.commit()
        self.ctx.log.info(
            "class %s: %s gets %g more GPU-hours for the next %s, from %s",
            name,
            student,
            hours,
            PERIOD_SPANS[info.period],
            caller.name,
        )
        self.load()
        return self.annotate(info)
