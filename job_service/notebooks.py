"""Checking submitted notebooks within bounds, so that one big notebook stalls nobody.

Reading and validating a notebook costs far more than its size: 58 MiB of 300 000
small cells take about a GiB and many seconds of CPU in nbformat. So at submit:

- a notebook up to :data:`SMALL` bytes is checked in a thread of the service, as it
  always was: cheap, and most notebooks are small; :data:`SMALL_AT_ONCE` of them at
  most are read at once, whoever submits them (a user's burst of 200 submits goes
  through them in turn, within ``limits.check_wait``, rather than one at a time);
- each user's bigger notebooks are checked one at a time (a second submit waits its
  turn), and each waits for one of ``limits.checks_at_once`` places (all users together)
  *before* its bytes are read into the service, then is checked in a process of its
  own, at low priority, as ``nobody`` when the service is root, with
  ``limits.check_memory`` as its address-space limit and a CPU-time limit. Running
  out of either is a refusal that says what to do; the service's own memory holds
  only the bytes it snapshots, and its event loop and threads are never busy with the
  parse.

``limits.cells`` is counted right after the JSON is read, in both ways, before the
costly validation.

The worker is this module run as a program (``python -m nbjobs.job_service.notebooks``):
the notebook's bytes on stdin, one line of JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import pwd
import resource
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbjobs.job_runner.lean_imports import decline_format_checkers

from nbjobs.cgroups import human_bytes

from .errors import Busy, Invalid, ServiceError, TooLarge

#: notebooks up to this size are checked in a thread of the service (a few tens of ms)
SMALL = 4 * 1024**2
#: small notebooks read and checked at once, all users together: what the service holds
#: of them is bounded (16 MiB of bytes read at most before their parse)
SMALL_AT_ONCE = 4
#: CPU seconds one check in a worker may take (a 100 MiB notebook takes well under)
CHECK_CPU_SECONDS = 600
_WORKER = "nbjobs.job_service.notebooks"

if TYPE_CHECKING:  # the worker, a process per check, never imports the config's models
    from nbjobs.config import LimitsConfig
#: how much of a notebook is written to the worker's pipe at a time
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Checked:
    """What the service needs of a notebook it checked."""

    #: its kernel's name (``metadata.kernelspec.name``; ``python3`` when it names none)
    kernel: str
    cells: int


class CheckFailed(ServiceError):
    """The check itself broke (not the notebook): the service's fault, said as such."""

    status = 500


def check_text(data: bytes, max_cells: int) -> dict[str, Any]:
    """Check the notebook ``data`` here. The answer, as the worker also gives it:
    ``{"kernel", "cells"}`` for a notebook Jupyter can run, ``{"cells", "max_cells"}``
    for one of too many cells, ``{"invalid": REASON}`` for one it cannot."""
    from nbjobs.job_runner import BadInput
    from nbjobs.job_runner.reading import TooManyCells, parse_notebook

    try:
        nb, _ = parse_notebook(data.decode("utf-8"), "it", max_cells=max_cells)
    except TooManyCells as exc:
        return {"cells": exc.count, "max_cells": exc.limit}
    except BadInput as exc:
        return {"invalid": str(exc)}
    except UnicodeDecodeError:
        return {"invalid": "it is not UTF-8 text"}
    name = (nb.metadata.get("kernelspec") or {}).get("name") or "python3"
    return {"kernel": str(name), "cells": len(nb.cells)}


def checked(answer: dict[str, Any], where: str) -> Checked:
    """The notebook ``where`` as :func:`check_text` found it, or its refusal."""
    if "kernel" in answer:
        return Checked(kernel=str(answer["kernel"]), cells=int(answer["cells"]))
    if "max_cells" in answer:
        raise Invalid(
            f"{where!r} has {answer['cells']} cells, more than the {answer['max_cells']} a "
            "notebook may have here; split it into smaller notebooks (or ask your admin to "
            "raise limits.cells)"
        )
    raise Invalid(
        f"{where!r} is not a valid notebook ({str(answer['invalid'])[:240]}); "
        "open it in JupyterLab, fix it and save"
    )


class NotebookChecks:
    """Where submitted notebooks are checked: a few small ones at once in threads, big
    ones one at a time per user in a few worker processes at once (see the module's
    notes)."""

    def __init__(self, limits: LimitsConfig) -> None:
        self._limits = limits
        self._users: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}
        self._places = asyncio.Semaphore(limits.checks_at_once)
        self._small = asyncio.Semaphore(SMALL_AT_ONCE)

    @contextlib.asynccontextmanager
    async def turn(self, user: str, size: int) -> AsyncIterator[Turn]:
        """Hold one of the places for small checks or, for a notebook of more than
        :data:`SMALL` bytes, ``user``'s turn and one of the places for big checks; read
        and check the notebook inside."""
        wait = self._limits.check_wait
        deadline = asyncio.get_running_loop().time() + (wait if wait is not None else math.inf)
        if size <= SMALL:
            busy = "the job service is checking many other notebooks"
            async with _within(self._small, deadline, lambda: self._busy(busy)):
                yield Turn(self, holds_place=False)
            return
        lock = self._users.setdefault(user, asyncio.Lock())
        self._waiting[user] = self._waiting.get(user, 0) + 1
        try:
            yours = "your earlier big notebooks are still being checked"
            async with _within(lock, deadline, lambda: self._busy(yours)):
                others = (
                    f"the job service is checking {self._limits.checks_at_once} other "
                    "big notebook(s)"
                )
                async with _within(self._places, deadline, lambda: self._busy(others)):
                    yield Turn(self, holds_place=True)
        finally:
            self._waiting[user] -= 1
            if not self._waiting[user]:  # nobody else of theirs waits: forget the lock
                del self._waiting[user], self._users[user]

    def _busy(self, behind: str) -> Busy:
        """The 503 of a submit that waited ``limits.check_wait`` ``behind`` others."""
        wait = self._limits.check_wait or 0.0
        return Busy(
            f"{behind}, and this one waited {wait:g} s for its turn; submit it again in a minute",
            retry_after=max(5, int(wait)),
        )

    async def _check(self, data: bytes, where: str, holds_place: bool) -> Checked:
        if len(data) <= SMALL:
            answer = await asyncio.to_thread(check_text, data, self._limits.cells)
            return checked(answer, where)
        if holds_place:
            return await self._in_worker(data, where)
        async with self._places:  # it grew past SMALL since it was opened
            return await self._in_worker(data, where)

    async def _in_worker(self, data: bytes, where: str) -> Checked:
        memory = self._limits.check_memory
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            _WORKER,
            *("--memory", str(memory)),
            *("--cells", str(self._limits.cells)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=_worker_env(),
            cwd="/",
            **_unprivileged(),
        )
        try:
            await _feed(process, data)
            out, _ = await process.communicate()
        except BaseException:  # the request went away (or the service): so does its check
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        finally:
            await _pipe_closed(process)
        try:
            answer = json.loads(out.decode() or "{}")
        except ValueError:
            answer = {}
        if "kernel" in answer or "invalid" in answer or "max_cells" in answer:
            return checked(answer, where)
        if answer.get("memory") or process.returncode in (-9, -11):
            raise TooLarge(
                f"checking {where!r} needs more than the {human_bytes(memory)} of memory a "
                "notebook may take here (it has very many cells or very large ones); clear its "
                "outputs (Edit > Clear Outputs of All Cells) or split it, or ask your admin to "
                "raise limits.check_memory"
            )
        if process.returncode == -signal.SIGXCPU:
            raise TooLarge(
                f"checking {where!r} took more than {CHECK_CPU_SECONDS} s of CPU; split it "
                "into smaller notebooks"
            )
        raise CheckFailed(
            f"nbjobs could not check {where!r} (its checker ended with code "
            f"{process.returncode}); try again, and tell your admin if it keeps failing"
        )


@contextlib.asynccontextmanager
async def _within(
    lock: asyncio.Lock | asyncio.Semaphore, deadline: float, busy: Callable[[], Busy]
) -> AsyncIterator[None]:
    """Hold ``lock``, waiting until ``deadline`` (the loop's clock) at most; past it the
    request is refused with ``busy()`` (503) rather than held on."""
    left = deadline - asyncio.get_running_loop().time()
    try:
        await asyncio.wait_for(lock.acquire(), max(left, 0.001) if left < math.inf else None)
    except asyncio.TimeoutError:
        raise busy() from None
    try:
        yield
    finally:
        lock.release()


@dataclass(frozen=True)
class Turn:
    """A user's turn to have a notebook checked (:meth:`NotebookChecks.turn`)."""

    checks: NotebookChecks
    holds_place: bool

    async def check(self, data: bytes, where: str) -> Checked:
        """Check the notebook ``data``, named ``where`` in refusals."""
        return await self.checks._check(data, where, self.holds_place)


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    """Write ``data`` to the worker's stdin a MiB at a time, so that the pipe's buffer
    never holds a second copy of the notebook; then close it."""
    assert process.stdin is not None
    view = memoryview(data)
    try:
        for start in range(0, len(view), _CHUNK):
            process.stdin.write(view[start : start + _CHUNK])
            await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the worker ended early (out of memory): its answer says why
    finally:
        process.stdin.close()


async def _pipe_closed(process: asyncio.subprocess.Process) -> None:
    """Wait for the worker's stdin to be closed. A worker that ended before it read all
    (out of memory, or killed with its request) broke the pipe: expected, and taken here;
    left untaken, Python 3.11 logs it when collected ("Future exception was never
    retrieved: BrokenPipeError"), in every service's log on every such check."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await process.stdin.wait_closed()


def _unprivileged() -> dict[str, Any]:
    """A service running as root parses users' notebooks as ``nobody``: what a crafted
    file could do to the parser, it does with no rights at all."""
    if os.geteuid() != 0:
        return {}
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return {}
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


def _worker_env() -> dict[str, str]:
    """The worker's environment: what finds Python and nbjobs, nothing of the service's."""
    keep = ("PATH", "PYTHONPATH", "LANG", "LC_ALL")
    return {name: os.environ[name] for name in keep if name in os.environ}


def main(argv: list[str] | None = None) -> int:
    """The worker: check the notebook on stdin within the limits given, answer on stdout."""
    parser = argparse.ArgumentParser(prog=_WORKER)
    parser.add_argument("--memory", type=int, required=True)
    parser.add_argument("--cells", type=int, required=True)
    args = parser.parse_args(argv)
    decline_format_checkers()  # over a second of CPU per check otherwise
    resource.setrlimit(resource.RLIMIT_AS, (args.memory, args.memory))
    resource.setrlimit(resource.RLIMIT_CPU, (CHECK_CPU_SECONDS, CHECK_CPU_SECONDS + 5))
    with contextlib.suppress(OSError):
        os.nice(10)  # the service's requests come first
    try:
        answer = check_text(sys.stdin.buffer.read(), args.cells)
    except MemoryError:
        answer = {"memory": True}
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
