"""What the local backend knows of one runner it started or adopted: its process, the
processes it started (kernels live in sessions of their own and outlive a killed runner,
so they are remembered as they appear), its control group and temporary folder."""

from __future__ import annotations

import contextlib
import logging
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from nbjobs.cgroups import Group

from .local_job_setup import alive, descendants, remove_job_tmp


@dataclass
class Running:
    """One runner of the local backend: a job's, or one rank's of a multi-node job."""

    job_id: str
    pid: int
    created: float
    gpus: list[str]
    shared: bool
    process: subprocess.Popen[bytes] | None = None
    #: every process of the job's tree seen so far, (pid, create_time)
    tree: set[tuple[int, float]] = field(default_factory=set)
    #: a Linux pidfd that becomes readable when the runner exits (-1: none, poll)
    pidfd: int | None = None
    #: the job's control group (devices, memory, CPU, tasks)
    group: Group | None = None
    #: the service cancels the job (its ranks' ends are that, not a rank's failure)
    stopping: bool = False
    #: the runner's status file (a rank's own, for rank k > 0 of a multi-node job), for
    #: how a rank ended (None: not known)
    status_file: Path | None = None
    #: its temporary folder outside a namespace, removed as it ends (local_job_setup.job_tmp)
    tmp: Path | None = None
    #: the job's other ranks (a multi-node flavor: rank 1 onwards, each its own runner,
    #: GPUs and control group); this one is rank 0
    others: list[Running] = field(default_factory=list)

    @property
    def ranks(self) -> list[Running]:
        """Every rank of the job, rank 0 first."""
        return [self, *self.others]

    def alive(self) -> bool:
        """Whether the runner still runs (a child not yet reaped counts as ended)."""
        if self.process is not None:
            return self.process.poll() is None
        return alive(self.pid, self.created)

    def note_tree(self) -> None:
        """Remember the runner's descendants as they are now: once it is killed, its
        kernels are found from this list, not from the (dead) parent."""
        for pid in descendants(self.pid):
            with contextlib.suppress(psutil.Error):
                self.tree.add((pid, psutil.Process(pid).create_time()))

    def kill_leftovers(self, log: logging.Logger | logging.LoggerAdapter) -> None:
        """Kill what the runner started that still runs (once it is stopped or ended)."""
        for pid, created in self.tree:
            if alive(pid, created):
                log.info("job %s: stopping leftover process %s", self.job_id, pid)
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()

    def leave_nothing(self, log: logging.Logger | logging.LoggerAdapter) -> None:
        """After the runner ended: nothing it started runs on, then its temporary folder
        goes. In that order: a kernel the runner left starting (killed as it launched it,
        before any look at its tree) that finds its connection file gone makes the folder
        again to write one (ipykernel does), and leaves it there for good; its control
        group knows it when the tree noted so far does not."""
        self.kill_leftovers(log)
        if self.group is not None:
            self.group.kill_all()  # returns once they are gone
        remove_job_tmp(self.tmp)
