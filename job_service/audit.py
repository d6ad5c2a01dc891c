"""Teachers look into their students' work, and admins see who looked.

A teacher (or an admin) opens a student's job from the dashboard: its details, its log
and its result. The result is never the student's live file: the service reads the
job's output notebook once, without following a link the student may have put in its
place (:func:`nbjobs.storage.read_notebook`), and renders it to HTML itself
(nbconvert), which the dashboard shows in a sandboxed frame that runs no script. The
page carries a Content-Security-Policy that forbids scripts and loading anything, so
neither can a browser that opens it directly.

The dashboard shows a result in a frame of its own address, so that the page's own
policy (its styles included) applies there and not the dashboard's: it asks for a link
(``POST api/jobs/{id}/result/link``), good for one opening within :data:`LINK_TTL`,
and the frame opens it (``{prefix}dashboard/result/<key>``); the key in the link is the
credential, for whom it was made, held by this service only.

Each time someone reads another person's log or result, an entry is written to the
audit list (:class:`AuditRecord`); the same reader reading the same thing of the same
job again within :data:`COALESCE` adds none (a log being followed is read every
quarter second). Admins read the list (``GET api/audit``); nobody can change it
through the API, and deleting a job leaves its entries.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel
from sqlalchemy import Integer, String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from nbjobs.models import JobState
from nbjobs.storage import NotebookTooLarge, PathRefused, read_notebook

from .db import Base, JobRecord, UTCDateTime, utcnow
from .errors import Caller, Conflict, DamagedRecord, Forbidden, NotFound, TooLarge

if TYPE_CHECKING:
    from .context import Context

#: a second reading of the same thing by the same reader within this adds no entry
COALESCE = timedelta(minutes=10)
#: the largest output notebook rendered for a reader (the owner opens bigger ones in Lab)
RESULT_MAX_BYTES = 20 * 1024 * 1024
#: what a rendered result may do in a browser: show itself, its styles and inline images
#: (within the dashboard only, when framed)
RESULT_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; sandbox; "
    "frame-ancestors 'self'"
)
#: the headers a rendered result is sent with (``GET api/jobs/{id}/result``, a link's page)
RESULT_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": RESULT_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
#: how long a link to a result may wait for its one opening
LINK_TTL = timedelta(seconds=60)
#: the most links waiting at once (the oldest go first)
LINKS_MAX = 1000


class AuditRecord(Base):
    """One reading of another person's job (its log or result)."""

    __tablename__ = "nbjobs_audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    #: who read it
    reader: Mapped[str] = mapped_column(String(255))
    #: whose job it is
    owner: Mapped[str] = mapped_column(String(255), index=True)
    job_id: Mapped[str] = mapped_column(String(32))
    #: ``log`` or ``result``
    what: Mapped[str] = mapped_column(String(16))


class AuditEntry(BaseModel):
    """One reading: who read what of whose job, and when."""

    id: int
    at: datetime
    reader: str
    owner: str
    job_id: str
    what: Literal["log", "result"]


class AuditList(BaseModel):
    """``GET api/audit``: readings of other people's jobs, newest first."""

    entries: list[AuditEntry]
    #: whether older entries exist (ask again with ``before`` the last id)
    more: bool


class ResultLink(BaseModel):
    """``POST api/jobs/{id}/result/link``: where the job's result opens, once."""

    #: the page's path on this service (the key in it is the credential)
    url: str
    #: after this, the link opens nothing
    expires_at: datetime


@dataclass(frozen=True)
class _Link:
    caller: Caller
    job_id: str
    expires_at: datetime


def note_reading(
    db: Session, reader: str, owner: str, job_id: str, what: str, now: datetime | None = None
) -> None:
    """Record that ``reader`` read ``what`` of ``owner``'s job (nothing when it is their
    own, or the same reading was recorded within :data:`COALESCE`). In ``db``'s
    transaction: the caller commits."""
    if reader == owner:
        return
    now = now or utcnow()
    recent = db.scalar(
        select(AuditRecord.id).where(
            AuditRecord.reader == reader,
            AuditRecord.job_id == job_id,
            AuditRecord.what == what,
            AuditRecord.at > now - COALESCE,
        )
    )
    if recent is None:
        db.add(AuditRecord(at=now, reader=reader, owner=owner, job_id=job_id, what=what))


class Audit:
    """The results readers open, and the list of who opened what."""

    def __init__(
        self,
        ctx: Context,
        visible: Callable[[Caller, JobRecord | None, str], JobRecord],
        folder_for: Callable[[str], Path],
    ) -> None:
        self.ctx = ctx
        #: the record of a job the caller may see (else NotFound): the service's rule
        self._visible = visible
        #: a user's folder, where their jobs' outputs are
        self._folder_for = folder_for
        #: the links made and not yet opened, by key (oldest first)
        self._links: dict[str, _Link] = {}

    async def result_link(self, caller: Caller, job_id: str, prefix: str) -> ResultLink:
        """``POST api/jobs/{id}/result/link``: a link that opens the job's result once,
        within :data:`LINK_TTL`, as ``caller`` (who must be able to read it now: the
        same refusals as :meth:`result_html`, but for a file gone by the opening)."""
        await self.ctx.in_db(self._ended_record, caller, job_id)
        now = utcnow()
        for key in [k for k, link in self._links.items() if link.expires_at <= now]:
            del self._links[key]
        while len(self._links) >= LINKS_MAX:
            del self._links[next(iter(self._links))]
        key = secrets.token_urlsafe(32)
        link = _Link(caller, job_id, now + LINK_TTL)
        self._links[key] = link
        return ResultLink(
            url=f"{prefix.rstrip('/')}/dashboard/result/{key}", expires_at=link.expires_at
        )

    async def open_link(self, key: str) -> str:
        """The result a link opens (see :meth:`result_link`); it opens nothing again."""
        link = self._links.pop(key, None)
        if link is None or link.expires_at <= utcnow():
            raise NotFound(
                "this link to a job's result was opened already or is more than a minute "
                "old; open the result again from the dashboard"
            )
        return await self.result_html(link.caller, link.job_id)

    async def result_html(self, caller: Caller, job_id: str) -> str:
        """``GET api/jobs/{id}/result``: the job's output notebook as read-only HTML, for
        whoever may see the job; a reading by anyone but its owner is recorded. The
        record and the file are read on the database's threads; the rendering (seconds
        for a big notebook) on a thread of its own, holding none of them."""
        owner, data = await self.ctx.in_db(self._read_result, caller, job_id)
        html = await asyncio.to_thread(render, data, job_id)
        await self.ctx.in_db(self._note_result, caller.name, owner, job_id)
        return html

    def _read_result(self, caller: Caller, job_id: str) -> tuple[str, bytes]:
        """The job's owner and its output notebook's bytes (see :meth:`result_html`)."""
        owner, path = self._ended_record(caller, job_id)
        try:
            notebook = read_notebook(self._folder_for(owner), path, limit=RESULT_MAX_BYTES)
        except NotebookTooLarge as exc:
            raise TooLarge(
                f"{path} is {exc.size} bytes, more than the {RESULT_MAX_BYTES} shown here; "
                f"{owner} can open it in JupyterLab"
            ) from None
        except PathRefused as exc:
            # gone, moved, or a link now: nothing of it is read
            raise NotFound(f"the result of job {job_id} cannot be read: {exc}") from None
        return owner, notebook.data

    def _ended_record(self, caller: Caller, job_id: str) -> tuple[str, str]:
        """The owner and output path of a job ``caller`` may see that ended with a result;
        else the refusal that says why not."""
        with self.ctx.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
            owner, path, state = record.user, record.output_path, record.state
            started = record.started_at is not None
        try:
            final = JobState(state).final
        except ValueError:
            raise DamagedRecord(job_id, f"its state {state!r} is unknown") from None
        if not final:
            raise Conflict(f"job {job_id} has not ended: its result is written when it ends")
        if not started or not path:
            raise NotFound(f"job {job_id} never started, so it has no result")
        return owner, path

    def _note_result(self, reader: str, owner: str, job_id: str) -> None:
        with self.ctx.sessions() as db:
            note_reading(db, reader, owner, job_id, "result")
            db.commit()

    def entries(self, caller: Caller, limit: int = 100, before: int | None = None) -> AuditList:
        """``GET api/audit``: the readings, newest first (nbjobs admins only)."""
        if not caller.admin:
            raise Forbidden("the audit list is for nbjobs admins")
        with self.ctx.sessions() as db:
            query = select(AuditRecord).order_by(AuditRecord.id.desc()).limit(limit + 1)
            if before is not None:
                query = query.where(AuditRecord.id < before)
            rows = db.scalars(query).all()
            entries = [AuditEntry.model_validate(r, from_attributes=True) for r in rows[:limit]]
        return AuditList(entries=entries, more=len(rows) > limit)


#: each rendering thread's exporter: a new one compiles nbconvert's templates again,
#: ten times the work of rendering a small notebook with one that has (0.14 s against
#: 0.013); one per thread, as an exporter keeps state while it renders
_exporters = threading.local()


def render(data: bytes, job_id: str) -> str:
    """A notebook's bytes as a standalone HTML page (nbconvert's lab template)."""
    import nbformat
    from nbconvert import HTMLExporter

    try:
        notebook = nbformat.reads(data.decode("utf-8", errors="replace"), as_version=4)
    except Exception as exc:  # nbformat raises many kinds for a damaged file
        raise Conflict(
            f"the result of job {job_id} is not a notebook nbformat reads: {exc}"
        ) from None
    exporter = getattr(_exporters, "lab", None)
    if exporter is None:
        exporter = _exporters.lab = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(notebook)
    return str(body)
