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
from dataclasses import dataclass
from pathlib import Path

import psutil


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
        args = process.info["cmdline"] or []
        if process.info["status"] == psutil.STATUS_ZOMBIE or "--status-file" not in args[:-1]:
            continue
        if args[args.index("--status-file") + 1] == wanted:
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
