"""A local job the service started but never wrote down.

Between starting a job's runner and recording its process in the database there is a
moment (a trip to the database's thread) when a service killed outright (SIGKILL, a
crash, the machine's OOM killer) leaves a job marked as starting with no process named.
The runner may run on, or may never have begun. The next service tells which: the
runner's command line names the job's status file, so a live runner is found by it and
adopted; a runner that already ended left that status file with its last word; and a job
with neither never started, so it is queued again without any risk of running twice.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

import psutil

from nbjobs.cgroups import Group

from .base import status_file_in


@dataclass(frozen=True)
class Unrecorded:
    """The process found for a job whose start was never recorded."""

    #: the process the backend started (the launcher, under a sandbox) and when
    pid: int
    created: float
    #: the GPUs it was given (its ``CUDA_VISIBLE_DEVICES``)
    gpus: list[str]


def find_unrecorded(status_file: Path) -> Unrecorded | None:
    """The live process started for the job whose runner writes ``status_file``; None
    when none runs. Of the processes naming it (a sandbox's launcher, its first process
    and the runner all do) the one whose parent does not is the one that was started."""
    wanted = str(status_file)
    named: dict[int, psutil.Process] = {}
    for process in psutil.process_iter(["cmdline", "ppid", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if status_file_in(process.info["cmdline"] or []) == wanted:
            named[process.pid] = process
    started = [p for p in named.values() if p.info["ppid"] not in named]
    if not started:
        return None
    first = min(started, key=lambda p: p.create_time())
    gpus: list[str] = []
    with contextlib.suppress(psutil.Error):
        visible = first.environ().get("CUDA_VISIBLE_DEVICES", "")
        gpus = [gpu for gpu in visible.split(",") if gpu]
    return Unrecorded(first.pid, first.create_time(), gpus)


def unrecorded_runner(
    job_id: str, status_file: Path, group: Group | None, gpus: list[str], log: logging.Logger
) -> tuple[str, list[str]] | None:
    """The ref and GPUs of the job's unrecorded runner, if one runs. A process of the
    user's own could name the status file too: the runner is the one in the job's control
    group ``group`` (which no user can join), holding only GPUs among ``gpus``."""
    found = find_unrecorded(status_file)
    if found is None:
        return None
    if (group is not None and found.pid not in group.pids()) or not set(found.gpus) <= set(gpus):
        log.warning(
            "job %s: process %s names its status file but is not its runner; ignored",
            job_id,
            found.pid,
        )
        return None
    return job_ref(job_id, [(found.pid, found.created)]), found.gpus


def job_ref(job_id: str, processes: list[tuple[int, float]]) -> str:
    """A local job's ref: ``JOB:PID:CREATED``, one ``PID:CREATED`` per rank (read back by
    :meth:`~.local.LocalBackend.adopt`), for a start and an unrecorded one alike."""
    return f"{job_id}:" + ":".join(f"{pid}:{created:.3f}" for pid, created in processes)
