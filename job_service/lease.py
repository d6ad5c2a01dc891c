"""One dispatcher per database: a lease row that one job service holds at a time.

Two job services on one database (a rolling restart, a second replica started by
mistake) would both start the same queued jobs. Before it schedules anything, a
service takes the lease, a row in ``nbjobs_lease`` naming its holder and when the
claim runs out, and renews it while it runs. A second service finds the lease
held: it waits as a standby and takes over when the holder stops (it gives the
lease back) or dies (the claim runs out after ``seconds``), or, if told not to
wait, refuses to start with a sentence naming the holder.

Taking and renewing are single conditional UPDATEs, atomic on SQLite and
PostgreSQL alike; no transaction or lock is held between them. The holders'
clocks must agree to well within ``seconds`` (NTP does that).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from .db import LeaseRecord, rowcount, utcnow

DISPATCHER = "dispatcher"


class LeaseHeld(RuntimeError):
    """Another job service holds the database; the text names it and says what to do."""


class DispatcherLease:
    """The lease of one service process on one database.

    ``seconds`` is how long a claim lasts without renewal: how long a standby
    waits after the holder died before it takes over. The holder renews every
    third of it.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        seconds: float = 15.0,
        log: logging.Logger | None = None,
        name: str = DISPATCHER,
    ) -> None:
        self.sessions = sessions
        self.seconds = seconds
        self.name = name
        self.log = log or logging.getLogger("nbjobs.job_service")
        self.holder = f"{socket.gethostname()} pid={os.getpid()} id={uuid.uuid4().hex[:8]}"
        self.held = False
        #: monotonic time of the last successful take or renewal
        self.renewed_at = 0.0
        self._keeper: asyncio.Task[None] | None = None

    # -- one step each -------------------------------------------------------------

    def try_take(self) -> str | None:
        """Take (or renew) the lease; None when this process holds it now, else its holder."""
        now = utcnow()
        until = now + timedelta(seconds=self.seconds)
        with self.sessions() as db:
            taken = rowcount(
                db,
                update(LeaseRecord)
                .where(
                    LeaseRecord.name == self.name,
                    (LeaseRecord.holder == self.holder) | (LeaseRecord.expires_at < now),
                )
                .values(holder=self.holder, expires_at=until),
            )
            if taken:
                db.commit()
                self.held = True
                self.renewed_at = time.monotonic()
                return None
            holder = db.scalar(select(LeaseRecord.holder).where(LeaseRecord.name == self.name))
            if holder is not None:
                db.rollback()
                self.held = False
                return holder
            db.add(LeaseRecord(name=self.name, holder=self.holder, expires_at=until))
            try:
                db.commit()
            except IntegrityError:  # another service made the row first
                db.rollback()
                self.held = False
                return self.try_take()
        self.held = True
        self.renewed_at = time.monotonic()
        return None

    def renew(self) -> bool:
        """Extend the claim; False when the lease is no longer this process's."""
        until = utcnow() + timedelta(seconds=self.seconds)
        with self.sessions() as db:
            kept = rowcount(
                db,
                update(LeaseRecord)
                .where(LeaseRecord.name == self.name, LeaseRecord.holder == self.holder)
                .values(expires_at=until),
            )
            db.commit()
        self.held = bool(kept)
        if self.held:
            self.renewed_at = time.monotonic()
        return self.held

    def fresh(self) -> bool:
        """Whether this process may dispatch now: it holds the lease, renewed within the
        last half of its time (else it renews first, and says whether that worked)."""
        if not self.held:
            return False
        if time.monotonic() - self.renewed_at < self.seconds / 2:
            return True
        return self.renew()

    def release(self) -> None:
        """Give the lease back at once, so a standby takes over without waiting."""
        self.stop_keeping()
        if not self.held:
            return
        with self.sessions() as db:
            db.execute(
                update(LeaseRecord)
                .where(LeaseRecord.name == self.name, LeaseRecord.holder == self.holder)
                .values(expires_at=datetime(1970, 1, 1, tzinfo=timezone.utc))
            )
            db.commit()
        self.held = False

    # -- over time -------------------------------------------------------------------

    async def take(
        self, *, wait: bool = True, on_wait: Callable[[str], None] | None = None
    ) -> None:
        """Take the lease, waiting as a standby while another service holds it.

        With ``wait=False`` a held lease is a :class:`LeaseHeld` that names the holder.
        """
        said = None
        while (holder := await asyncio.to_thread(self.try_take)) is not None:
            if not wait:
                raise LeaseHeld(
                    f"another job service ({holder}) is using this database; stop it first, "
                    "or start this one as a standby (it takes over when the other stops)"
                )
            if holder != said:
                said = holder
                self.log.warning(
                    "nbjobs: another job service (%s) is using this database; waiting as a "
                    "standby, taking over when it stops (or %g s after it dies)",
                    holder,
                    self.seconds,
                )
                if on_wait is not None:
                    on_wait(holder)
            await asyncio.sleep(max(0.05, self.seconds / 5))
        self.log.info("nbjobs: this job service dispatches from the database (%s)", self.holder)

    def keep(self, on_lost: Callable[[], None]) -> None:
        """Renew the lease every third of its time; call ``on_lost`` if it was taken."""
        self._keeper = asyncio.ensure_future(self._keep(on_lost))

    async def _keep(self, on_lost: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            try:
                kept = await asyncio.to_thread(self.renew)
            except Exception:  # the database is away: the claim may still be ours
                self.log.exception("nbjobs: could not renew the dispatcher lease")
                continue
            if not kept:
                self.log.error(
                    "nbjobs: another job service took over this database (this one could not "
                    "renew its lease in time); this one stops dispatching"
                )
                on_lost()
                return

    def stop_keeping(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            self._keeper = None

    async def aclose(self) -> None:
        """Stop renewing and give the lease back."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        await asyncio.to_thread(self.release)
