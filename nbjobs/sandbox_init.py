"""The first program of every local job under an OS account: a namespace of its own.

Run by the job service as root (``python -I -S sandbox_init.py --uid U --gid G
--groups G1,G2 --hide DIR ... -- RUNNER ...``), it puts the job in a PID namespace
and a mount namespace of its own, then runs the runner as the job's account:

- the job sees only its own processes (a fresh ``/proc``): not its owner's notebook
  server nor its kernels, whose environment, memory and open files a process of the
  same account could otherwise read, and into which it could write;
- each ``--hide`` folder (where notebook servers keep their runtime files: tokens,
  kernels' connection files and sockets) is covered by an empty, read-only folder;
- ``--tmp PATH`` (a folder inside a hidden one) is the job's own temporary folder: an
  empty file system only the job's account may enter, the runner's ``TMPDIR``. It lives
  as long as the namespace: whatever a job leaves there (its kernel's sockets and
  connection file, a runner killed hard included) goes when the job ends, and no other
  job, of another user or the same, sees it;
- when the runner ends, every process the job started ends with it (the namespace's
  first process leaving takes all the others).

Three processes: this one (in the service's namespace: it passes signals on and
ends as the runner ended, so the service sees the runner's exit), the namespace's
first process (root; it mounts, reaps orphans and passes signals on) and the runner.

Only the standard library, and nothing of nbjobs: it starts with ``-I -S`` in a few
milliseconds, before anything of the user runs.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Sequence

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
#: the signals a job's first processes pass on to the runner (a cancel is SIGTERM)
PASSED_ON = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
#: the exit code of a job whose namespace could not be made (said on stderr: the log)
CANNOT_ISOLATE = 71

_libc = ctypes.CDLL(None, use_errno=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, make the namespaces and run the command in them; the exit
    code is the command's (a command killed by a signal: this process too)."""
    words = list(sys.argv[1:] if argv is None else argv)
    cut = words.index("--") if "--" in words else len(words)
    args = _parser().parse_args(words[:cut])
    args.command = words[cut + 1 :]
    if args.probe:
        return _probe()
    if not args.command or args.uid is None or args.gid is None:
        _parser().error("--uid, --gid and the command to run (after --) are needed")
    try:
        _call(_libc.unshare, CLONE_NEWNS | CLONE_NEWPID)
    except OSError as exc:
        return _cannot(f"no namespace of its own could be made ({exc.strerror})")
    # held until there is a child to pass them to (_wait_passing_signals)
    signal.pthread_sigmask(signal.SIG_BLOCK, PASSED_ON)
    first = os.fork()
    if first == 0:
        _first_process(args)  # never returns
    code = _wait_passing_signals(first)
    return _end_like(code)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sandbox_init", add_help=True)
    p.add_argument("--uid", type=int)
    p.add_argument("--gid", type=int)
    p.add_argument("--groups", default="", help="supplementary group ids, comma-separated")
    p.add_argument("--hide", action="append", default=[], help="a folder the job must not see")
    p.add_argument("--tmp", help="the job's own temporary folder, inside a hidden one")
    p.add_argument("--probe", action="store_true", help="only check that namespaces work")
    return p


def _first_process(args: argparse.Namespace) -> None:
    """PID 1 of the job's namespace: mount, start the runner as the account, pass
    signals on, reap orphans, and leave with the runner's status."""
    try:
        _call(_libc.prctl, PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # nothing mounted here reaches the machine's namespace, and back
        _mount(b"none", b"/", None, MS_REC | MS_PRIVATE)
        _mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for folder in args.hide:
            _hide(folder)
        if args.tmp:
            _private_tmp(args.tmp, args.hide, args.uid, args.gid)
        for folder in args.hide:
            _seal(folder)
    except OSError as exc:
        os._exit(_cannot(f"its namespace could not be prepared ({exc})"))
    command = args.command
    runner = os.fork()
    if runner == 0:
        # a cancel already here ends the runner before it starts (its default action)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)
        if args.tmp:
            os.environ["TMPDIR"] = args.tmp
        try:
            groups = [int(g) for g in args.groups.split(",") if g]
            os.setgroups(groups or [args.gid])
            os.setresgid(args.gid, args.gid, args.gid)
            os.setresuid(args.uid, args.uid, args.uid)
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"nbjobs: the job could not start {command[0]}: {exc}", file=sys.stderr)
            os._exit(127)
    os._exit(_wait_passing_signals(runner, reap_others=True))


def _hide(folder: str) -> None:
    """Cover ``folder`` with an empty read-only one. Only folders root owns, reached
    without a link, are covered: a folder of the user's choosing is never mounted on."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    if not (st.st_uid == 0 and (st.st_mode & 0o170000) == 0o040000):
        raise OSError(f"{folder} is not a folder of root's")
    if os.path.realpath(folder) != os.path.normpath(folder):
        raise OSError(f"{folder} is reached through a link")
    _mount(b"tmpfs", folder.encode(), b"tmpfs", _HIDDEN, _COVER)


#: how a hidden folder's cover is mounted (read-only once sealed), and what it is
_HIDDEN = MS_NOSUID | MS_NODEV | MS_NOEXEC
_COVER = b"size=4k,mode=0555"


def _seal(folder: str) -> None:
    """Make ``folder``'s cover read-only (a folder that was not there has none)."""
    if os.path.ismount(folder):
        flags = MS_REMOUNT | MS_RDONLY | _HIDDEN
        _mount(b"tmpfs", folder.encode(), b"tmpfs", flags, _COVER)


def _private_tmp(path: str, hidden: Sequence[str], uid: int, gid: int) -> None:
    """A fresh file system at ``path``, ``uid``'s alone. ``path`` is made in a hidden
    folder's cover, which belongs to this namespace: nothing of the machine is touched."""
    parent = os.path.dirname(os.path.normpath(path))
    if parent not in [os.path.normpath(h) for h in hidden] or not os.path.ismount(parent):
        raise OSError(f"{path} is not in a folder hidden from the job")
    os.mkdir(path, 0o700)
    options = f"mode=0700,uid={uid},gid={gid}".encode()
    _mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options)


def _wait_passing_signals(child: int, reap_others: bool = False) -> int:
    """Wait for ``child``, passing :data:`PASSED_ON` signals to it; its wait status as an
    exit code (128 + N for a signal N). PID 1 reaps every other orphan meanwhile.

    The signals were blocked before ``child`` was forked and are let through once they
    can be passed on: a namespace's first process drops a signal from outside it that
    it has no handler for, and a cancel sent in that moment was lost (the job then ran
    on); blocked, it waits."""

    def pass_on(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in PASSED_ON:
        signal.signal(signum, pass_on)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)
    while True:
        try:
            pid, status = os.waitpid(-1 if reap_others else child, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 1
        if pid == child:
            if os.WIFSIGNALED(status):
                return 128 + os.WTERMSIG(status)
            return os.waitstatus_to_exitcode(status)


def _end_like(code: int) -> int:
    """Leave as the runner left: killed by the same signal, or with its exit code."""
    if 128 < code < 128 + signal.NSIG:
        signum = code - 128
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return code


def _probe() -> int:
    """Make the namespaces in a child and leave: 0 where jobs can have them."""
    pid = os.fork()
    if pid == 0:
        try:
            _call(_libc.unshare, CLONE_NEWNS | CLONE_NEWPID)
            _mount(b"none", b"/", None, MS_REC | MS_PRIVATE)
        except OSError as exc:
            print(exc.strerror or exc, file=sys.stderr)
            os._exit(1)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _cannot(why: str) -> int:
    print(
        f"nbjobs: the job was not started: {why}; the job service checks at its start "
        "whether jobs can have namespaces here: an admin can restart it",
        file=sys.stderr,
    )
    return CANNOT_ISOLATE


def _mount(
    source: bytes, target: bytes, kind: bytes | None, flags: int, data: bytes | None = None
) -> None:
    if _libc.mount(source, target, kind, ctypes.c_ulong(flags), data) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target.decode()}: {os.strerror(errno)}")


def _call(function: object, *args: int) -> None:
    if function(*args) != 0:  # type: ignore[operator]
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


if __name__ == "__main__":
    sys.exit(main())
