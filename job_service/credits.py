"""Credits: accounts that pay for jobs on priced flavors (nbjobs.yaml ``credits``).

An account is a user's (``user:ada``), a class's (``class:ml101``) or a group's
(``group:physics``). It holds its standing credits from nbjobs.yaml plus what admins, and
teachers within their classes, granted, less what its jobs cost. A job is paid from the
first account its owner has: their own, then their classes' (as a student, by name),
then their groups' (by name); an account exists once nbjobs.yaml names it or it was
granted credits.

At submission the job's worst case (its time limit x its GPUs x its flavor's price) is
held on the account, in the transaction that queues it and under a lock on the account
(a row lock on PostgreSQL, SQLite's one writer): a submission the account's available
credits cannot cover is refused with a sentence, and fifty submissions at once never
overdraw it. When the job has ended it is charged what it cost (its GPU-hours x the
price, never more than was held) and the hold goes; a job deleted first is charged
then. Grants and charges are rows of ``nbjobs_credit_entries``, which the database
itself refuses to change or delete (triggers of revision 0006).
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Float, Integer, String, func, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, Session, mapped_column

from nbjobs.config import Flavor
from nbjobs.models import FINAL_STATES, CreditAccount, CreditEntry, CreditStatement
from nbjobs.units import figure, limit_figure

from .db import Base, JobRecord, UTCDateTime, rowcount, utcnow
from .errors import Caller, Forbidden, Invalid, NotFound, ServiceError
from .periodic import InRounds, Periodic, until_short

if TYPE_CHECKING:
    from .context import Context

KINDS = ("user", "class", "group")
#: seconds between rounds that charge ended jobs
ROUND = 10.0
#: jobs charged in one transaction
PER_ROUND = 500
#: jobs on their account not charged yet, in SQL (the partial index's condition)
UNCHARGED = "credit_account IS NOT NULL AND credits_charged = false"

_FINAL_VALUES = [state.value for state in FINAL_STATES]


class PaymentRequired(ServiceError):
    """A job its account cannot pay for."""

    status = 402


class CreditAccountRow(Base):
    """An account, as a row to lock while a submission holds credits on it."""

    __tablename__ = "nbjobs_credit_accounts"

    name: Mapped[str] = mapped_column(String(300), primary_key=True)
    made_at: Mapped[datetime] = mapped_column(UTCDateTime)


class CreditEntryRow(Base):
    """A grant or a charge: dated, kept for ever (the database refuses to change it)."""

    __tablename__ = "nbjobs_credit_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    account: Mapped[str] = mapped_column(String(300), index=True)
    #: grant or charge
    kind: Mapped[str] = mapped_column(String(8))
    #: credits added (a negative grant takes some back) or taken (a charge, < 0)
    amount: Mapped[float] = mapped_column(Float)
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True, unique=True)
    by: Mapped[str] = mapped_column(String(255))
    note: Mapped[str] = mapped_column(String(300), default="")


def split(account: str) -> tuple[str, str]:
    """``user:ada`` as (``user``, ``ada``); Invalid with a sentence for anything else."""
    kind, _, name = account.partition(":")
    if kind not in KINDS or not name or len(account) > 300:
        raise Invalid(f"{account!r} is no account: write user:NAME, class:NAME or group:NAME")
    return kind, name


class Credits(InRounds):
    """Holds, charges and grants; the accounts' statements."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._rounds = Periodic(
            self.sweep, lambda: ROUND, what="charging ended jobs' credits", log=lambda: ctx.log
        )
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.ctx.config.credits.enabled

    # -- the rounds ----------------------------------------------------------------------

    def wanted(self) -> bool:
        return self.enabled

    async def sweep(self) -> int:
        """Charge every ended job not charged yet; how many were."""
        return await until_short(lambda: self.ctx.in_db(self._charge_round), PER_ROUND)

    def _charge_round(self) -> int:
        with self.ctx.sessions() as db:
            records = db.scalars(
                select(JobRecord)
                .where(text(f"nbjobs_jobs.{UNCHARGED}"), JobRecord.state.in_(_FINAL_VALUES))
                .limit(PER_ROUND)
            ).all()
            done = sum(self.charge(db, record) for record in records)
            db.commit()
            return done

    # -- what an account has ---------------------------------------------------------------

    def standing(self, account: str) -> float | None:
        """The credits nbjobs.yaml gives ``account`` (None: it names none for it)."""
        kind, name = split(account)
        settings = self.ctx.config.credits
        if kind == "user":
            if name in settings.users:
                return settings.users[name]
            return settings.each_user or None
        named = settings.classes if kind == "class" else settings.groups
        return named.get(name)

    def _ledger_accounts(self, db: Session, accounts: Iterable[str] | None = None) -> set[str]:
        query = select(CreditEntryRow.account).distinct()
        if accounts is not None:
            query = query.where(CreditEntryRow.account.in_(list(accounts)))
        return set(db.scalars(query).all())

    def candidates(self, caller: Caller) -> list[str]:
        """The accounts that could pay for ``caller``'s jobs, in the order they would."""
        classes = sorted(c.name for c in self.ctx.classes.all() if caller.name in c.students)
        return [
            f"user:{caller.name}",
            *(f"class:{c}" for c in classes),
            *(f"group:{g}" for g in sorted(caller.groups)),
        ]

    def payer(self, db: Session, caller: Caller) -> str | None:
        """The account that pays for ``caller``'s jobs (None: they have none)."""
        candidates = self.candidates(caller)
        in_ledger = self._ledger_accounts(db, candidates)
        for account in candidates:
            if account in in_ledger or self.standing(account) is not None:
                return account
        return None

    def summary(self, db: Session, account: str, payer: str | None = None) -> CreditAccount:
        """One account with its balance, what is held and what is available."""
        return self.summaries(db, [account], payer)[0]

    def summaries(
        self, db: Session, accounts: list[str], payer: str | None = None
    ) -> list[CreditAccount]:
        """Accounts with their balances, in three queries whatever their number (a
        dashboard lists hundreds)."""
        sums: dict[tuple[str, str], float] = {
            (account, kind): float(total or 0.0)
            for account, kind, total in db.execute(
                select(CreditEntryRow.account, CreditEntryRow.kind, func.sum(CreditEntryRow.amount))
                .where(CreditEntryRow.account.in_(accounts))
                .group_by(CreditEntryRow.account, CreditEntryRow.kind)
            ).all()
        }
        holds: dict[str | None, float] = {
            account: float(total or 0.0)
            for account, total in db.execute(
                select(JobRecord.credit_account, func.sum(JobRecord.credit_hold))
                .where(JobRecord.credit_account.in_(accounts), text(f"nbjobs_jobs.{UNCHARGED}"))
                .group_by(JobRecord.credit_account)
            ).all()
        }
        found = []
        for account in accounts:
            kind, name = split(account)
            standing = self.standing(account) or 0.0
            granted = sums.get((account, "grant"), 0.0)
            charged = 0.0 - sums.get((account, "charge"), 0.0)  # 0.0 - : never -0.0
            held = holds.get(account, 0.0)
            balance = standing + granted - charged
            found.append(
                CreditAccount(
                    account=account,
                    kind=kind,  # type: ignore[arg-type]
                    name=name,
                    standing=round(standing, 4),
                    granted=round(granted, 4),
                    charged=round(charged, 4),
                    held=round(held, 4),
                    balance=round(balance, 4),
                    available=round(balance - held, 4),
                    pays_for_you=account == payer,
                )
            )
        return found

    # -- holding, at submission ------------------------------------------------------------

    def hold(
        self, db: Session, caller: Caller, flavor: Flavor, time_limit: float | None
    ) -> tuple[str, float, float] | None:
        """Hold the worst case of a job of ``flavor`` on ``caller``'s account, in ``db``'s
        transaction (the caller commits it with the job): (account, credits held, price),
        or None when the job costs nothing. Raises :class:`PaymentRequired` with a
        sentence when the account cannot cover it, or there is none."""
        price = flavor.cost_per_gpu_hour
        if not self.enabled or not price or not flavor.gpus:
            return None
        hours = (time_limit or 0.0) / 3600
        worst = round(flavor.gpu_equivalents * hours * price, 4)
        account = self.payer(db, caller)
        if account is None:
            raise PaymentRequired(
                f"flavor {flavor.name!r} costs {limit_figure(price)} credits a GPU-hour and you "
                "have no credits: ask your teacher or admin for some, or use a flavor without "
                "a price"
            )
        self._lock_account(db, account)
        found = self.summary(db, account)
        if found.available < worst:
            raise PaymentRequired(
                f"this job may cost up to {figure(worst)} credits "
                f"({limit_figure(flavor.gpu_equivalents)} GPU x {figure(hours)} h at "
                f"{limit_figure(price)}) and {account} has "
                f"{figure(found.available, against=worst)} available "
                f"({figure(found.balance)}, less {figure(found.held)} held for jobs not "
                "ended): ask for a "
                "shorter time limit, a smaller flavor, or more credits"
            )
        return account, worst, price

    def _lock_account(self, db: Session, account: str) -> None:
        """Take ``account``'s row lock for the rest of ``db``'s transaction (made if new):
        submissions on one account hold credits one after the other."""
        dialect = db.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        db.execute(
            insert(CreditAccountRow)
            .values(name=account, made_at=utcnow())
            .on_conflict_do_nothing(index_elements=["name"])
        )
        db.execute(
            update(CreditAccountRow)
            .where(CreditAccountRow.name == account)
            .values(name=CreditAccountRow.name)
            .execution_options(synchronize_session=False)
        )

    # -- charging, at the end --------------------------------------------------------------

    def charge(self, db: Session, record: JobRecord) -> int:
        """Charge an ended job's account what it cost, in ``db``'s transaction, once: 1 if
        this call did (another service's round may have), else 0."""
        if record.credit_account is None or record.credits_charged:
            return 0
        marked = rowcount(
            db,
            update(JobRecord)
            .where(JobRecord.id == record.id, text(f"nbjobs_jobs.{UNCHARGED}"))
            .values(credits_charged=True),
        )
        if not marked:
            return 0
        hours = (record.gpu_seconds_held or 0.0) / 3600
        cost = min(record.credit_hold or 0.0, hours * (record.credit_price or 0.0))
        if cost > 0:
            db.add(
                CreditEntryRow(
                    at=utcnow(),
                    account=record.credit_account,
                    kind="charge",
                    amount=-round(cost, 4),
                    job_id=record.id,
                    by=record.user,
                    note=f"{record.name} ({record.flavor}): {hours:.3f} GPU-hours at "
                    f"{record.credit_price:g}",
                )
            )
        return 1

    # -- what callers see and do -----------------------------------------------------------

    def _taught(self, caller: Caller) -> tuple[set[str], set[str]]:
        """The classes ``caller`` teaches, and their students."""
        taught = list(self.ctx.classes.taught_by(caller.name))
        return {c.name for c in taught}, {s for c in taught for s in c.students}

    def may_see(self, caller: Caller, account: str) -> bool:
        if caller.admin or account in self.candidates(caller):
            return True
        kind, name = split(account)
        classes, students = self._taught(caller)
        return (kind == "class" and name in classes) or (kind == "user" and name in students)

    def accounts(self, caller: Caller) -> list[CreditAccount]:
        """The accounts ``caller`` may see that exist: theirs, those that pay for them,
        their classes' and their students' (teachers), every one (admins)."""
        settings = self.ctx.config.credits
        with self.ctx.sessions() as db:
            named = {
                *(f"user:{u}" for u in settings.users),
                *(f"class:{c}" for c in settings.classes),
                *(f"group:{g}" for g in settings.groups),
            }
            if settings.each_user:
                named.add(f"user:{caller.name}")
            existing = self._ledger_accounts(db) | named
            shown = sorted(a for a in existing if self.may_see(caller, a))
            return self.summaries(db, shown, self.payer(db, caller))

    def statement(self, caller: Caller, account: str) -> CreditStatement:
        """``account`` with every grant and charge, oldest first, each with the balance
        it left."""
        split(account)
        if not self.may_see(caller, account):
            raise NotFound(f"no account {account} of yours; `nbjobs credits` lists yours")
        with self.ctx.sessions() as db:
            summary = self.summary(db, account, self.payer(db, caller))
            rows = db.scalars(
                select(CreditEntryRow)
                .where(CreditEntryRow.account == account)
                .order_by(CreditEntryRow.at, CreditEntryRow.id)
            ).all()
        balance = summary.standing
        entries = []
        for row in rows:
            balance += row.amount
            entries.append(
                CreditEntry(
                    at=row.at,
                    kind=row.kind,  # type: ignore[arg-type]
                    amount=row.amount,
                    balance=round(balance, 4),
                    job_id=row.job_id,
                    by=row.by,
                    note=row.note,
                )
            )
        return CreditStatement(account=summary, entries=entries)

    def grant(self, caller: Caller, account: str, amount: float, note: str) -> CreditAccount:
        """Add ``amount`` credits to ``account`` (admins: any, and may take some back;
        teachers: their classes' accounts and their students')."""
        kind, name = split(account)
        if not caller.admin:
            classes, students = self._taught(caller)
            if not ((kind == "class" and name in classes) or (kind == "user" and name in students)):
                raise Forbidden(
                    "teachers grant credits to their classes' accounts (class:NAME) and their "
                    "students' (user:NAME); admins grant any"
                )
            if amount <= 0:
                raise Forbidden("only admins may take credits back; grant a positive amount")
        if kind == "class" and self.ctx.classes.get(name) is None:
            raise NotFound(f"no class {name!r}; `nbjobs class list` shows the classes")
        if amount == 0:
            raise Invalid("grant some credits: the amount is 0")
        with self.ctx.sessions() as db:
            db.add(
                CreditEntryRow(
                    at=utcnow(),
                    account=account,
                    kind="grant",
                    amount=amount,
                    by=caller.name,
                    note=note.strip(),
                )
            )
            db.commit()
            self.ctx.log.info(
                "credits: %s granted %g to %s (%s)", caller.name, amount, account, note
            )
            return self.summary(db, account)


def statement_csv(statement: CreditStatement) -> str:
    """A statement as CSV: a header, then a row per grant and charge."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["at", "account", "kind", "amount", "balance", "job_id", "by", "note"])
    for entry in statement.entries:
        writer.writerow(
            [
                entry.at.isoformat(),
                statement.account.account,
                entry.kind,
                f"{entry.amount:.4f}",
                f"{entry.balance:.4f}",
                entry.job_id or "",
                entry.by,
                # a spreadsheet runs a cell that starts with = + - @: shown as text
                f"'{entry.note}" if entry.note[:1] in ("=", "+", "-", "@") else entry.note,
            ]
        )
    return out.getvalue()
