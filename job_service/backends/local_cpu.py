"""How much CPU nbjobs' jobs get beside the machine's other processes.

Every job's control group lies in the instance's parent group (``nbjobs``): in the
``cpu`` hierarchy of cgroup v1, and on cgroup v2 without systemd, the kernel shares
the CPU between the parent *as one* and each process outside it (each session, where
the kernel groups processes by session: ``sched_autogroup``). Left at the kernel's
default weight, all of nbjobs' jobs together got as much CPU as a single process
outside: on a busy two-core machine eight jobs ran almost three times as long as the
same eight runners started as the backend starts them (each runner, and each kernel,
in a session of its own).

So the parent weighs as much as the processes its groups hold would weigh on their
own: two per group (a job's runner and its kernel, each in a session of its own; a
notebook server and a kernel), set again whenever a job's group is made or removed.
Inside the parent each group keeps the default weight, so the jobs share what they get
equally. One process per group was tried too: a job's start (its runner and its kernel
both busy) then took 1.5 times as long as by hand on a loaded machine. With two, a job
whose kernel alone computes may get up to two processes' part where the machine is
contended: the kernel gives a group's idle part to its busy member. Under systemd
(cgroup v2) groups are scopes in a slice of their own, weighed by systemd: nothing is
changed there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from nbjobs.cgroups import Cgroups, write_control

#: the weight of one process, as the kernel gives it (v1 ``cpu.shares``, v2 ``cpu.weight``)
V1_PROCESS, V2_PROCESS = 1024, 100
#: the most each accepts
V1_MOST, V2_MOST = 262144, 10000
#: processes a group stands for: a runner and its kernel (a server and a kernel)
PER_GROUP = 2


def weight_file(cgroups: Cgroups) -> Path | None:
    """The parent group's CPU weight file, or None where nbjobs leaves it alone (no CPU
    control, or systemd's scopes)."""
    if "cpu" not in cgroups.enforced or cgroups.uses_systemd:
        return None
    if cgroups.version == "v1":
        return cgroups.root / "cpu" / cgroups.parent / "cpu.shares"
    if cgroups.version == "v2":
        return cgroups.root / cgroups.parent / "cpu.weight"
    return None


def parent_weight(cgroups: Cgroups, groups: int) -> int:
    """The weight of a parent holding ``groups`` groups: :data:`PER_GROUP` processes'
    each, at least one process's, at most what the kernel accepts."""
    one, most = (V1_PROCESS, V1_MOST) if cgroups.version == "v1" else (V2_PROCESS, V2_MOST)
    return max(one, min(most, one * PER_GROUP * groups))


def weigh_parent(cgroups: Cgroups) -> int | None:
    """Set the parent group's CPU weight for the groups it holds now (jobs' and notebook
    servers'); the weight set, or None when there is nothing to set (no file: not made
    yet, or no CPU control). Never raises: a weight that cannot be written leaves the
    kernel's, and jobs run as before."""
    path = weight_file(cgroups)
    if path is None:
        return None
    try:
        with os.scandir(path.parent) as entries:
            groups = sum(1 for e in entries if e.is_dir(follow_symlinks=False))
    except OSError:
        return None
    weight = parent_weight(cgroups, groups)
    with contextlib.suppress(OSError):
        write_control(path, str(weight))
        return weight
    return None
