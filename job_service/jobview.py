"""One view of a job: a record, the runner's latest word and the backend's, as the API
shows it. The job list, one job's details, approvals and the dashboard all use it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from nbjobs.job_runner import RunStatus, StatusFileError
from pydantic import ValidationError
from sqlalchemy.orm import Session

from nbjobs.models import ACTIVE_STATES, Job, JobError, JobState, Progress

from .db import JobRecord, utcnow
from .errors import DamagedRecord, first_problem

if TYPE_CHECKING:
    from .backends import Backend
    from .queue import QueuePositions


def with_runner(
    state: JobState, progress: Progress, live: RunStatus | None
) -> tuple[JobState, Progress]:
    """A started job's state and progress with its runner's latest word (``live``): its
    cells, and running once its notebook runs (the record says starting until then)."""
    if live is None:
        return state, progress
    said = Progress(
        cells_done=live.cells_done, cells_total=live.cells_total, current_cell=live.current_cell
    )
    return (JobState.RUNNING if live.state == JobState.RUNNING.value else state), said


class JobView:
    """Turns job records into the API's :class:`~nbjobs.models.Job`.

    ``live`` gives the runner's latest status of a started job (by its id and folder;
    :class:`~.live.RunnerStatuses`): its progress and whether it runs yet; the backend
    says where the cluster placed it, or why not yet.
    """

    def __init__(
        self,
        backend: Backend,
        positions: QueuePositions,
        live: Callable[[str, str], RunStatus | None],
    ) -> None:
        self.backend = backend
        self.positions = positions
        self._live = live

    def model(self, db: Session, record: JobRecord, positions: dict[str, int] | None = None) -> Job:
        """The API's view of a record; :class:`DamagedRecord` when the record cannot be one."""
        try:
            state = JobState(record.state)
        except ValueError:
            raise DamagedRecord(record.id, f"state {record.state!r} is not a job state") from None
        try:
            progress = Progress(
                cells_done=record.cells_done,
                cells_total=record.cells_total,
                current_cell=record.current_cell,
            )
        except ValidationError as exc:
            raise DamagedRecord(record.id, first_problem(exc)) from None
        if state in ACTIVE_STATES:
            with contextlib.suppress(StatusFileError, OSError):
                state, progress = with_runner(
                    state, progress, self._live(record.id, record.job_dir)
                )
        waiting = record.waiting_reason
        seen = None
        if state in ACTIVE_STATES and record.backend_ref:
            seen = self.backend.seen(record.backend_ref)
        if seen is not None and seen.waiting:
            # Handed to the cluster, which has not placed it yet: queued there, and why.
            state, waiting = JobState.QUEUED, seen.waiting
        position = None
        if state is JobState.QUEUED:
            positions = positions if positions is not None else self.positions.get(db)
            position = positions.get(record.id)
        if record.error is not None and not isinstance(record.error, dict):
            raise DamagedRecord(record.id, f"error {record.error!r} is not an object")
        try:
            return Job(
                id=record.id,
                user=record.user,
                name=record.name,
                path=record.path,
                output_path=record.output_path,
                flavor=record.flavor,
                state=state,
                queue_position=position,
                waiting_reason=waiting
                if state in (JobState.QUEUED, JobState.PENDING_APPROVAL)
                else None,
                progress=progress,
                parameters=record.parameters or {},
                priority=record.priority,
                gpus=record.gpus or [],
                nodes=record.nodes or 1,
                submitted_at=record.submitted_at,
                started_at=record.started_at,
                finished_at=record.finished_at,
                exit_code=record.exit_code,
                message=record.message,
                error=JobError(**record.error) if record.error else None,
                node=(seen.node if seen is not None and seen.node else None) or record.node,
                rerun_of=record.rerun_of,
                time_limit=record.time_limit,
                requeues=record.requeues or 0,
                warning=record.warning if state in ACTIVE_STATES else None,
                borrowing=seen.borrowing
                if seen is not None and state is JobState.RUNNING
                else None,
                kernel=record.kernel,
                html_path=(
                    str(PurePosixPath(record.output_path).with_suffix(".html"))
                    if record.html
                    else None
                ),
                kind=record.kind or "notebook",  # type: ignore[arg-type]
                command=record.command,
                gpu_hours=record.gpu_seconds(utcnow()) / 3600,
            )
        except (ValidationError, TypeError) as exc:
            raise DamagedRecord(record.id, first_problem(exc)) from None
