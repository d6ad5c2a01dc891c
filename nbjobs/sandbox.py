"""What keeps a user's jobs and notebook servers from reaching each other's secrets on
one machine, where both run as the user's own OS account.

Two rules, one for each side:

- **Notebook servers** keep their runtime files (the server's own token file, kernels'
  connection files) and their kernels' sockets in a folder of their own under
  :data:`SERVERS_RUNTIME` (``/run/nbjobs/servers/<uid>-XXXX``, mode ``0700``), and their
  kernels listen on Unix sockets there, not on loopback TCP ports: no other account
  can connect to a kernel, not even to read its output (:func:`server_runtime_folder`).
- **Jobs** start in a PID and mount namespace of their own
  (:mod:`nbjobs.sandbox_init`): they see neither the server's processes (its
  environment holds its hub token) nor :data:`RUNTIME_ROOT`, so a job cannot act as
  its owner's interactive server; whatever a job starts ends with it, and so does what
  it leaves in its temporary folder (:data:`JOB_TMP`, its own; :func:`job_command`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .accounts import Account

#: the root of what nbjobs keeps at run time on a machine (jobs never see it)
RUNTIME_ROOT = Path("/run/nbjobs")
#: one folder per running notebook server of an OS account
SERVERS_RUNTIME = RUNTIME_ROOT / "servers"
#: a job's own temporary folder (its TMPDIR) in its namespace: an empty file system of
#: its account's that goes when the job ends (:mod:`nbjobs.sandbox_init`)
JOB_TMP = RUNTIME_ROOT / "tmp"
#: the program that makes a job's namespaces (run with ``python -I -S``)
SANDBOX_INIT = Path(__file__).resolve().parent / "sandbox_init.py"
#: the kernel settings of a server whose kernels must be reachable by its account only
IPC_KERNELS = ["--KernelManager.transport=ipc"]


class SandboxUnavailable(RuntimeError):
    """The machine cannot give jobs or servers their private places; says why."""


def server_runtime_folder(account: Account, root: Path = SERVERS_RUNTIME) -> Path:
    """A new folder, only ``account`` may enter, for one notebook server's runtime files
    and its kernels' sockets (``JUPYTER_RUNTIME_DIR``). Made by root; its parents must be
    root's own folders (never a link or a folder someone else made)."""
    _root_folder(root.parent, 0o755)
    _root_folder(root, 0o711)
    # short: a kernel's socket paths (sun_path, about 107 bytes) are this folder, the
    # kernel's id (36) and "-ipc-N"
    folder = Path(tempfile.mkdtemp(prefix=f"{account.uid}-", dir=root))
    os.chown(folder, account.uid, account.gid)
    return folder


def remove_server_runtime(folder: str | Path | None, root: Path = SERVERS_RUNTIME) -> None:
    """Remove a server's runtime folder (its kernels are gone); only one under ``root``."""
    if not folder:
        return
    path = Path(folder)
    if path.parent != root:
        return
    shutil.rmtree(path, ignore_errors=True)  # never follows a link inside


def _root_folder(path: Path, mode: int) -> None:
    """``path``, a folder of root's with exactly ``mode``, whatever the umask of the
    process that makes it. Made by a service started with ``umask 077`` (the installed
    one, the demo), /run/nbjobs was 0700 after each boot, and no account's notebook
    server could enter its own folder below it: one left so is given ``mode`` again."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise SandboxUnavailable(
            f"{path} is not a folder that only root may change (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):o}); remove it and start again"
        )
    if stat.S_IMODE(st.st_mode) != mode:
        # root's own folder (checked above) in one only root may change: not a link now
        os.chmod(path, mode)


def job_command(
    account: Account,
    command: list[str],
    hide: tuple[Path, ...] = (RUNTIME_ROOT,),
    tmp: Path | None = None,
) -> list[str]:
    """``command`` started as ``account`` in a PID and mount namespace of its own, with
    ``hide`` covered and ``tmp`` its own temporary folder, its ``TMPDIR`` (run as root;
    :mod:`nbjobs.sandbox_init`)."""
    words = [sys.executable, "-I", "-S", str(SANDBOX_INIT), "--uid", str(account.uid)]
    words += ["--gid", str(account.gid), "--groups", ",".join(map(str, account.groups))]
    for folder in hide:
        words += ["--hide", str(folder)]
    if tmp is not None:
        words += ["--tmp", str(tmp)]
    return [*words, "--", *command]


def jobs_can_have_namespaces() -> str | None:
    """None where jobs can start in namespaces of their own, with :data:`RUNTIME_ROOT`
    made (root's, ``0755``: a job hides it only when it exists as the job starts); else
    why not (not root, a container that refuses them, a runtime root not root's)."""
    if os.geteuid() != 0:
        return "the job service does not run as root"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(SANDBOX_INIT), "--probe"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return f"the kernel refused them ({done.stderr.strip() or done.returncode})"
    try:
        _root_folder(RUNTIME_ROOT, 0o755)
    except SandboxUnavailable as exc:
        return str(exc)
    return None
