"""A hub user who is deleted, or made again under the same name, leaves nothing to the
next person of that name.

JupyterHub names are reused: an admin deletes ``ada`` and later adds a new ``ada``. Every
table of the service is keyed by that name, as are the user's folder and their OS
account on one machine; without this module the new person would find the old one's
jobs, logs, paused schedules, notification addresses, files and account.

The service tells one person from the next by the hub's ``created`` time of the user,
recorded (``nbjobs_users``) the first time it sees the name. It notices a change

- when a caller arrives whose ``created`` differs from the one recorded (the user was
  deleted and made again): their request waits until the earlier person is retired;
- in rounds (``users.check_every``): users the hub no longer has, or has anew;
- when a scheduled run is about to act for its owner.

Retiring a user (:meth:`Departures.retire`) cancels their queued and running jobs,
removes the OS account nbjobs made for them, and then, as ``users.on_delete`` says:

- ``archive`` (the default): every record keeps its place under an archive name,
  ``ada/deleted-20261129T030100Z`` (JupyterHub refuses ``/`` in a user name, so no
  hub user can ever be it); definitions are paused; the folder moves to
  ``.nbjobs-deleted/`` under the storage root (readable by the service alone);
- ``remove``: jobs, definitions, notification settings and addresses are deleted
  and so is the folder; the GPU time used stays in usage reports, under the
  archive name.

Either way the credits ledger, which nobody may rewrite, carries the user's balance over
to the archive name, and a line of ``nbjobs_deleted_users`` says what was done (the
dashboard's Users view shows it) and the service's log says it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Integer, String, Text, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from nbjobs.storage import escape_username

from .audit import AuditRecord
from .credits import CreditAccountRow, CreditEntryRow
from .db import ACTIVE_VALUES, Base, BudgetExtension, JobRecord, KeptUsage, UTCDateTime, utcnow
from .errors import Forbidden, Invalid, NotFound, ServiceError
from .notifications.store import AddressRecord, NotificationRecord, NotifySettingRecord
from .periodic import InRounds, Periodic
from .schedules.store import DefinitionRecord, DefinitionRunRecord, DefinitionVersionRecord
from .telemetry import delete_samples
from .usage import UsageDayRow

if TYPE_CHECKING:
    from .context import Context

#: the folder under the storage root where archived users' folders go (mode 0700)
ARCHIVE_FOLDER = ".nbjobs-deleted"
#: seconds a retirement waits for a running job of the user to stop after its cancel
CANCEL_WAIT = 30.0
#: who cancels a deleted user's jobs, in their records and the runner's banner
BY = "nbjobs"


class UserGone(ServiceError):
    """A call from a user the service retired (a token the hub's answer, kept a few
    seconds, still names): nothing of theirs is made again."""

    status = 401


class KnownUser(Base):
    """A hub user the service has seen: which person of that name it knows."""

    __tablename__ = "nbjobs_users"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    #: the hub's ``created`` of this user, as the hub wrote it: a user deleted and made
    #: again under the same name has another
    hub_created: Mapped[str] = mapped_column(String(64))
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime)


class DeletedUserRecord(Base):
    """A user retired: why, when, and what became of their things."""

    __tablename__ = "nbjobs_deleted_users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), index=True)
    #: the hub's ``created`` of the person retired (None: never known)
    hub_created: Mapped[str | None] = mapped_column(String(64), nullable=True)
    noticed_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    #: in words: "deleted in the hub", "made again in the hub"
    why: Mapped[str] = mapped_column(Text)
    #: ``archive`` or ``remove`` (``users.on_delete`` then)
    action: Mapped[str] = mapped_column(String(8))
    #: the name their records (archive) or their usage (remove) are kept under
    archived_as: Mapped[str] = mapped_column(String(255))
    jobs: Mapped[int] = mapped_column(Integer, default=0)
    cancelled: Mapped[int] = mapped_column(Integer, default=0)
    definitions: Mapped[int] = mapped_column(Integer, default=0)
    #: notification settings and mail addresses
    settings: Mapped[int] = mapped_column(Integer, default=0)
    #: where their folder went (archive); None: removed, or there was none
    folder: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the OS account removed (one machine, accounts nbjobs made)
    account: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: what could not be done, in sentences for the admin
    problems: Mapped[str | None] = mapped_column(Text, nullable=True)


def archive_name(name: str, when: datetime) -> str:
    """The name a retired user's records are kept under: no hub user can have it
    (JupyterHub refuses ``/`` in names), and two retirements of one name differ."""
    suffix = f"/deleted-{when:%Y%m%dT%H%M%SZ}"
    return name[: 255 - len(suffix)] + suffix


class Departures(InRounds):
    """Tells each person of a name from the next, and retires the one who left."""

    def __init__(
        self,
        ctx: Context,
        *,
        folder_for: Callable[[str], Path],
        cancel: Callable[[str, str], Awaitable[object]],
        charge: Callable[[Session, JobRecord], int],
        after: Callable[[], object] = lambda: None,
    ) -> None:
        self.ctx = ctx
        self.folder_for = folder_for
        #: cancel a job by id, saying why (as the service, an admin's cancel)
        self.cancel = cancel
        #: charge an ended job's credits before its record goes (``Credits.charge``)
        self.charge = charge
        #: reload what is cached of the tables changed here (budget extensions; run on a
        #: database thread)
        self.after = after
        #: name -> the hub's ``created`` known to match the database (no lookup needed)
        self._known: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._rounds = Periodic(
            self.sync,
            lambda: ctx.config.users.check_every or 60.0,
            what="comparing the users nbjobs knows with the hub's",
            log=lambda: ctx.log,
            first_wait=True,
        )

    def wanted(self) -> bool:
        return self.ctx.classes.hub is not None

    # -- noticing ------------------------------------------------------------------------

    async def admit(self, name: str, created: str | None) -> bool:
        """Before serving the hub user ``name`` made at ``created``: retire the earlier
        person of that name, if the service knew another. True when it did just now.

        A caller whose hub says nothing of when they were made (standalone tokens) is
        served as they are.
        """
        if not created or self._known.get(name) == created:
            return False
        async with self._lock(name):
            before = await self.ctx.in_db(self._remember, name, created)
            retired = before is not None and before != created
            if retired:
                await self.retire(name, before, f"made again in the hub (made {created})")
                await self.ctx.in_db(self._set_known, name, created)
            self._known[name] = created
        return retired

    async def sync(self) -> int:
        """One round: retire every known user the hub no longer has, or has anew under the
        same name. How many were."""
        hub = self.ctx.classes.hub
        if hub is None:
            return 0
        try:
            users = await hub.users()
        except ServiceError as exc:
            self.ctx.log.warning("nbjobs: cannot list the hub's users (%s)", exc.message)
            return 0
        known = await self.ctx.in_db(self._all_known)
        done = 0
        for name, created in sorted(known.items()):
            if users.get(name) == created:
                continue
            if name not in users:
                # a listing that missed someone must not cost them their work: asked again
                try:
                    model = await hub.user(name)
                except ServiceError:
                    continue
                if model is not None:
                    users[name] = str(model.get("created") or created)
                    if users[name] == created:
                        continue
            async with self._lock(name):
                if await self.ctx.in_db(self._known_created, name) != created:
                    continue  # admit() did it meanwhile
                now = users.get(name)
                why = "deleted in the hub" if now is None else f"made again in the hub (made {now})"
                await self.retire(name, created, why)
                if now is None:
                    await self.ctx.in_db(self._forget_known, name)
                    self._known.pop(name, None)
                else:
                    await self.ctx.in_db(self._set_known, name, now)
                    self._known[name] = now
            done += 1
        return done

    def vetted(self, user_now: Callable[[str], Awaitable[Any]]) -> Callable[[str], Awaitable[Any]]:
        """``user_now`` (the authenticator's: a user as they are now, without a token of
        theirs), answering None for a user made again since the service last saw them:
        what was saved for the earlier person (a schedule) never acts as the new one."""

        async def now(name: str) -> Any:
            caller = await user_now(name)
            created = getattr(caller, "created", None)
            try:
                if caller is not None and await self.admit(name, created):
                    return None
            except UserGone:  # the very person retired: gone, as far as a schedule goes
                return None
            return caller

        return now

    async def delete_user(self, name: str, by: str) -> DeletedUserRecord:
        """An admin (``by``) deletes ``name`` through nbjobs: in a hub the hub user goes
        too (their tokens with them), and their things are retired at once."""
        if name == by:
            raise Invalid(
                "you cannot delete yourself here; ask another admin, or delete the user in the hub"
            )
        if "/" in name:
            raise Invalid(
                f"{name!r} is an archive name, not a user: its records are kept for admins "
                "and belong to nobody"
            )
        if name in self.ctx.config.admin.users:
            raise Forbidden(
                f"{name} administers nbjobs (admin.users in nbjobs.yaml); take them out of it "
                "first, or delete them in the hub"
            )
        hub = self.ctx.classes.hub
        async with self._lock(name):
            created = await self.ctx.in_db(self._known_created, name)
            if hub is not None:
                model = await hub.user(name)
                if model is None and created is None:
                    raise NotFound(f"the hub has no user {name!r}, and nbjobs knows none")
                if model is not None and model.get("admin"):
                    # nbjobs' admins need not be the hub's: the hub's own are its to delete
                    raise Forbidden(
                        f"{name} is a JupyterHub admin; only the hub's admin page deletes them"
                    )
                await hub.delete_user(name)
            record = await self.retire(name, created, f"deleted by {by} through nbjobs")
            await self.ctx.in_db(self._forget_known, name)
            self._known.pop(name, None)
        return record

    # -- retiring ------------------------------------------------------------------------

    async def retire(self, name: str, created: str | None, why: str) -> DeletedUserRecord:
        """Retire the user ``name``: stop their definitions and jobs, remove their OS
        account, archive or remove (``users.on_delete``) their records and folder."""
        config = self.ctx.config
        action = config.users.on_delete
        noticed = await self.ctx.in_db(self._unique_moment, name, utcnow())
        archived_as = archive_name(name, noticed)
        problems: list[str] = []
        active = await self.ctx.in_db(self._stop_definitions, name)
        cancelled = 0
        for job_id in active:
            try:
                await asyncio.wait_for(
                    self.cancel(job_id, f"{name}'s hub account was deleted"), CANCEL_WAIT
                )
                cancelled += 1
            except ServiceError:
                pass  # it ended meanwhile
            except asyncio.TimeoutError:
                problems.append(
                    f"job {job_id} had not stopped {CANCEL_WAIT:.0f} s after its cancel"
                )
        account, problem = await asyncio.to_thread(self._remove_account, name)
        if problem:
            problems.append(problem)
        folder, moved_to, problem = await asyncio.to_thread(self._put_folder_away, name, noticed)
        if problem:
            problems.append(problem)
        counts = await self.ctx.in_db(self._records, name, archived_as, action, folder, moved_to)
        record = DeletedUserRecord(
            name=name,
            hub_created=created,
            noticed_at=noticed,
            why=why,
            action=action,
            archived_as=archived_as,
            cancelled=cancelled,
            folder=str(moved_to) if moved_to else None,
            account=account,
            problems=" ".join(problems) or None,
            **counts,
        )
        await self.ctx.in_db(self._add, record)
        await self.ctx.in_db(self.after)
        self.ctx.log.warning(
            "nbjobs: the user %s was %s: %s their %d job(s) (%d cancelled), %d definition(s) "
            "and %d notification setting(s)%s%s%s; a new %s starts with nothing of theirs",
            name,
            why,
            f"archived as {archived_as!r}" if action == "archive" else "removed",
            record.jobs,
            cancelled,
            record.definitions,
            record.settings,
            f", their folder moved to {moved_to}" if moved_to else "",
            ", their folder removed" if action == "remove" and folder is not None else "",
            f", the OS account {account} removed" if account else "",
            name,
        )
        if problems:
            self.ctx.log.error("nbjobs: retiring the user %s: %s", name, " ".join(problems))
        return record

    def _stop_definitions(self, name: str) -> list[str]:
        """Pause the user's definitions (no new run starts); their jobs not ended yet."""
        with self.ctx.sessions() as db:
            db.execute(
                update(DefinitionRecord)
                .where(DefinitionRecord.user == name)
                .values(paused=1, next_run_at=None)
            )
            db.commit()
            return list(
                db.scalars(
                    select(JobRecord.id).where(
                        JobRecord.user == name, JobRecord.state.in_(ACTIVE_VALUES)
                    )
                )
            )

    def _remove_account(self, name: str) -> tuple[str | None, str | None]:
        """Remove the OS account this nbjobs made for ``name`` (one machine, accounts
        ``create``): the next person of the name gets a fresh one. (account, problem)."""
        from nbjobs import accounts

        local = self.ctx.config.backend.local
        if self.ctx.config.backend.kind != "local" or local.accounts.mode != "create":
            return None, None
        try:
            account = accounts.account_name(name, local.accounts.prefix)
            entry = pwd.getpwnam(account)
        except (accounts.AccountRefused, KeyError):
            return None, None
        mark = accounts.read_mark(entry)
        if mark is None or mark[0] != name or mark[1] not in (None, local.instance):
            return None, None  # not nbjobs', another user's, or another nbjobs's here
        if os.geteuid() != 0:
            return None, (
                f"the OS account {account} could not be removed: only root can; remove it "
                f"(userdel {account}) before {name} uses nbjobs again"
            )
        accounts.remove_account(account, local.instance)
        with contextlib.suppress(KeyError):
            pwd.getpwnam(account)
            return None, (
                f"the OS account {account} could not be removed (userdel failed): stop what "
                f"runs as it and run userdel {account} before {name} uses nbjobs again"
            )
        return account, None

    def _put_folder_away(
        self, name: str, noticed: datetime
    ) -> tuple[Path | None, Path | None, str | None]:
        """Move the user's folder to the archive (or remove it): (the folder, where it
        went, a problem)."""
        folder = self.folder_for(name)
        try:
            folder.lstat()
        except FileNotFoundError:
            return None, None, None
        except OSError as exc:
            return (
                None,
                None,
                (
                    f"their folder {folder} could not be read ({exc.strerror}): check the storage, "
                    "and move the folder aside by hand before the name is used again"
                ),
            )
        if self.ctx.config.users.on_delete == "remove":
            try:
                if folder.is_symlink():
                    folder.unlink()
                else:
                    shutil.rmtree(folder)
            except OSError as exc:
                return (
                    folder,
                    None,
                    (
                        f"their folder {folder} was not removed ({exc.strerror}): remove it by "
                        "hand before the name is used again"
                    ),
                )
            return folder, None, None
        archive = Path(self.ctx.config.storage.root) / ARCHIVE_FOLDER
        target = archive / f"{escape_username(name)}-{noticed:%Y%m%dT%H%M%SZ}"
        try:
            # only the service may enter: the files keep the old uid, which a new account
            # may be given again
            archive.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(archive, 0o700)
            os.rename(folder, target)
        except OSError as exc:
            return (
                folder,
                None,
                (
                    f"their folder {folder} was not moved to {archive} ({exc.strerror}): move it "
                    "aside by hand, or the next user of the name finds its files"
                ),
            )
        return folder, target, None

    def _records(
        self,
        name: str,
        archived_as: str,
        action: str,
        folder: Path | None,
        moved_to: Path | None,
    ) -> dict[str, int]:
        """Archive (rename) or remove every record of ``name``; how many of each."""
        with self.ctx.sessions() as db:
            definition_ids = list(
                db.scalars(select(DefinitionRecord.id).where(DefinitionRecord.user == name))
            )
            settings = _count(db, NotifySettingRecord.user == name) + _count(
                db, AddressRecord.user == name
            )
            if action == "archive":
                jobs = self._archive_jobs(db, name, archived_as, folder, moved_to)
                for table in (DefinitionRecord, NotifySettingRecord, AddressRecord):
                    db.execute(update(table).where(table.user == name).values(user=archived_as))
                db.execute(
                    update(NotificationRecord)
                    .where(NotificationRecord.user == name)
                    .values(user=archived_as)
                )
                db.execute(
                    update(BudgetExtension)
                    .where(BudgetExtension.student == name)
                    .values(student=archived_as)
                )
            else:
                jobs = self._remove_jobs(db, name)
                db.execute(
                    delete(DefinitionRunRecord).where(
                        DefinitionRunRecord.definition_id.in_(definition_ids)
                    )
                )
                db.execute(
                    delete(DefinitionVersionRecord).where(
                        DefinitionVersionRecord.definition_id.in_(definition_ids)
                    )
                )
                for table in (DefinitionRecord, NotifySettingRecord, AddressRecord):
                    db.execute(delete(table).where(table.user == name))
                db.execute(delete(NotificationRecord).where(NotificationRecord.user == name))
                db.execute(delete(BudgetExtension).where(BudgetExtension.student == name))
            # GPU time used stays counted, but never in the next person's budget
            db.execute(update(KeptUsage).where(KeptUsage.user == name).values(user=archived_as))
            db.execute(
                update(UsageDayRow)
                .where(UsageDayRow.breakdown == "user", UsageDayRow.name == name)
                .values(name=archived_as)
            )
            db.execute(
                update(AuditRecord).where(AuditRecord.owner == name).values(owner=archived_as)
            )
            _carry_credits(db, name, archived_as)
            db.commit()
        return {"jobs": jobs, "definitions": len(definition_ids), "settings": settings}

    def _archive_jobs(
        self,
        db: Session,
        name: str,
        archived_as: str,
        folder: Path | None,
        moved_to: Path | None,
    ) -> int:
        records = list(db.scalars(select(JobRecord).where(JobRecord.user == name)))
        for record in records:
            record.user = archived_as
            if record.credit_account == f"user:{name}":
                record.credit_account = f"user:{archived_as}"
            if folder is not None and moved_to is not None:
                # the job's files moved with the folder: the admin still reads its log
                for column in ("source_file", "snapshot_file", "output_file", "job_dir"):
                    setattr(record, column, _moved(getattr(record, column), folder, moved_to))
        return len(records)

    def _remove_jobs(self, db: Session, name: str) -> int:
        from . import metering

        records = list(db.scalars(select(JobRecord).where(JobRecord.user == name)))
        for record in records:
            delete_samples(db, record.id)
            if record.finished_at is not None:
                self.charge(db, record)  # before its record goes, if not yet
            metering.retire(db, record)  # its GPU time stays counted
            db.delete(record)
        db.flush()
        return len(records)

    # -- the tables ----------------------------------------------------------------------

    def _remember(self, name: str, created: str) -> str | None:
        """Record ``name`` as made at ``created`` if it is new; the ``created`` known
        before (None: new)."""
        with self.ctx.sessions() as db:
            known = db.get(KnownUser, name)
            if known is not None:
                return known.hub_created
            retired = select(DeletedUserRecord.id).where(
                DeletedUserRecord.name == name, DeletedUserRecord.hub_created == created
            )
            if db.scalar(retired.limit(1)) is not None:
                raise UserGone(
                    f"the hub user {name} you call as was deleted; sign in again (a new "
                    f"{name} gets a new token)"
                )
            db.add(KnownUser(name=name, hub_created=created, first_seen=utcnow()))
            try:
                db.commit()
            except IntegrityError:  # recorded meanwhile (another request, another service)
                db.rollback()
                known = db.get(KnownUser, name)
                return known.hub_created if known is not None else None
            return None

    def _set_known(self, name: str, created: str) -> None:
        with self.ctx.sessions() as db:
            known = db.get(KnownUser, name)
            if known is None:
                db.add(KnownUser(name=name, hub_created=created, first_seen=utcnow()))
            else:
                known.hub_created, known.first_seen = created, utcnow()
            db.commit()

    def _forget_known(self, name: str) -> None:
        with self.ctx.sessions() as db:
            db.execute(delete(KnownUser).where(KnownUser.name == name))
            db.commit()

    def _known_created(self, name: str) -> str | None:
        with self.ctx.sessions() as db:
            return db.scalar(select(KnownUser.hub_created).where(KnownUser.name == name))

    def _all_known(self) -> dict[str, str]:
        with self.ctx.sessions() as db:
            return {n: c for n, c in db.execute(select(KnownUser.name, KnownUser.hub_created))}

    def _unique_moment(self, name: str, now: datetime) -> datetime:
        """``now``, or a second later for each retirement of ``name`` in that second: two
        retirements never share an archive name (nor an archived folder)."""
        with self.ctx.sessions() as db:
            while db.scalar(
                select(DeletedUserRecord.id).where(
                    DeletedUserRecord.archived_as == archive_name(name, now)
                )
            ):
                now += timedelta(seconds=1)
        return now

    def _add(self, record: DeletedUserRecord) -> None:
        with self.ctx.sessions() as db:
            db.add(record)
            db.commit()

    def deleted(self, limit: int = 200) -> list[DeletedUserRecord]:
        """The users retired, newest first (the dashboard's Users view)."""
        with self.ctx.sessions() as db:
            return list(
                db.scalars(
                    select(DeletedUserRecord)
                    .order_by(DeletedUserRecord.noticed_at.desc(), DeletedUserRecord.id.desc())
                    .limit(limit)
                )
            )

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())


def _count(db: Session, condition: Any) -> int:
    table = condition.left.table
    return int(db.scalar(select(func.count()).select_from(table).where(condition)) or 0)


def _moved(path: str, folder: Path, moved_to: Path) -> str:
    """``path`` inside ``folder`` as it is now inside ``moved_to`` (else unchanged)."""
    try:
        return str(moved_to / Path(path).relative_to(folder))
    except ValueError:
        return path


def _carry_credits(db: Session, name: str, archived_as: str) -> None:
    """Carry what the ledger holds for ``user:NAME`` over to the archive name, in two
    entries (the ledger is never rewritten): the next person starts from the standing
    credits nbjobs.yaml gives, with nothing of the earlier one's grants or charges."""
    account, archive = f"user:{name}", f"user:{archived_as}"
    balance = db.scalar(
        select(func.sum(CreditEntryRow.amount)).where(CreditEntryRow.account == account)
    )
    if not balance:
        return
    now = utcnow()
    if db.get(CreditAccountRow, archive) is None:
        db.add(CreditAccountRow(name=archive, made_at=now))
    note = f"{name} was deleted: their balance carried to {archive}"[:300]
    db.add(CreditEntryRow(at=now, account=account, kind="grant", amount=-balance, by=BY, note=note))
    note = f"carried over from {account} when {name} was deleted"[:300]
    db.add(CreditEntryRow(at=now, account=archive, kind="grant", amount=balance, by=BY, note=note))
