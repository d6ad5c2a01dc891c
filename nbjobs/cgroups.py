"""Kernel control groups for notebook servers and jobs on one machine.

A pod on a cluster gets exactly its GPUs, its memory and its CPU from the
container runtime. On one machine nbjobs asks the kernel for the same, per
notebook server and per job, through control groups:

- **GPU devices**: NVIDIA GPUs are character devices of major 195
  (``/dev/nvidia0`` is 195:0, ``/dev/nvidiactl`` 195:255). A notebook server's
  group may open none of them; a job's group only the minors of the GPUs it was
  given (and the control devices). ``CUDA_VISIBLE_DEVICES`` is then advice to
  CUDA, not the lock: a job that resets it still opens only its own GPUs.
- **memory**: a limit in bytes; past it the kernel kills a process of the group
  (the biggest: usually the kernel of the notebook) and counts an OOM kill,
  which nbjobs reads back to say "out of memory (limit 8 GiB)".
- **CPU**: a quota of cores per period.
- **tasks**: the most processes and threads the group may hold at once (the
  ``pids`` controller); past it ``fork`` and ``clone`` fail (``EAGAIN``), so one
  fork bomb cannot take every process slot of the machine. The kernel counts each
  refusal, which nbjobs reads back to say "too many processes (limit 4096)".

Three kinds of machines:

- cgroup **v1** (the ``devices``, ``memory``, ``cpu`` and ``pids`` hierarchies): all,
  by writing the group's files; a process joins its group before it runs the
  user's program (:meth:`Group.join`).
- cgroup **v2** with **systemd** as PID 1: the process starts through
  ``systemd-run --scope`` with ``DevicePolicy``/``DeviceAllow``, ``MemoryMax``,
  ``CPUQuota`` and ``TasksMax`` (v2 has no device files; systemd attaches the device
  filter).
- cgroup **v2 without systemd**: memory, CPU and tasks through the group's files; GPU
  devices are not enforced, and :meth:`Cgroups.unenforced` says so.

:class:`Cgroups` finds which, once; :meth:`Cgroups.group` names one group per
server or job (deterministic: a restarted service finds its jobs' groups again).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: the character-device major of NVIDIA's GPUs and control devices
NVIDIA_MAJOR = 195
#: minors of NVIDIA's control devices (nvidiactl, nvidia-modeset): every GPU job needs them
NVIDIA_CONTROL_MINORS = (255, 254)
#: what nbjobs enforces through control groups
FEATURES = ("devices", "memory", "cpu", "pids")
#: the CFS period the CPU quota is counted in (microseconds)
CPU_PERIOD_US = 100_000
#: seconds :meth:`Group.kill_all` waits at most for SIGKILLed processes to be gone
GONE_WAIT = 1.0
_V1_CONTROLLERS = {"devices": "devices", "memory": "memory", "cpu": "cpu", "pids": "pids"}


@dataclass(frozen=True)
class Limits:
    """What one group may use. None: no rule of that kind."""

    #: bytes of memory (RSS and page cache) before the kernel kills
    memory: int | None = None
    #: cores (0.5: half of one)
    cpus: float | None = None
    #: minors of the GPU devices (major 195) the group may open; ``()``: none at all
    gpu_minors: tuple[int, ...] | None = None
    #: processes and threads at once (each thread is a task); past it new ones fail
    tasks: int | None = None

    def describe(self) -> str:
        """The limits in words, for logs."""
        parts = []
        if self.gpu_minors is not None:
            shown = ",".join(f"/dev/nvidia{m}" for m in self.gpu_minors) or "no GPU device"
            parts.append(shown)
        if self.memory is not None:
            parts.append(f"memory {human_bytes(self.memory)}")
        if self.cpus is not None:
            parts.append(f"{self.cpus:g} CPU")
        if self.tasks is not None:
            parts.append(f"{self.tasks} tasks")
        return ", ".join(parts) or "no limits"


def human_bytes(size: int) -> str:
    """``8 GiB``, ``512 MiB``: a memory limit as people read it."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:g} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{size} B"  # pragma: no cover


class CgroupError(RuntimeError):
    """A control group could not be set up; the message names the file and the reason."""


class Cgroups:
    """This machine's control groups, as nbjobs uses them.

    ``root`` is where cgroup file systems are mounted (``/sys/fs/cgroup``); tests and
    unusual machines pass another. ``mode`` is ``backend.local.cgroups``: ``off`` uses
    none, ``auto`` what there is, ``required`` refuses (:class:`CgroupError`) a machine
    that cannot enforce all of :data:`FEATURES`.
    """

    def __init__(
        self,
        root: Path = Path("/sys/fs/cgroup"),
        mode: Literal["auto", "required", "off"] = "auto",
        *,
        parent: str = "nbjobs",
        systemd: bool | None = None,
    ) -> None:
        self.root = root
        self.parent = parent
        self.version: Literal["v1", "v2"] | None = None
        self.systemd = _systemd_is_init() if systemd is None else systemd
        self.enforced: tuple[str, ...] = ()
        self.reason = ""
        if mode != "off":
            self._detect()
        else:
            self.reason = "backend.local.cgroups is off"
        if mode == "required" and self.unenforced():
            raise CgroupError(
                f"backend.local.cgroups is required, and this machine cannot enforce "
                f"{', '.join(self.unenforced())} ({self.reason}); set it to auto to run anyway"
            )

    def _detect(self) -> None:
        if os.geteuid() != 0:
            self.reason = "nbjobs does not run as root"
            return
        if (self.root / "cgroup.controllers").is_file():
            self.version = "v2"
            if self.systemd:
                self.enforced = FEATURES
                return
            available = (self.root / "cgroup.controllers").read_text().split()
            self.enforced = tuple(f for f in ("memory", "cpu", "pids") if f in available)
            self.reason = "cgroup v2 without systemd has no device files"
            return
        found = tuple(
            feature
            for feature, controller in _V1_CONTROLLERS.items()
            if os.access(self.root / controller, os.W_OK)
        )
        if found:
            self.version = "v1"
            self.enforced = found
            if len(found) < len(FEATURES):
                self.reason = "cgroup v1 without those controllers mounted"
        else:
            self.reason = f"no cgroup controllers are mounted at {self.root}"

    def unenforced(self) -> list[str]:
        """What this machine cannot enforce, of :data:`FEATURES`."""
        return [f for f in FEATURES if f not in self.enforced]

    def summary(self) -> str:
        """One line for the service's start and the dashboard's backend health."""
        if not self.enforced:
            every = [_WORDS[f] for f in FEATURES]
            return f"{', '.join(every[:-1])} and {every[-1]} are not enforced ({self.reason})"
        how = f"cgroup {self.version}" + (" through systemd" if self.uses_systemd else "")
        line = f"{', '.join(_WORDS[f] for f in self.enforced)} enforced ({how})"
        missing = self.unenforced()
        if missing:
            line += f"; not enforced: {', '.join(_WORDS[f] for f in missing)} ({self.reason})"
        return line

    @property
    def uses_systemd(self) -> bool:
        """Groups are systemd scopes (cgroup v2 under systemd)."""
        return self.version == "v2" and self.systemd

    def sweep(self, prefix: str, older_than: float = 60.0) -> int:
        """Remove the empty groups whose names start with ``prefix`` (``job-``): those of
        jobs that ended while nobody watched (a service restart). A group with a process
        in it stays (the kernel refuses to remove it), and so does one made in the last
        ``older_than`` seconds (another service may be starting its job). How many were
        removed."""
        made_before = time.time() - older_than
        removed = 0
        for parent in self.parent_folders():
            try:
                children = [c for c in parent.iterdir() if c.is_dir()]
            except OSError:
                continue
            for child in children:
                if child.name.startswith(prefix):
                    try:
                        if child.stat().st_mtime > made_before:
                            continue
                        child.rmdir()
                        removed += 1
                    except OSError:
                        pass
        return removed

    def parent_folders(self) -> list[Path]:
        """The folders that hold nbjobs' groups (one per v1 hierarchy); none under systemd,
        which collects its scopes itself."""
        if self.uses_systemd or not self.enforced:
            return []
        return sorted({p.parent for p in self.group("any").paths().values()})

    def group(self, name: str) -> Group:
        """The group called ``name`` (``job-<id>``, ``server-<account>``), not made yet."""
        if not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"a control group name is letters, digits, '-' and '_': {name!r}")
        return Group(self, name)


_WORDS = {"devices": "GPU devices", "memory": "memory", "cpu": "CPU", "pids": "tasks"}


class Group:
    """One notebook server's or one job's control group."""

    def __init__(self, cgroups: Cgroups, name: str) -> None:
        self.cgroups = cgroups
        self.name = name

    # -- where it lives --------------------------------------------------------

    @property
    def unit(self) -> str:
        """The systemd scope's name (cgroup v2 under systemd)."""
        return f"{self.cgroups.parent}-{self.name}.scope"

    def paths(self) -> dict[str, Path]:
        """The group's folder per feature (v1: one per hierarchy; v2: one for all)."""
        cg = self.cgroups
        if cg.version == "v1":
            return {
                feature: cg.root / _V1_CONTROLLERS[feature] / cg.parent / self.name
                for feature in cg.enforced
            }
        if cg.version == "v2":
            folder = (
                cg.root / f"{cg.parent}.slice" / self.unit
                if cg.uses_systemd
                else cg.root / cg.parent / self.name
            )
            return {feature: folder for feature in cg.enforced}
        return {}

    # -- making it -------------------------------------------------------------

    def create(self, limits: Limits) -> None:
        """Make the group with ``limits`` (again, if a stale one is left); no process in it.

        Under systemd (cgroup v2) nothing is made here: :meth:`command_prefix` starts the
        process in a scope that carries the limits.
        """
        cg = self.cgroups
        if cg.uses_systemd or not cg.enforced:
            return
        try:
            if cg.version == "v2":
                self._create_v2(limits)
            else:
                self._create_v1(limits)
        except OSError as exc:
            raise CgroupError(
                f"the control group {self.name!r} could not be set up ({exc.strerror}: "
                f"{exc.filename}); set backend.local.cgroups: off to run without them"
            ) from exc

    def _create_v1(self, limits: Limits) -> None:
        paths = self.paths()
        for folder in paths.values():
            folder.mkdir(parents=True, exist_ok=True)
        if "devices" in paths and limits.gpu_minors is not None:
            deny = paths["devices"] / "devices.deny"
            if not limits.gpu_minors:
                write_control(deny, f"c {NVIDIA_MAJOR}:* rwm")
            else:
                # v1 starts from "allow all": without a way to re-allow one minor under a
                # wildcard, every other GPU minor is denied one by one
                given = set(limits.gpu_minors) | set(NVIDIA_CONTROL_MINORS)
                for minor in range(256):
                    if minor not in given:
                        write_control(deny, f"c {NVIDIA_MAJOR}:{minor} rwm")
        if "memory" in paths and limits.memory is not None:
            folder = paths["memory"]
            write_control(folder / "memory.limit_in_bytes", str(limits.memory))
            # with swap accounting, swap counts too: the limit is not escaped into swap
            with contextlib.suppress(OSError):
                write_control(folder / "memory.memsw.limit_in_bytes", str(limits.memory))
        if "cpu" in paths and limits.cpus is not None:
            folder = paths["cpu"]
            write_control(folder / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            write_control(
                folder / "cpu.cfs_quota_us", str(max(1000, int(limits.cpus * CPU_PERIOD_US)))
            )
        if "pids" in paths:
            # "max" again for a stale group of the same name that had a limit
            write_control(paths["pids"] / "pids.max", _tasks_text(limits.tasks))

    def _create_v2(self, limits: Limits) -> None:
        cg = self.cgroups
        parent = cg.root / cg.parent
        parent.mkdir(exist_ok=True)
        wanted = " ".join(f"+{f}" for f in cg.enforced)
        with contextlib.suppress(OSError):  # already on, or delegated above us
            write_control(cg.root / "cgroup.subtree_control", wanted)
        write_control(parent / "cgroup.subtree_control", wanted)
        folder = parent / self.name
        folder.mkdir(exist_ok=True)
        if limits.memory is not None:
            write_control(folder / "memory.max", str(limits.memory))
            with contextlib.suppress(OSError):
                write_control(folder / "memory.swap.max", "0")
        if limits.cpus is not None:
            quota = max(1000, int(limits.cpus * CPU_PERIOD_US))
            write_control(folder / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        if "pids" in cg.enforced:
            write_control(folder / "pids.max", _tasks_text(limits.tasks))

    def command_prefix(self, limits: Limits, uid: int | None, gid: int | None) -> list[str]:
        """Under systemd (cgroup v2): the ``systemd-run`` words that start a command in this
        group's scope, as ``uid``/``gid``; elsewhere nothing (the process :meth:`join` s)."""
        cg = self.cgroups
        if not cg.uses_systemd:
            return []
        words = ["systemd-run", "--scope", "--quiet", "--collect", f"--unit={self.unit}"]
        words.append(f"--slice={cg.parent}.slice")
        if limits.gpu_minors is not None:
            # closed: the standard pseudo-devices and what is listed; ptys for terminals
            words += ["-p", "DevicePolicy=closed", "-p", "DeviceAllow=char-pts rw"]
            words += ["-p", "DeviceAllow=/dev/tty rw", "-p", "DeviceAllow=/dev/ptmx rw"]
            if limits.gpu_minors:
                words += ["-p", "DeviceAllow=/dev/nvidiactl rw"]
                words += ["-p", "DeviceAllow=/dev/nvidia-uvm rw"]
                words += ["-p", "DeviceAllow=/dev/nvidia-uvm-tools rw"]
                words += ["-p", "DeviceAllow=char-nvidia-caps r"]
                for minor in limits.gpu_minors:
                    words += ["-p", f"DeviceAllow=/dev/nvidia{minor} rw"]
        if limits.memory is not None:
            words += ["-p", f"MemoryMax={limits.memory}", "-p", "MemorySwapMax=0"]
        if limits.cpus is not None:
            words += ["-p", f"CPUQuota={round(limits.cpus * 100)}%"]
        if limits.tasks is not None:
            words += ["-p", f"TasksMax={limits.tasks}"]
        if uid is not None:
            words.append(f"--uid={uid}")
        if gid is not None:
            words.append(f"--gid={gid}")
        return [*words, "--"]

    def join(self, pid: int | None = None) -> None:
        """Put process ``pid`` (default: this one) into the group, in every hierarchy.

        Called in the child between ``fork`` and ``exec``, while it is still root, so
        that nothing of the user's runs outside the group, not even for a moment.
        Only ``os`` calls: no lock another thread may hold.
        """
        text = str(pid if pid is not None else os.getpid()).encode()
        if self.cgroups.uses_systemd:
            return
        for folder in set(self.paths().values()):
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)

    # -- reading it back -------------------------------------------------------

    def pids(self) -> list[int]:
        """Every process in the group now."""
        found: set[int] = set()
        for folder in set(self.paths().values()):
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return sorted(found)

    def oom_kills(self) -> int:
        """How many processes the kernel killed for passing the memory limit."""
        folder = self.paths().get("memory")
        if folder is None:
            return 0
        name = "memory.oom_control" if self.cgroups.version == "v1" else "memory.events"
        try:
            lines = (folder / name).read_text().splitlines()
        except OSError:
            return 0
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        if self.cgroups.version == "v1":  # kernels before 4.13 count only hits of the limit
            with contextlib.suppress(OSError, ValueError):
                return int((folder / "memory.failcnt").read_text()) and 1
        return 0

    def memory_limit(self) -> int | None:
        """The group's memory limit in bytes, as the kernel holds it; None: none."""
        folder = self.paths().get("memory")
        if folder is None:
            return None
        name = "memory.limit_in_bytes" if self.cgroups.version == "v1" else "memory.max"
        try:
            text = (folder / name).read_text().strip()
        except OSError:
            return None
        if text == "max" or int(text) >= 2**62:
            return None
        return int(text)

    def task_limit_hits(self) -> int:
        """How many times a new process or thread of the group was refused for passing
        its task limit (``pids.events``' ``max``; 0 where not enforced)."""
        folder = self.paths().get("pids")
        if folder is None:
            return 0
        try:
            lines = (folder / "pids.events").read_text().splitlines()
        except OSError:
            return 0
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "max":
                return int(value)
        return 0

    def task_limit(self) -> int | None:
        """The group's task limit, as the kernel holds it; None: none."""
        folder = self.paths().get("pids")
        if folder is None:
            return None
        try:
            text = (folder / "pids.max").read_text().strip()
        except OSError:
            return None
        return None if text == "max" else int(text)

    # -- ending it -------------------------------------------------------------

    def kill_all(self, grace: float = 0.0) -> None:
        """Stop every process left in the group (a kernel, a forked daemon): nothing of a
        job outlives it. SIGTERM first when given a ``grace`` (seconds), then SIGKILL;
        returns once the group is empty (SIGKILLed processes are gone within
        milliseconds; :data:`GONE_WAIT` at most, for one stuck in the kernel), so that
        what follows (removing the job's folders, the group) finds nothing of it
        running."""
        for sig in (signal.SIGTERM, signal.SIGKILL) if grace else (signal.SIGKILL,):
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + (grace if sig == signal.SIGTERM else GONE_WAIT)
            pause = 0.05 if sig == signal.SIGTERM else 0.005
            while self.pids() and time.monotonic() < deadline:
                time.sleep(pause)

    def remove(self) -> None:
        """Remove the group, once no process is left in it (the kernel refuses before)."""
        if self.cgroups.uses_systemd:
            return  # --collect: systemd removes the scope when it empties
        for folder in set(self.paths().values()):
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while the last process is still being reaped
                    time.sleep(0.02)


def write_control(path: Path, text: str) -> None:
    """Write ``text`` to the control file ``path`` (one write, as the kernel wants it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _tasks_text(tasks: int | None) -> str:
    return "max" if tasks is None else str(tasks)


def _systemd_is_init() -> bool:
    return Path("/run/systemd/system").is_dir()


def gpu_minors(gpus: Iterable[str], minors: dict[str, int] | None = None) -> tuple[int, ...]:
    """The device minors of GPUs given by index (``"0"``, ``"3"``): NVML's minor numbers
    where known, else the index itself (``/dev/nvidiaN`` for GPU N, the usual case)."""
    known = minors or {}
    return tuple(sorted(known.get(g, int(g)) for g in gpus))
