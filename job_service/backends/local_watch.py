"""Noticing a local job's end the moment its runner exits, not at the next poll.

A Linux pidfd (:func:`open_exit_watch`) becomes readable the moment the process exits,
a child of the service or one adopted after a restart, so a finished job is recorded,
and its capacity freed, at once (:func:`exited_within`); between two such waits the
backend notes the job's process tree. Where there is no pidfd (old kernels, other
systems) the backend polls every ``poll_interval``.

Starting runners stays on the event loop, on purpose: on a worker thread, several
claimed jobs waited for it at once, and a job service killed meanwhile lost every one
of them (claimed, not recorded as started); on the loop one at most is in that state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os


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
