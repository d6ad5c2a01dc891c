"""Which jobs a job list (``GET api/jobs``) shows: whose, matching what search, and
from where a page starts.

Each rule is one function returning an SQL condition on :class:`JobRecord`, so
:meth:`JobService.list_jobs` only joins them and reads the page, and each rule
can be read (and changed) on its own.
"""

from __future__ import annotations

import re

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from .classes import ClassRegistry
from .db import JobRecord
from .errors import Caller, Forbidden, Invalid, NotFound

#: whose jobs a list may ask for: the caller's, theirs and their students', everyone's
SCOPES = ("mine", "classes", "all")
#: the longest search taken: a few words typed in a box, never a document (each word
#: costs the database a scan of five columns)
MAX_SEARCH_CHARS = 200
_JOB_ID = re.compile(r"[0-9a-f]{1,32}")


def owner_condition(
    caller: Caller,
    classes: ClassRegistry,
    *,
    scope: str | None,
    user: str | None,
    class_name: str | None,
) -> ColumnElement[bool] | None:
    """Whose jobs the list shows, as a condition on the owner; None: everyone's.

    ``scope`` is ``mine`` (the caller's), ``classes`` (the caller's and those of the
    students of every class they teach) or ``all`` (everyone's: admins only).
    Without a scope, ``user`` or ``class_name``, admins see everyone's jobs and
    anyone else their own. ``user`` (admins and the user's teachers) and
    ``class_name`` (admins and the class's teachers) narrow the list further.
    """
    conditions: list[ColumnElement[bool]] = []
    if scope is not None:
        mine = _scope_condition(caller, classes, scope)
        if mine is not None:
            conditions.append(mine)
    if user is not None:
        if user != caller.name and not caller.admin and not classes.teaches(caller.name, user):
            raise Forbidden("only admins and the user's teachers may list another user's jobs")
        conditions.append(JobRecord.user == user)
    if class_name is not None:
        cls = classes.get(class_name)
        if cls is None or not (caller.admin or caller.name in cls.teachers):
            raise NotFound(
                f"no class {class_name!r} of yours; `nbjobs class list` shows your classes"
            )
        conditions.append(JobRecord.user.in_(cls.students))
    if scope is None and user is None and class_name is None and not caller.admin:
        conditions.append(JobRecord.user == caller.name)
    return and_(*conditions) if conditions else None


def _scope_condition(
    caller: Caller, classes: ClassRegistry, scope: str
) -> ColumnElement[bool] | None:
    if scope == "mine":
        return JobRecord.user == caller.name
    if scope == "classes":
        owners = {caller.name}
        for cls in classes.taught_by(caller.name):
            owners.update(cls.students)
        return JobRecord.user.in_(sorted(owners))
    if scope == "all":
        if not caller.admin:
            raise Forbidden(
                "scope=all lists everyone's jobs, which only nbjobs admins may see; "
                "ask for scope=mine, or scope=classes for your students' jobs too"
            )
        return None
    raise Invalid(f"scope {scope!r} is not one of: {', '.join(SCOPES)}")


def search_condition(q: str | None) -> ColumnElement[bool] | None:
    """The jobs matching a search typed by a person; None: no search.

    Every word of ``q`` must match: as part of the job's name, notebook path, flavor
    or owner (case-insensitively; SQLite folds ASCII letters only, PostgreSQL all),
    or as the start of its id. ``%`` and ``_`` are plain characters, never wildcards.
    """
    if q is None:
        return None
    if len(q) > MAX_SEARCH_CHARS:
        raise Invalid(
            f"q: a search of {len(q)} characters is too long; search with at most "
            f"{MAX_SEARCH_CHARS} (words of the job's name, notebook, flavor, owner or id)"
        )
    words = q.lower().split()
    if not words:
        return None
    return and_(*(_word_condition(word) for word in words))


def _word_condition(word: str) -> ColumnElement[bool]:
    return or_(
        JobRecord.name.icontains(word, autoescape=True),
        JobRecord.path.icontains(word, autoescape=True),
        JobRecord.flavor.icontains(word, autoescape=True),
        JobRecord.user.icontains(word, autoescape=True),
        JobRecord.id.startswith(word, autoescape=True),
    )


def before_condition(
    db: Session, caller: Caller, classes: ClassRegistry, before: str
) -> ColumnElement[bool]:
    """The jobs submitted before job ``before``, in the order the list uses.

    A page that starts after a job the client already shows never repeats or skips
    a job when new ones arrive meanwhile (an ``offset`` would shift by as many). The
    job must be one the caller may see: a cursor reveals nothing about other jobs.
    """
    if not _JOB_ID.fullmatch(before):
        raise Invalid(
            f"before={before!r} is not a job id; pass the id of the last job of the page you have"
        )
    found = db.execute(select(JobRecord.seq, JobRecord.user).where(JobRecord.id == before)).first()
    if found is None or not may_see(caller, classes, found.user):
        raise Invalid(
            f"before={before}: there is no job {before!r} of yours to list from (it may "
            "have been removed); list from the newest again, without before"
        )
    return JobRecord.seq < found.seq


def may_see(caller: Caller, classes: ClassRegistry, owner: str) -> bool:
    """Whether ``caller`` may see ``owner``'s jobs: the owner, an admin, or one of the
    owner's teachers (the API's rule for one job, a list's cursor and pushed changes)."""
    return owner == caller.name or caller.admin or classes.teaches(caller.name, owner)
