"""What a local job gets before it runs, and what is read of it after: its environment,
built up rather than inherited (:func:`job_environment`); the account names said in
errors; its folder's files, opened through no link (:func:`prepare_job_files`); its
process tree, read from ``/proc``; its temporary folder when it has no namespace of its
own (:func:`job_tmp`); and, for a multi-node job, a port for its ranks to meet on and
what each rank's status file says of its end."""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import psutil
from nbjobs.job_runner import StatusFileError, rank_file, read_status

from nbjobs.accounts import Account, drop_privileges
from nbjobs.cgroups import CgroupError, Cgroups, Group, Limits
from nbjobs.config import LocalBackendConfig, is_service_secret
from nbjobs.storage import open_file_at, open_job_dir

from .base import LaunchSpec, Outcome, status_file_in, write_parameters_file
from .local_cpu import weigh_parent


def alive(pid: int, created: float) -> bool:
    """Whether the process ``pid`` made at ``created`` (not another given its number
    since) is running."""
    try:
        process = psutil.Process(pid)
        return (
            abs(process.create_time() - created) < 0.01 and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def job_tmp(job_id: str, rank: int, owner: tuple[int, int] | None) -> Path | None:
    """The temporary folder (``TMPDIR``) of a job's rank that has no namespace of its own
    (where one has, :mod:`nbjobs.sandbox_init` gives it one that ends with it): a folder
    of the job's account in the machine's, named after the job so that the service
    removes it when the rank ends (:func:`remove_job_tmp`), a restart between included:
    a runner killed hard leaves nothing behind. None: the job keeps the service's (the
    name is taken by a folder that is not the job's)."""
    path = _job_tmp_path(job_id, rank)
    try:
        os.mkdir(path, 0o700)
        if owner is not None:
            os.chown(path, *owner)  # root's new folder in a sticky /tmp: nobody swaps it
    except FileExistsError:
        pass  # the same job started again after a restart: its own, if it is
    except OSError:
        return None
    return path if _closed_folder(path, owner[0] if owner else os.geteuid()) else None


def adopted_job_tmp(job_id: str, rank: int) -> Path | None:
    """The :func:`job_tmp` of a rank a restarted service adopts, if it has one."""
    path = _job_tmp_path(job_id, rank)
    return path if _closed_folder(path) else None


def remove_job_tmp(path: Path | None) -> None:
    """Remove a rank's :func:`job_tmp` with what is in it, once the rank ended (a folder,
    never a link: rmtree walks by descriptors and refuses one)."""
    if path is not None and _closed_folder(path):
        shutil.rmtree(path, ignore_errors=True)


def _job_tmp_path(job_id: str, rank: int) -> Path:
    base = tempfile.gettempdir()
    if len(base) > 40:  # a kernel's sockets go in it: sun_path holds about 100 bytes
        base = "/tmp"
    return Path(base, f"nbjobs-job-{job_id}-{rank}")


def _closed_folder(path: Path, uid: int | None = None) -> bool:
    """Whether ``path`` is a folder (not a link) only its owner may enter, that owner
    ``uid`` when given."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    mine = uid is None or st.st_uid == uid
    return stat.S_ISDIR(st.st_mode) and mine and not st.st_mode & 0o077


class JobRefused(RuntimeError):
    """This job cannot be started here; the message says why and what to do."""


#: What a local job takes from the job service's environment, by name: where programs
#: and libraries are, the language, time zone and temp folder, the Python environment in
#: use. Nothing else; nbjobs.yaml adds more (``backend.local.pass_env`` and ``env``).
JOB_ENV_ALLOWED = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
    }
)
#: ... and every variable whose name starts so (LC_ALL, LC_CTYPE, ...)
JOB_ENV_ALLOWED_PREFIXES = ("LC_",)
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def job_environment(
    spec: LaunchSpec,
    gpus: list[str],
    *,
    home: Path,
    account: Account | None,
    settings: LocalBackendConfig,
    service_env: Mapping[str, str],
) -> dict[str, str]:
    """The whole environment of one local job, built up rather than inherited.

    In order, later wins: the allow-listed variables of the service's environment
    (:data:`JOB_ENV_ALLOWED`, ``LC_*``); ``HOME`` (the user's folder, as their notebook
    server has it) and ``USER``/``LOGNAME``/``SHELL`` of the job's OS account; the
    variables nbjobs.yaml passes on by name (``backend.local.pass_env``) and sets
    (``backend.local.env``); the flavor's ``env``; and what nbjobs sets per job
    (``NBJOBS_JOB_ID``, ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER`` unless set).
    The service's own secrets (:func:`~nbjobs.config.is_service_secret`) are never
    copied, even when listed.
    """
    env = {
        name: value
        for name, value in service_env.items()
        if name in JOB_ENV_ALLOWED or name.startswith(JOB_ENV_ALLOWED_PREFIXES)
    }
    env.setdefault("PATH", _DEFAULT_PATH)
    env["HOME"] = str(home)
    if account is not None:
        env["USER"] = env["LOGNAME"] = account.name
        if account.shell:
            env["SHELL"] = account.shell
    for name in settings.pass_env:
        if name in service_env and not is_service_secret(name):
            env[name] = service_env[name]
    env.update(settings.env)
    env.update(spec.flavor.env)
    # NVML numbers GPUs in PCI bus order, CUDA by default fastest first: make
    # CUDA count like NVML, so the job gets the GPUs it was given.
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    # An empty value hides every GPU: a CPU flavor must not grab one by accident.
    env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    env["NBJOBS_JOB_ID"] = spec.job_id
    if gpus and settings.simulated_gpus:
        env["NBJOBS_SIMULATED_GPUS"] = "1"  # the runner says so in the log and the output
    return env


def descendants(pid: int) -> list[int]:
    """A process's descendants, from /proc/PID/task/*/children where Linux has it (cheap:
    it reads only this tree), else from psutil (which reads every process on the machine)."""
    if not os.path.exists(f"/proc/{pid}/task"):
        return []
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        try:
            return [p.pid for p in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            return []
    found: list[int] = []
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found.extend(children)
            stack.extend(children)
    return found


def account_name(uid: int) -> str:
    try:
        return repr(pwd.getpwuid(uid).pw_name)
    except KeyError:
        return "an account with no name"


def own_account() -> Account | None:
    try:
        return Account.of(pwd.getpwuid(os.getuid()))
    except KeyError:  # a container's uid with no passwd line
        return None


def rank_failed(status_file: Path | None, outcome: Outcome) -> bool:
    """Whether a rank of a multi-node job ended other than in success: by its exit code,
    or (a rank adopted after a restart, whose exit code nobody can learn) by its status
    file; one that ended and left no final word failed."""
    if outcome.exit_code is not None or outcome.state:
        return outcome.exit_code != 0 or bool(outcome.state)
    if status_file is None:
        return False  # nothing to go by: rank 0's status file decides, as for one node
    try:
        status = read_status(status_file)
    except (StatusFileError, OSError):
        return True
    return status is None or status.state != "succeeded"


def status_file_of(pid: int, rank: int) -> Path | None:
    """The status file an adopted rank's runner writes, from its command line (the
    runner of rank k > 0 writes its own, :func:`~nbjobs.job_runner.rank_file`)."""
    try:
        args = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    named = status_file_in(args)
    return rank_file(Path(named), rank) if named is not None else None


def rank_said(status_file: Path | None) -> str | None:
    """What a rank's runner said of its end in its status file (``train.py exited with
    code 3: no shard``), or None when it left none (killed, or adopted after a restart)."""
    if status_file is None:
        return None
    try:
        status = read_status(status_file)
    except (StatusFileError, OSError):
        return None
    return status.message if status is not None else None


def free_port() -> int:
    """A TCP port of this machine free now, where the ranks of a multi-node job meet."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def prepare_job_files(spec: LaunchSpec, owner: tuple[int, int] | None, rank: int = 0) -> int:
    """Open the log of the job's runner of ``rank`` (a descriptor; rank k > 0 of a
    multi-node job has its own, :func:`~nbjobs.job_runner.rank_file`) and, for rank 0,
    write the job's parameters file.

    Nothing is followed through a link: the job folder, the log and the snapshot are
    opened with ``O_NOFOLLOW``. With ``owner`` (run_as: user) the folder, the snapshot,
    the log and the parameters are handed to the job's account, which must write its
    status file and read its notebook there. A folder or file that cannot be prepared
    (a link, say) refuses the job (:class:`JobRefused`), saying so.
    """
    try:
        return _open_job_files(spec, owner, rank)
    except OSError as exc:
        raise JobRefused(
            f"the job's folder {spec.job_dir} could not be prepared ({exc.strerror}: "
            f"{exc.filename}); it and its files must be real files, not links: "
            "re-submit the notebook"
        ) from None


def _open_job_files(spec: LaunchSpec, owner: tuple[int, int] | None, rank: int) -> int:
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    # walked from the user's folder: a link as .nbjobs or .nbjobs/jobs is refused too
    folder = open_job_dir(spec.job_dir)
    try:

        def open_in_folder(path: Path, flags: int, mode: int = 0o600) -> int:
            if path.parent == spec.job_dir:  # never a link, a pipe or a folder
                return open_file_at(folder, path.name, flags, mode)
            return os.open(path, flags | nofollow, mode)

        if owner is not None:
            os.fchown(folder, *owner)
            snapshot = open_in_folder(spec.snapshot_file, os.O_RDONLY)
            try:
                os.fchown(snapshot, *owner)
            finally:
                os.close(snapshot)
        log_file = rank_file(spec.log_file, rank)
        log = open_in_folder(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            if owner is not None:
                os.fchown(log, *owner)
            if rank == 0:  # once, before any rank starts: every rank reads it
                write_parameters_file(spec, owner=owner)
        except BaseException:
            os.close(log)
            raise
    finally:
        os.close(folder)
    return log


def group_prefix(
    group: Group,
    limits: Limits,
    owner: tuple[int, int] | None,
    sandboxed: bool,
    cgroups: Cgroups,
) -> list[str]:
    """Make a rank's control group; the prefix of its command that starts it there."""
    try:
        group.create(limits)
    except CgroupError as exc:
        raise JobRefused(str(exc)) from None
    weigh_parent(cgroups)  # one group more: the jobs' share of the CPU grows
    # in its namespaces the job becomes its account itself: systemd-run stays root
    as_owner = owner if owner and not sandboxed else None
    return group.command_prefix(
        limits, as_owner[0] if as_owner else None, as_owner[1] if as_owner else None
    )


#: what a runner's command starts with when the service puts it in its control group: a
#: shell that waits for "go" on its standard input (the service says it once the shell is
#: in the group; the end of the pipe without it: exit 125), then becomes the runner, its
#: standard input /dev/null, without the variables a shell adds (dash PWD, bash SHLVL)
GATE = [
    "/bin/sh",
    "-c",
    'IFS= read -r go && [ "$go" = go ] || exit 125; '
    'exec /usr/bin/env -u PWD -u OLDPWD -u SHLVL -- "$@" </dev/null',
]
#: variables a shell reads a file of commands from: not in a gated runner's environment
GATE_UNSAFE_ENV = ("ENV", "BASH_ENV")


def start_runner(
    command: list[str],
    log: int,
    cwd: Path,
    env: dict[str, str],
    group: Group | None,
    become: Account | None,
) -> subprocess.Popen[bytes]:
    """Start a rank's runner: in its own session, its output into ``log``, in the job's
    control group and the job's account when given.

    A plain Popen, polled: the job must be able to outlive this service (a restart
    adopts it), which an asyncio subprocess transport does not allow.

    Without an account to become, nothing runs in the child between ``fork`` and
    ``exec``, so Python starts it with ``vfork``: a ``fork`` copies the service's page
    tables (35 ms of a single job's start on a service of a few hundred MB, measured
    with ``bench/overhead_bench.py``). The runner is put in its group from here, before
    it runs: it starts as :data:`GATE`, which waits until it is in the group."""
    if become is not None:
        # a root service whose jobs have no namespace of their own (rare): in the child,
        # before exec, into the job's group while still root, then the account for good

        def enter() -> None:
            if group is not None:
                group.join()
            drop_privileges(become)

        return _popen(command, log, cwd, env, subprocess.DEVNULL, preexec_fn=enter)
    if group is None or group.cgroups.uses_systemd:  # systemd-run puts it there
        return _popen(command, log, cwd, env, subprocess.DEVNULL)
    if shutil.which(command[0], path=env.get("PATH")) is None:
        # as Popen would say: not left to a shell, which would say it only in the log
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])
    held, go = os.pipe()
    try:
        gated = {name: value for name, value in env.items() if name not in GATE_UNSAFE_ENV}
        process = _popen([*GATE, "nbjobs-runner", *command], log, cwd, gated, held)
    except BaseException:
        os.close(go)
        raise
    finally:
        os.close(held)
    try:
        group.join(process.pid)
    except OSError as exc:
        # the shell reads the pipe's end, not "go": it ends without running anything
        os.close(go)
        process.wait()
        raise CgroupError(
            f"the runner could not be put in its control group ({exc.strerror or exc}); "
            "tell your admin: the job service's control groups may have been removed"
        ) from None
    try:
        os.write(go, b"go\n")
    except BrokenPipeError:  # the shell was killed as it waited
        process.wait()
        raise subprocess.SubprocessError(
            f"its first process ended before it began (code {process.returncode})"
        ) from None
    finally:
        os.close(go)
    return process


def _popen(
    command: list[str],
    log: int,
    cwd: Path,
    env: dict[str, str],
    stdin: int,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command,
        stdin=stdin,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
