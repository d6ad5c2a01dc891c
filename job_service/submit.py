"""A submission: checked, its notebook (or script) copied into the job's folder, queued.

The cheap refusals come first (the flavor not the caller's, a limit over the flavor's, a
quota), then the one read of the notebook, checked as those very bytes and copied as
its snapshot; the quota is checked again in the transaction that queues the job.
"""

from __future__ import annotations

import asyncio
import errno
import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from nbjobs.config import Flavor, nodes_words
from nbjobs.models import Job, JobState, SubmitRequest
from nbjobs.storage import (
    FilesChanged,
    NotebookTooLarge,
    PathRefused,
    job_folder,
    make_job_dir,
    open_notebook,
    output_path_for,
    relative_to_user,
    remove_job_dir,
)

from .approvals import needs_approval, waiting_for_approval
from .db import JobRecord, utcnow
from .errors import (
    Caller,
    Conflict,
    Forbidden,
    InsufficientStorage,
    Invalid,
    ServiceError,
    StorageFailed,
    TooLarge,
)
from .kernels import check_chosen_kernel, check_notebook_kernel
from .offers import may_use
from .scripts import job_kind, read_script, snapshot_name

if TYPE_CHECKING:
    from .context import Context
    from .credits import Credits
    from .jobview import JobView
    from .notebooks import NotebookChecks
    from .quotas import Quotas
    from .retention import Retention


class JobNumbers:
    """Each job's number in the order of submits (``seq``): the list's order."""

    def __init__(self) -> None:
        self.last = 0
        #: submits are recorded on several database threads at once
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self.last += 1
            return self.last


class Submissions:
    """What a submit checks, copies and records."""

    def __init__(
        self,
        ctx: Context,
        *,
        view: JobView,
        notebooks: NotebookChecks,
        folder_for: Callable[[str], Path],
        retention: Retention,
        quotas: Quotas,
        credits: Credits,
        wake: Callable[[], None],
    ) -> None:
        self.ctx = ctx
        self.view = view
        #: where submitted notebooks are checked, within limits.cells / check_memory
        self.notebooks = notebooks
        self.folder_for = folder_for
        self.retention = retention
        self.quotas = quotas
        self.credits = credits
        #: the dispatcher's wake: a queued job is looked at in its next pass
        self.wake = wake
        self.numbers = JobNumbers()

    async def submit(
        self,
        caller: Caller,
        request: SubmitRequest,
        rerun_of: str | None = None,
        *,
        definition: tuple[str, str] | None = None,
    ) -> Job:
        """Check, snapshot and queue a notebook; return the queued job."""
        if not caller.may_submit:
            raise Forbidden(
                "you may not submit jobs here (your hub account lacks the custom:nbjobs:submit "
                "scope); ask your admin"
            )
        flavor, kernels = self.check_request(caller, request, placeable=True)
        kind = job_kind(request)

        # The cheap checks first: a refused submit costs no read of the notebook.
        await self.ctx.in_db(self._check_quota, caller, flavor)
        folder = self.folder_for(caller.name)
        await self.retention.check_room(caller.name, folder)
        job_id = uuid.uuid4().hex[:12]
        jobdir = job_folder(folder, job_id)
        if kind == "notebook":
            source = await self._snapshot(
                caller.name,
                folder,
                request.path,
                jobdir,
                None if request.kernel else (kernels, flavor),
            )
        else:
            source = await asyncio.to_thread(self._snapshot_script, folder, request, jobdir)
        try:
            job = await self.ctx.in_db(
                self._record_submit,
                caller,
                request,
                flavor,
                folder,
                source,
                jobdir,
                job_id,
                rerun_of,
                definition,
            )
        except BaseException:
            remove_job_dir(jobdir)  # no job folder without its job
            raise
        self.wake()
        return job

    def check_request(
        self, caller: Caller, request: SubmitRequest, *, placeable: bool
    ) -> tuple[Flavor, list[str] | None]:
        """What a submission is refused for before anything is read: a flavor not the
        caller's (or, with ``placeable``, one that can never run here for them), a
        priority from a non-admin, a time limit over the flavor's, a kernel the flavor
        lacks. Returns the flavor and its kernels (None: not known, or no notebook).
        A submit checks this; so does saving a job definition."""
        flavor = self.ctx.config.flavor(request.flavor)
        if flavor is None or not may_use(self.ctx.classes, caller, flavor):
            names = ", ".join(
                f.name for f in self.ctx.config.flavors if may_use(self.ctx.classes, caller, f)
            )
            raise Forbidden(
                f"you may not use flavor {request.flavor!r}; your flavors are: {names or 'none'}"
            )
        if request.nodes is not None and request.nodes != flavor.nodes:
            spanning = ", ".join(
                f.name
                for f in self.ctx.config.flavors
                if f.nodes == request.nodes and may_use(self.ctx.classes, caller, f)
            )
            raise Invalid(
                f"flavor {flavor.name!r} runs a job on {nodes_words(flavor.nodes)}, not "
                f"{request.nodes}; "
                + (
                    f"your flavors on {nodes_words(request.nodes)}: {spanning}"
                    if spanning
                    else f"none of your flavors runs on {nodes_words(request.nodes)}"
                )
            )
        if placeable:
            why_not = self.ctx.backend.can_ever_fit(flavor) or self.ctx.backend.cannot_run_for(
                caller.name
            )
            if why_not:
                raise Conflict(why_not)
        if request.priority not in (None, 0) and not caller.admin:
            raise Forbidden("only admins may set a job's priority; submit without it")
        if request.time_limit and flavor.time_limit and request.time_limit > flavor.time_limit:
            raise Invalid(
                f"time_limit {request.time_limit:g} s is longer than flavor {flavor.name!r} allows "
                f"({flavor.time_limit:g} s); ask for less or pick another flavor"
            )
        kernels = self.ctx.backend.kernels(flavor) if job_kind(request) == "notebook" else None
        check_chosen_kernel(request.kernel, kernels, flavor)
        return flavor, kernels

    def _check_quota(self, caller: Caller, flavor: Flavor) -> None:
        with self.ctx.sessions() as db:
            self.quotas.check_submit(db, caller, flavor)

    async def _snapshot(
        self,
        user: str,
        folder: Path,
        path: str,
        jobdir: Path,
        kernel_check: tuple[list[str] | None, Flavor] | None = None,
    ) -> Path:
        """Read the notebook ``path`` once, check those bytes and make the job's folder
        with exactly those bytes as its snapshot; return where the notebook really is.

        With ``kernel_check`` (the kernels a flavor's jobs have, and the flavor), a
        notebook whose own kernel is not among them is refused here, not by a job that
        would fail on its first line.

        The read does not follow links out of the user's folder and checks the very
        descriptor it reads (see :func:`~nbjobs.storage.open_notebook`): a link
        swapped meanwhile cannot make the snapshot someone else's notebook. The check
        takes its turn (:class:`~.notebooks.NotebookChecks`): a big notebook is read
        only once there is room for it, and parsed outside the service.
        """
        limit = self.ctx.config.limits.notebook
        try:
            opened = await asyncio.to_thread(open_notebook, folder, path, limit=limit)
        except NotebookTooLarge as exc:
            raise _too_large(path, exc.size, limit) from None
        except PathRefused as exc:
            raise Invalid(str(exc)) from None
        with opened:
            async with self.notebooks.turn(user, opened.size) as turn:
                try:
                    notebook = await asyncio.to_thread(opened.read)
                except NotebookTooLarge as exc:
                    raise _too_large(path, exc.size, limit) from None
                opened.close()
                found = await turn.check(notebook.data, path)
                if kernel_check is not None:
                    check_notebook_kernel(found.kernel, path, *kernel_check)
                await asyncio.to_thread(
                    self._make_job_dir,
                    folder,
                    path,
                    jobdir,
                    {snapshot_name("notebook", notebook.path): notebook.data},
                )
                source = notebook.path
                del notebook  # its bytes go before the next notebook is let in
        return source

    def _snapshot_script(self, folder: Path, request: SubmitRequest, jobdir: Path) -> Path:
        """The job's folder for a script or a command (:mod:`.scripts`); where it is."""
        source, files = read_script(folder, request, self.ctx.config.limits.notebook)
        self._make_job_dir(folder, request.path, jobdir, files)
        return source

    def _make_job_dir(self, folder: Path, path: str, jobdir: Path, files: dict[str, bytes]) -> None:
        """The job's folder with ``files`` in it, or a refusal that says what to do."""
        try:
            make_job_dir(jobdir, files)
            self.retention.note_written(folder, sum(len(data) for data in files.values()))
        except FilesChanged as exc:
            raise Conflict(
                f"{exc.filename} in your folder is {exc.strerror}; nbjobs keeps its job files "
                f"there and follows no links: remove the link ({exc.filename}) and submit again"
                if "link" in (exc.strerror or "")
                else f"{exc.filename} in your folder is {exc.strerror}; nbjobs keeps its job "
                f"files there: move it away and submit again"
            ) from None
        except OSError as exc:
            self.ctx.log.warning("the snapshot of %s in %s failed: %s", path, folder, exc)
            raise snapshot_failed(exc, path) from None

    def _record_submit(
        self,
        caller: Caller,
        request: SubmitRequest,
        flavor: Flavor,
        folder: Path,
        source: Path,
        jobdir: Path,
        job_id: str,
        rerun_of: str | None,
        definition: tuple[str, str] | None = None,
    ) -> Job:
        """Queue the job in the database: its quota checked again, now in the same
        transaction (other submits of the caller's may have been queued meanwhile)."""
        pending = needs_approval(flavor, caller)
        with self.ctx.sessions() as db:
            self.quotas.check_submit(db, caller, flavor)
            time_limit = request.time_limit or flavor.time_limit
            # its worst case held on its account, under the account's lock until the
            # commit below: submissions at once never overdraw it
            held = self.credits.hold(db, caller, flavor, time_limit)
            now = utcnow()
            kind = job_kind(request)
            snapshot = jobdir / snapshot_name(kind, source)
            outputs = self.ctx.config.outputs
            output = self._output_path(request, source, job_id, now)
            seq = self.numbers.next()
            record = JobRecord(
                id=job_id,
                seq=seq,
                user=caller.name,
                groups=sorted(caller.groups),
                name=(request.name or "").strip()
                or (_first_words(request.command) if request.command else source.stem),
                flavor=flavor.name,
                state=(JobState.PENDING_APPROVAL if pending else JobState.QUEUED).value,
                waiting_reason=waiting_for_approval(self.ctx.classes, caller, flavor)
                if pending
                else None,
                priority=request.priority or 0,
                # a command's path is the folder it runs in, as the user gave it
                path=relative_to_user(folder, source.parent if request.command else source),
                output_path=relative_to_user(folder, output),
                source_file=str(source),
                snapshot_file=str(snapshot),
                output_file=str(output),
                job_dir=str(jobdir),
                parameters=request.parameters,
                time_limit=time_limit,
                credit_account=held[0] if held else None,
                credit_hold=held[1] if held else None,
                credit_price=held[2] if held else None,
                gpu_count=flavor.gpu_count,
                nodes=flavor.nodes if flavor.nodes > 1 else None,
                gpu_equivalents=flavor.gpu_equivalents,
                gpus=[],
                submitted_at=now,
                rerun_of=rerun_of,
                definition_id=definition[0] if definition else None,
                definition_run=definition[1] if definition else None,
                kernel=request.kernel,
                html=int(outputs.html if request.html is None else request.html)
                if kind == "notebook"
                else 0,
                kind=None if kind == "notebook" else kind,
                command=request.command,
            )
            db.add(record)
            db.commit()
            self.ctx.log.info(
                "job %s: %s by %s (%s, %s)",
                job_id,
                "waiting for approval, submitted" if pending else "queued",
                caller.name,
                record.path,
                flavor.name,
            )
            return self.view.model(db, record)

    def _output_path(
        self, request: SubmitRequest, source: Path, job_id: str, now: datetime
    ) -> Path:
        """Where the job's result goes: beside its source or in the outputs folder."""
        outputs = self.ctx.config.outputs
        in_folder = (request.outputs or outputs.location) == "folder"
        return output_path_for(
            source,
            job_id,
            now,
            outputs.folder if in_folder else None,
            suffix=".ipynb" if job_kind(request) == "notebook" else ".log",
        )


def _first_words(command: str, width: int = 40) -> str:
    """A command's name in the Jobs list: its first line, shortened."""
    line = command.strip().splitlines()[0] if command.strip() else "command"
    return line if len(line) <= width else line[: width - 1] + "…"


def _too_large(path: str, size: int, limit: int) -> TooLarge:
    return TooLarge(
        f"the notebook {path!r} is {_size(size)}, more than the {_size(limit)} "
        "this service takes; clear its outputs (Edit > Clear Outputs of All Cells) "
        "and save it, or ask your admin to raise limits.notebook"
    )


def snapshot_failed(exc: OSError, path: str) -> ServiceError:
    """The refusal for a submit whose job folder or snapshot could not be written.

    A full disk or quota is a 507 (Insufficient Storage), a folder the service may
    not write a 403; anything else a 500 that still says what failed. Every one is
    a sentence: the user learns whether to free space or to ask an admin.
    """
    where = exc.filename or "your folder"
    reason = (exc.strerror or str(exc)).lower()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return InsufficientStorage(
            f"your folder has no room for the job's copy of {path!r} ({reason}); free some "
            "space (old outputs, .nbjobs/jobs of old jobs) and submit again"
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return Forbidden(
            f"the job service may not write in your folder ({where}: {reason}); ask your "
            "admin to check the storage"
        )
    return StorageFailed(
        f"the job service could not write the job's files in your folder ({where}: {reason}); "
        "try again, or ask your admin"
    )


def _size(size: int) -> str:
    """A size in MiB for people: ``2.4 MiB``, ``1 MiB``, ``0.1 MiB``."""
    mib = f"{size / 1024**2:.1f}".removesuffix(".0")
    return f"{mib} MiB"
