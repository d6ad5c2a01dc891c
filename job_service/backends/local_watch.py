"""Starting local jobs' processes off the event loop, and noticing their end at once.

The job service's event loop answers every API request and runs every other job's
start and end, so the local backend keeps two slow things off it:

- **starting a runner**: ``fork``, then (with control groups) joining the job's
  group before ``exec``, takes tens of milliseconds on cgroup v1 (the kernel waits
  for an RCU grace period on a group's first join). Done on the loop, eight jobs
  submitted at once started one after another, and every request waited behind them.
  :func:`started_off_loop` runs it on a worker thread instead.
- **noticing a runner's end**: a Linux pidfd (:func:`exit_watch`) becomes readable
  the moment the process exits, child or adopted, so a finished job is recorded (and
  its capacity freed) without waiting for a poll. Where there is no pidfd (old kernels,
  other systems) the backend polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


async def started_off_loop(
    start: Callable[..., list[R]], *args: Any, abandon: Callable[[list[R]], None]
) -> list[R]:
    """``start(*args)`` on a worker thread: the processes it starts, or its exception.

    When the caller is cancelled meanwhile (the service stops), the start still runs to
    its end on its thread, and what it started is given to ``abandon`` (to be stopped):
    a job whose start nobody will record must not run on unwatched.
    """
    work = asyncio.ensure_future(asyncio.to_thread(start, *args))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        work.add_done_callback(lambda done: _abandon_result(done, abandon))
        raise


def _abandon_result(done: asyncio.Future[list[R]], abandon: Callable[[list[R]], None]) -> None:
    if not done.cancelled() and done.exception() is None:
        abandon(done.result())


def open_exit_watch(pid: int) -> int:
    """A pidfd of process ``pid`` (readable once it exits); -1 where there is none (gone
    already, not allowed, or no ``pidfd_open`` here): the caller polls."""
    if not hasattr(os, "pidfd_open"):
        return -1
    try:
        return os.pidfd_open(pid)
    except OSError:
        return -1


async def exited_within(fd: int, timeout: float) -> bool:
    """Wait until the pidfd ``fd`` says its process exited, at most ``timeout`` seconds;
    whether it did. The wait is the kernel's word, not a poll."""
    loop = asyncio.get_running_loop()
    exited = asyncio.Event()
    loop.add_reader(fd, exited.set)
    try:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(exited.wait(), timeout=timeout)
    finally:
        loop.remove_reader(fd)
    return exited.is_set()
