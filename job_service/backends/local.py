"""The local backend: each job is a ``python -m nbjobs.job_runner`` process on this machine.

GPUs are handed out whole through ``CUDA_VISIBLE_DEVICES``; a shared (fractional) flavor
takes one of ``slots_per_gpu`` slots of a GPU that no whole-GPU job holds. Jobs with no
GPU take one of ``cpu_slots``. Jobs run in their own session, so the service can stop a
job's whole process tree (the runner and its kernel) and a service restart leaves them
running, to be adopted again.

A job never inherits the service's environment (under a hub it holds the service's hub
token): it starts from :func:`job_environment`, an allow-list plus what nbjobs.yaml adds.
With ``backend.local.accounts`` every job runs as its owner's own OS account (the one
their notebook server uses; the service runs as root), never as the service's; without, as
the service's account unless ``run_as: user``. Parameters reach the runner in a file of
the job's folder, readable by the job's account alone, never on its command line.

Each job runs in a control group of its own (:mod:`nbjobs.cgroups`): it may open only the
GPU devices it was given, and the flavor's ``memory``, ``cpu`` and ``tasks`` are limits
there; a job the kernel killed for memory ends ``failed`` with "out of memory (limit
8 GiB)", one that failed after the kernel refused it a new process or thread "too many
processes (limit 4096)", and nothing of a job outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pwd
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
from nbjobs.job_runner import ExitCode, rank_file, rendezvous_env
from traitlets import Float, List, Unicode

from nbjobs.accounts import Account, AccountRefused, account_for, prepare_home
from nbjobs.cgroups import CgroupError, Cgroups, Group, Limits, gpu_minors, human_bytes
from nbjobs.config import (
    ConfigError,
    Flavor,
    quantity_bytes,
    quantity_cpus,
)
from nbjobs.sandbox import JOB_TMP, job_command, jobs_can_have_namespaces
from nbjobs.storage import user_folder

from ..kernels import InstalledKernels
from .base import (
    Backend,
    Launched,
    LaunchSpec,
    NodeGpus,
    Outcome,
    Seen,
)
from .local_cpu import weigh_parent
from .local_gpus import discover_gpus, nvml_minor_numbers
from .local_job_setup import (
    JobRefused,
    account_name,
    adopted_job_tmp,
    alive,
    free_port,
    group_prefix,
    job_environment,
    job_tmp,
    own_account,
    prepare_job_files,
    rank_failed,
    rank_said,
    remove_job_tmp,
    start_runner,
    status_file_of,
)
from .local_running import Running
from .local_unrecorded import job_ref, unrecorded_runner
from .local_watch import exited_within, open_exit_watch

#: runners let go while running (LocalBackend._let_go), kept: a dropped live child's Popen warns
_DETACHED: list[subprocess.Popen[bytes]] = []


class LocalBackend(Backend):
    """Jobs as processes of this machine."""

    python = Unicode(sys.executable, help="the Python that runs job_runner").tag(config=True)
    runner_args = List(Unicode(), help="extra job_runner arguments for every job").tag(config=True)
    cancel_grace = Float(10.0, help="seconds a cancelled runner gets to save its output").tag(
        config=True
    )
    poll_interval = Float(0.5, help="seconds between checks of adopted jobs").tag(config=True)
    cgroup_root = Unicode(
        "/sys/fs/cgroup",
        help="where the kernel's control groups are mounted (jobs' GPU devices, memory, CPU)",
    ).tag(config=True)

    def __init__(self, config_file: Any, **kwargs: Any) -> None:
        super().__init__(config_file, **kwargs)
        local = self.nbjobs.backend.local
        self.settings = local
        self._installed_kernels = InstalledKernels()
        if local.jobs_run_as == "user" and os.geteuid() != 0:
            why, instead = (
                ("backend.local.accounts is on, so jobs run", "accounts.mode: none")
                if local.run_as is None
                else ("backend.local.run_as is 'user'", "run_as: service")
            )
            raise ConfigError(
                f"{why}, but the job service runs as {account_name(os.geteuid())} "
                f"(uid {os.geteuid()}), not root, so it cannot start jobs under users' "
                f"accounts; run the service as root, or set {instead}"
            )
        try:
            # the instance's own parent: a sweep never touches another nbjobs's groups
            self.cgroups = Cgroups(
                Path(self.cgroup_root), mode=local.cgroups, parent=local.instance
            )
        except CgroupError as exc:
            raise ConfigError(str(exc)) from None
        # groups of jobs that ended while no service watched them; running ones stay
        self.cgroups.sweep("job-")
        self.isolates_jobs = self._can_isolate_jobs()
        if self.cgroups.unenforced() and local.cgroups != "off":
            self.log.warning("nbjobs: jobs' %s", self.cgroups.summary())
        else:
            self.log.info("nbjobs: jobs' %s", self.cgroups.summary())
        missing = [name for name in local.pass_env if name not in os.environ]
        if missing:
            self.log.warning(
                "nbjobs: backend.local.pass_env names %s, not set in the job service's "
                "environment; jobs get no such variable",
                ", ".join(missing),
            )
        # An admin's list wins (it may keep a GPU for the desktop); "auto" asks NVML.
        self.simulates_gpus = local.simulated_gpus > 0
        if self.simulates_gpus:
            self.gpus = [str(i) for i in range(local.simulated_gpus)]
            self.log.warning(
                "nbjobs: %d simulated GPU(s) (backend.local.simulated_gpus): GPU flavors work "
                "for trying nbjobs out, and nothing computes on a GPU",
                local.simulated_gpus,
            )
        else:
            self.gpus = (
                [str(g) for g in local.gpus] if local.gpus != "auto" else discover_gpus(self.log)
            )
        # an admin's list names GPUs by their /dev/nvidiaN number; NVML's are looked up
        asks_nvml = local.gpus == "auto" and not self.simulates_gpus and bool(self.gpus)
        self.gpu_minors = nvml_minor_numbers() if asks_nvml else {}
        self.slots_per_gpu = local.slots_per_gpu
        self.cpu_slots = local.cpu_slots
        self.running: dict[str, Running] = {}

    def _can_isolate_jobs(self) -> bool:
        """Whether jobs under users' accounts start in namespaces of their own
        (:mod:`nbjobs.sandbox`); said in the log when they cannot."""
        if self.settings.jobs_run_as != "user":
            return False
        why = jobs_can_have_namespaces()
        if why is not None:
            self.log.warning(
                "nbjobs: jobs start without a PID and mount namespace of their own (%s): a "
                "job can see its owner's notebook server and kernels",
                why,
            )
            return False
        return True

    # -- capacity --------------------------------------------------------------

    def can_ever_fit(self, flavor: Flavor) -> str | None:
        if flavor.gpu_count > len(self.gpus):
            have = f"{len(self.gpus)} GPU{'s' if len(self.gpus) != 1 else ''}"
            needs = (
                f"{flavor.nodes} ranks x {flavor.gpus} GPU(s)"
                if flavor.nodes > 1
                else f"{flavor.gpus} GPU(s)"
            )
            return (
                f"flavor {flavor.name!r} needs {needs} and this machine has {have}; "
                "pick a smaller flavor"
            )
        if flavor.gpus == 0 and self.cpu_slots < flavor.nodes:
            return (
                f"flavor {flavor.name!r} runs {flavor.nodes} rank(s) without a GPU and "
                f"cpu_slots is {self.cpu_slots} here"
            )
        return None

    def _all_ranks(self) -> list[Running]:
        return [rank for job in self.running.values() for rank in job.ranks]

    def _holders(self) -> dict[str, list[Running]]:
        holders: dict[str, list[Running]] = {g: [] for g in self.gpus}
        for job in self._all_ranks():
            for gpu in job.gpus:
                holders.setdefault(gpu, []).append(job)
        return holders

    def _open_holders(self) -> dict[str, list[Running]]:
        """:meth:`_holders` of the GPUs a new job may get (not drained)."""
        off = self._drained_gpus()
        return {g: hs for g, hs in self._holders().items() if g not in off}

    @property
    def node(self) -> str:
        """This machine, as the admins' overview names it (and drains it)."""
        return socket.gethostname()

    def _drained_gpus(self) -> set[str]:
        """The GPUs no new job gets: all of them when the machine is drained, else those
        admins drained one by one."""
        if self.node in self.drained:
            return set(self.gpus)
        return {g for node, g in self.drained_gpus if node == self.node and g in self.gpus}

    def _gpus_drained(self) -> bool:
        return bool(self.gpus) and len(self._drained_gpus()) == len(self.gpus)

    def gpu_ids(self, node: str) -> list[str] | None:
        return list(self.gpus) if node == self.node else None

    def maintenance(self, flavor: Flavor) -> str | None:
        if not (flavor.gpus and self.gpus):
            return None
        if self._gpus_drained():
            return (
                "this machine's GPUs are in maintenance: GPU jobs wait until an admin undrains it"
            )
        off = sorted(self._drained_gpus(), key=self.gpus.index)
        if off:
            which = f"GPU{'s' if len(off) > 1 else ''} {', '.join(off)}"
            return f"{len(off)} of {len(self.gpus)} GPUs in maintenance ({which})"
        return None

    def _pick_ranks(self, flavor: Flavor) -> list[list[str]] | None:
        """The GPUs of each rank of a new job of ``flavor`` (one list per node it
        spans), or None when they are not all free now: a multi-node job's ranks start
        together or not at all."""
        gpus = self._pick(flavor)
        if gpus is None:
            return None
        each = flavor.gpus
        return [gpus[n * each : (n + 1) * each] for n in range(flavor.nodes)]

    def _pick(self, flavor: Flavor) -> list[str] | None:
        """The GPUs a new job of ``flavor`` gets, on all its nodes (none for a CPU job),
        or None when they (or its CPU slots) are not free now."""
        if flavor.gpus == 0:
            return [] if self.free_for(flavor) else None
        holders = self._open_holders()
        if flavor.shares_a_gpu:
            # Fill a GPU that already has sharers before opening a new one.
            open_ = [
                g
                for g, hs in holders.items()
                if all(h.shared for h in hs) and len(hs) < self.slots_per_gpu
            ]
            open_.sort(key=lambda g: (-len(holders[g]), self.gpus.index(g)))
            return open_[:1] or None
        free = [g for g, hs in holders.items() if not hs]
        return free[: flavor.gpu_count] if len(free) >= flavor.gpu_count else None

    def free_for(self, flavor: Flavor) -> int:
        if flavor.gpus == 0:
            free = self.cpu_slots - sum(1 for j in self._all_ranks() if not j.gpus)
            return max(0, free) // flavor.nodes
        holders = self._open_holders()
        if flavor.shares_a_gpu:
            return sum(
                self.slots_per_gpu - len(hs) for hs in holders.values() if all(h.shared for h in hs)
            )
        return sum(1 for hs in holders.values() if not hs) // flavor.gpu_count

    def free_gpus(self, flavor: Flavor) -> tuple[int, int] | None:
        if flavor.gpus == 0:
            return None
        holders = self._open_holders()
        if flavor.fraction is not None:
            # a flavor that says its share counts slots, as a cluster's slices are counted
            free = self.free_for(flavor)
            return free, len(self.gpus) * self.slots_per_gpu
        if flavor.shares_a_gpu:
            # a GPU that only sharers hold, with a slot left, still takes a shared job
            free = sum(
                1
                for hs in holders.values()
                if all(h.shared for h in hs) and len(hs) < self.slots_per_gpu
            )
        else:
            free = sum(1 for hs in holders.values() if not hs)
        return free, len(self.gpus)

    def inventory(self) -> list[NodeGpus]:
        """This machine's GPUs: a whole-GPU job holds its GPUs, a shared job one slot
        (1 / slots_per_gpu) of one."""
        if not self.gpus:
            return []
        held = 0.0
        for holders in self._holders().values():
            if any(not h.shared for h in holders):
                held += 1
            else:
                held += min(1.0, len(holders) / self.slots_per_gpu)
        kinds = {f.gpu_type for f in self.nbjobs.flavors if f.gpus and f.gpu_type}
        gpu_type = kinds.pop() if len(kinds) == 1 else "GPU"
        if self.simulates_gpus:
            gpu_type = f"simulated {gpu_type}"
        return [
            NodeGpus(
                self.node,
                gpu_type,
                "local",
                float(len(self.gpus)),
                held,
                drained=self._gpus_drained(),
            )
        ]

    def health(self) -> tuple[bool, str]:
        gpus = f"{len(self.gpus)} GPU(s)" if self.gpus else "no GPU"
        running = len(self.running)
        who = "their owners' accounts" if self.settings.jobs_run_as == "user" else "the service's"
        return True, (
            f"running jobs as processes of this machine ({gpus}, {running} running) under "
            f"{who}; {self.cgroups.summary()}"
        )

    # -- lifecycle -------------------------------------------------------------

    def kernels(self, flavor: Flavor) -> list[str] | None:
        """nbjobs.yaml's list for the flavor, else the kernels installed for the Python
        that runs jobs (known only when that is the service's own Python)."""
        if flavor.kernels or self.python != sys.executable:
            return super().kernels(flavor)
        return self._installed_kernels.names()

    def command(self, spec: LaunchSpec) -> list[str]:
        """The runner's command line for this job (its stdout and stderr are the log)."""
        nbjobs = self.nbjobs
        command = spec.runner_command(self.python, str, nbjobs.limits, nbjobs.telemetry)
        return command + list(self.runner_args)

    def job_account(self, user: str) -> Account | None:
        """The OS account a user's jobs run as; None: the service's.

        With ``backend.local.accounts`` the user's own (made now in ``create`` mode, with
        their folder as its home, as their notebook server's spawn would), else with
        ``run_as: user`` the account named like the hub user. Raises :class:`JobRefused`
        when there is none, or when it is root's.
        """
        if self.settings.jobs_run_as != "user":
            return None
        if self.settings.accounts.mode != "none":
            home = user_folder(self.nbjobs.storage, user)
            try:
                account = account_for(
                    user, self.settings.accounts, home, instance=self.settings.instance
                )
            except AccountRefused as exc:
                raise JobRefused(str(exc)) from None
            assert account is not None
            prepare_home(account, home)
            return account
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise JobRefused(
                f"jobs here run under the submitting user's own OS account "
                f"(backend.local.run_as: user), and this machine has no account named "
                f"{user!r}; ask an admin to create it"
            ) from None
        if entry.pw_uid == 0:
            raise JobRefused(
                f"the OS account {user!r} is root's (uid 0), and nbjobs never runs a job "
                "as root; submit from another account"
            )
        return Account.of(entry)

    def cannot_run_for(self, user: str) -> str | None:
        try:
            self.job_account(user)
        except JobRefused as exc:
            return str(exc)
        return None

    def job_limits(self, flavor: Flavor, gpus: list[str]) -> Limits:
        """What the job's control group allows: the GPU devices it was given (none for a
        CPU flavor), the flavor's memory and CPU, and its tasks (else the machine's)."""
        return Limits(
            memory=quantity_bytes(flavor.memory),
            cpus=quantity_cpus(flavor.cpu),
            gpu_minors=gpu_minors(gpus, self.gpu_minors),
            tasks=flavor.tasks if flavor.tasks is not None else self.settings.tasks,
        )

    def _job_group(self, job_id: str, rank: int = 0) -> Group | None:
        """The control group of a job's rank (rank 0: ``job-ID``; rank k: ``job-ID-rank-k``,
        each rank limited as one node of its flavor); None when groups are not enforced."""
        if not self.cgroups.enforced:
            return None
        return self.cgroups.group(f"job-{job_id}" + (f"-rank-{rank}" if rank else ""))

    async def start(self, spec: LaunchSpec) -> Launched:
        # checked at submit too; the account may have gone since
        account = self.job_account(spec.user)
        picked = self._pick_ranks(spec.flavor)
        if picked is None:
            raise RuntimeError(f"no free capacity for flavor {spec.flavor.name!r}")
        # the ranks of a multi-node job meet at rank 0, on this machine
        port = free_port() if len(picked) > 1 else None
        # On the loop, as before: a start on a thread let several claimed jobs wait
        # for it at once, and a service killed then lost every one of them
        ranks = self._start_ranks(spec, picked, account, port)
        first = ranks[0]
        first.others = ranks[1:]
        self.running[spec.job_id] = first
        ref = job_ref(spec.job_id, [(r.pid, r.created) for r in ranks])
        return Launched(ref=ref, gpus=[gpu for r in ranks for gpu in r.gpus])

    def _start_ranks(
        self, spec: LaunchSpec, picked: list[list[str]], account: Account | None, port: int | None
    ) -> list[Running]:
        """Start every rank's runner, or none."""
        ranks: list[Running] = []
        try:
            for rank, gpus in enumerate(picked):
                ranks.append(self._start_rank(spec, rank, len(picked), gpus, account, port))
        except BaseException:
            self._abandon(ranks)
            raise
        return ranks

    def _abandon(self, ranks: list[Running]) -> None:
        """Stop the runners of a job whose other ranks could not start, their groups and
        temporary folders."""
        for started in ranks:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(started.pid, signal.SIGKILL)
            if started.process is not None:  # reaped: a dropped Popen of a live child warns
                with contextlib.suppress(subprocess.TimeoutExpired):
                    started.process.wait(timeout=5)
            started.leave_nothing(self.log)
            self._close_group(started)

    def _start_rank(
        self,
        spec: LaunchSpec,
        rank: int,
        nodes: int,
        gpus: list[str],
        account: Account | None,
        port: int | None,
    ) -> Running:
        """Start one rank's runner (the job's only one, for one node) under the job's
        account, in its own control group, with its own log."""
        own = account if account is not None else own_account()
        env = job_environment(
            spec,
            gpus,
            home=user_folder(self.nbjobs.storage, spec.user),
            account=own,
            settings=self.settings,
            service_env=os.environ,
        )
        if port is not None:
            env.update(rendezvous_env(rank, nodes, "127.0.0.1", port))
        owner = (account.uid, account.gid) if account is not None else None
        sandboxed = account is not None and self.isolates_jobs
        limits = self.job_limits(spec.flavor, gpus)
        group = self._job_group(spec.job_id, rank)
        prefix = group_prefix(group, limits, owner, sandboxed, self.cgroups) if group else []
        try:
            log = prepare_job_files(spec, owner, rank)
        except JobRefused:
            if group is not None:
                group.remove()
            raise
        become = account if (account is not None and not prefix and not sandboxed) else None
        command = self.command(spec)
        # its own temporary folder, gone with the job: in its namespace, or made here
        tmp = None if sandboxed else job_tmp(spec.job_id, rank, owner)
        if tmp is not None:
            env["TMPDIR"] = str(tmp)
        if sandboxed:
            assert account is not None
            command = job_command(account, command, tmp=JOB_TMP)
        try:
            process = start_runner([*prefix, *command], log, spec.cwd, env, group, become)
        except (PermissionError, subprocess.SubprocessError, CgroupError) as exc:
            remove_job_tmp(tmp)
            if group is not None:
                group.remove()
            if isinstance(exc, CgroupError):  # not put in its group: it ran nothing
                raise JobRefused(str(exc)) from None
            if account is None and isinstance(exc, PermissionError):
                raise
            raise JobRefused(
                f"the runner could not start as {own.name if own else 'this account'!r}: "
                f"{getattr(exc, 'strerror', None) or exc} ({self.python}); the Python that runs "
                "jobs (c.LocalBackend.python) and the job's folder must be open to every "
                "user's account"
            ) from None
        finally:
            os.close(log)
        self.log.info(
            "job %s: runner%s pid %s on GPUs [%s] as %s (%s)",
            spec.job_id,
            f" of rank {rank} of {nodes}" if nodes > 1 else "",
            process.pid,
            ",".join(gpus),
            own.name if own else f"uid {os.getuid()}",
            limits.describe() if group is not None else "no control group",
        )
        return Running(
            spec.job_id,
            process.pid,
            psutil.Process(process.pid).create_time(),
            gpus,
            spec.flavor.shares_a_gpu,
            process,
            group=group,
            status_file=rank_file(spec.status_file, rank),
            tmp=tmp,
        )

    def _lookup(self, ref: str) -> Running | None:
        return self.running.get(ref.split(":", 1)[0])

    async def wait(self, ref: str) -> Outcome:
        job = self._lookup(ref)
        if job is None:
            return Outcome(None, "the job's process was not known to this service")
        if not job.others:
            return await self._wait_rank(job)
        return await self._wait_ranks(job.ranks)

    async def _wait_ranks(self, ranks: list[Running]) -> Outcome:
        """Wait for every rank of a multi-node job. When one fails (or is stopped), the
        others cannot go on without it (their rendezvous is broken): they are stopped,
        and the job ends with what became of the first that failed. Rank 0's outcome
        otherwise (its status file is the job's)."""
        waits = {asyncio.ensure_future(self._wait_rank(r)): n for n, r in enumerate(ranks)}
        outcomes: dict[int, Outcome] = {}
        failed: int | None = None
        pending = set(waits)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=waits.__getitem__):
                    rank = waits[task]
                    outcomes[rank] = task.result()
                    if failed is None and rank_failed(ranks[rank].status_file, outcomes[rank]):
                        failed = rank
                if failed is not None and pending:
                    self.log.info(
                        "job %s: rank %s ended first (%s); stopping the other ranks",
                        ranks[0].job_id,
                        failed,
                        outcomes[failed].message or f"exit code {outcomes[failed].exit_code}",
                    )
                    await asyncio.gather(*(self._stop(ranks[waits[t]]) for t in pending))
        finally:
            for task in pending:  # this wait was cancelled (the service stops): so are they
                task.cancel()
        if failed is None or failed == 0 or ranks[0].stopping:
            return outcomes[0]
        said = outcomes[failed]
        if said.exit_code == ExitCode.TIMED_OUT:
            return Outcome(
                said.exit_code,
                f"rank {failed} of {len(ranks)} reached the job's time limit; the other "
                "ranks were stopped",
                state="timed_out",
            )
        what = rank_said(ranks[failed].status_file) or said.message
        if what is None:
            what = f"exit code {said.exit_code}" if said.exit_code is not None else "no exit code"
        return Outcome(
            said.exit_code,
            f"rank {failed} of {len(ranks)} failed ({what}); the other ranks were stopped; "
            f"see the log of rank {failed}",
            state="failed",
        )

    async def _wait_rank(self, job: Running) -> Outcome:
        """Wait for one runner (a job's, or one rank's) to end; what became of it."""
        if job.process is not None:
            while (code := job.process.poll()) is None:
                job.note_tree()
                await self._exited_or_timeout(job)
        else:
            while alive(job.pid, job.created):
                job.note_tree()
                await self._exited_or_timeout(job)
            code = None
        job.leave_nothing(self.log)
        limit_hit = self._close_group(job, Outcome(code))
        if limit_hit is not None:
            return Outcome(code, limit_hit, state="failed")
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return Outcome(code, f"the runner was killed by {name}")
        return Outcome(code)

    def _close_group(self, job: Running, ended: Outcome | None = None) -> str | None:
        """Stop what is left in the ended job's group and remove the group; "out of memory
        (limit 8 GiB)" when the kernel killed a process of the job for passing its
        flavor's memory, "too many processes (limit 4096)" when the job ``ended`` in
        failure after the kernel refused it a process or thread (None otherwise: a job
        that caught the refusal and succeeded stays a success)."""
        group = job.group
        if group is None:
            return None
        try:
            if group.oom_kills():
                limit = group.memory_limit()
                shown = human_bytes(limit) if limit is not None else "none"
                return (
                    f"out of memory (limit {shown}): the job used all its flavor's memory; "
                    "use less, or pick a flavor with more"
                )
            if (
                ended is not None
                and group.task_limit_hits()
                and rank_failed(job.status_file, ended)
            ):
                return (
                    f"too many processes (limit {group.task_limit() or 'none'}): the job "
                    "held as many processes and threads as its flavor allows, and a new one "
                    "was refused; start fewer (a DataLoader's num_workers, a pool's size), "
                    "or pick a flavor with more"
                )
            return None
        finally:
            group.kill_all()
            group.remove()
            weigh_parent(self.cgroups)

    async def _exited_or_timeout(self, job: Running) -> None:
        """Sleep until the runner exits, or poll_interval (to note its process tree).

        On Linux a pidfd says at once when the process ends (child or adopted), so
        a finished job frees its GPUs without waiting for the next poll.
        """
        if job.pidfd is None:
            job.pidfd = open_exit_watch(job.pid)
        if job.pidfd < 0:
            await asyncio.sleep(self.poll_interval)
            return
        fd = job.pidfd  # release() may close it meanwhile (the service stops)
        if await exited_within(fd, self.poll_interval) and job.pidfd == fd:
            os.close(fd)
            job.pidfd = -1

    async def cancel(self, ref: str) -> None:
        job = self._lookup(ref)
        if job is not None:
            job.stopping = True
            await asyncio.gather(*(self._stop(rank) for rank in job.ranks))

    async def _stop(self, job: Running) -> None:
        """Stop one runner: SIGTERM (it saves its output), SIGKILL after the grace."""
        if not alive(job.pid, job.created):
            return
        job.note_tree()
        with contextlib.suppress(ProcessLookupError):
            os.kill(job.pid, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cancel_grace
        while loop.time() < deadline and alive(job.pid, job.created):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        if alive(job.pid, job.created):
            self.log.warning("job %s: runner ignored SIGTERM; killing its tree", job.job_id)
            with contextlib.suppress(ProcessLookupError):
                os.kill(job.pid, signal.SIGKILL)
        job.kill_leftovers(self.log)

    def adopt(self, ref: str, gpus: list[str], flavor: Flavor) -> bool:
        """Take back a job after a restart: ``JOB:PID:CREATED``, with ``:PID:CREATED`` more
        for each further rank of a multi-node job (all alive, or the job is lost: a rank
        that ended while nobody watched cannot be told from one that failed)."""
        job_id, _, rest = ref.partition(":")
        words = rest.split(":")
        try:
            processes = [(int(p), float(c)) for p, c in zip(words[::2], words[1::2], strict=True)]
        except ValueError:
            return False
        up = [alive(p, c) for p, c in processes]
        if not processes or not all(up):
            for (pid, _), rank_up in zip(processes, up, strict=True):
                if rank_up:  # a rank without the others can only wait: its GPUs go back
                    self.log.warning(
                        "job %s: a rank ended while no service watched; stopping the "
                        "rank left (pid %s)",
                        job_id,
                        pid,
                    )
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
            return False  # the service calls lost(): what it left goes
        each = len(gpus) // len(processes)
        ranks = [
            Running(
                job_id,
                pid,
                created,
                list(gpus[n * each : (n + 1) * each]),
                flavor.shares_a_gpu,
                group=self._job_group(job_id, n),
                status_file=status_file_of(pid, n) if len(processes) > 1 else None,
                tmp=adopted_job_tmp(job_id, n),
            )
            for n, (pid, created) in enumerate(processes)
        ]
        ranks[0].others = ranks[1:]
        self.running[job_id] = ranks[0]
        return True

    def lost(self, job_id: str) -> None:
        """Each rank's control group, with what is left in it (a kernel still starting
        as its runner died, say: one left running makes its folder again; a runner whose
        flavor is gone, which saves its output on SIGTERM, as for a cancel), then its
        temporary folder; ranks are counted until one has neither."""
        for rank in itertools.count():
            group = self._job_group(job_id, rank)
            tmp = adopted_job_tmp(job_id, rank)
            held = group is not None and any(p.exists() for p in group.paths().values())
            if tmp is None and not held:
                return
            if group is not None:
                group.kill_all(grace=self.cancel_grace)
                group.remove()
            remove_job_tmp(tmp)

    def seen(self, ref: str) -> Seen | None:
        # every job runs here: the follower records this machine at once (an adopted
        # job's too)
        return Seen(node=self.node)

    def unrecorded_start(self, job_id: str, status_file: Path) -> tuple[str, list[str]] | None:
        return unrecorded_runner(job_id, status_file, self._job_group(job_id), self.gpus, self.log)

    async def shutdown(self) -> None:
        for job in self._all_ranks():
            self._let_go(job)

    def release(self, ref: str) -> None:
        released = self.running.pop(ref.split(":", 1)[0], None)
        for job in released.ranks if released is not None else []:
            if job.pidfd is not None and job.pidfd >= 0:
                with contextlib.suppress(OSError):
                    os.close(job.pidfd)
                job.pidfd = -1
            self._let_go(job)

    def _let_go(self, job: Running) -> None:
        """A rank nobody here watches any more (the service stops). Still running, it goes
        on, its Popen kept (dropping it would count as losing a child) for the next service
        to adopt; ended just now, its wait cut short (a cancel, its last cell), it leaves no
        kernel and no TMPDIR behind, as its wait would have seen to."""
        if not job.alive():
            job.leave_nothing(self.log)
        elif job.process is not None:
            _DETACHED.append(job.process)
