"""A piece of work the service repeats while it runs (collecting telemetry, judging idle
GPUs): started once, stopped at once when the lease is lost, stopped cleanly at the end;
an error in one round is logged and the next round comes all the same."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol


async def until_short(batch: Callable[[], Awaitable[int]], size: int) -> int:
    """Run ``batch`` (one transaction's worth of work, answering how many things it did)
    again until one does fewer than ``size``: the backlog is done. How many in all."""
    total = 0
    while True:
        done = await batch()
        total += done
        if done < size:
            return total


class Loop(Protocol):
    """A part of the service that works in the background while this service holds the
    dispatcher lease (the dispatcher, the telemetry collector, the ticker...): started
    once, stopped cleanly at the end, halted at once when the lease is lost."""

    def run(self) -> None: ...

    async def stop(self) -> None: ...

    def halt(self) -> None: ...


class Periodic:
    """Runs ``work`` every ``period()`` seconds (asked anew each round)."""

    def __init__(
        self,
        work: Callable[[], Awaitable[object]],
        period: Callable[[], float],
        *,
        what: str,
        log: Callable[[], logging.Logger],
        first_wait: bool = False,
    ) -> None:
        self.work = work
        self.period = period
        #: what the work is, for the log line when a round fails
        self.what = what
        self._log = log
        #: wait a period before the first round (else: run it at once)
        self.first_wait = first_wait
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def run(self) -> None:
        """Start the rounds (once; again after a stop)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def halt(self) -> None:
        """No more rounds, at once (the lease was lost: another service does them now)."""
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        """No more rounds; returns once a round in progress has stopped."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self) -> None:
        wait = self.first_wait
        while True:
            if wait:
                await asyncio.sleep(self.period())
            wait = True
            try:
                await self.work()
            except asyncio.CancelledError:
                raise
            except Exception:
                self._log().exception("%s failed; trying again", self.what)


class InRounds:
    """A part of the service whose work runs in the rounds of a :class:`Periodic` (its
    ``_rounds``): the service runs it (when there is work for it), halts and stops it."""

    _rounds: Periodic

    def wanted(self) -> bool:
        """Whether nbjobs.yaml gives the rounds any work at all. Default: yes."""
        return True

    def run(self) -> None:
        """Start the rounds, when :meth:`wanted`."""
        if self.wanted():
            self._rounds.run()

    def halt(self) -> None:
        """No more rounds, at once (the lease was lost: another service does them now)."""
        self._rounds.halt()

    async def stop(self) -> None:
        """No more rounds; returns once a round in progress has stopped."""
        await self._rounds.stop()
