"""Mail goes only to addresses their users showed are theirs.

Any address in an allowed domain used to be accepted, so a student could have the
service mail a classmate ("Your grade is F - from the dean") as often as jobs end.
Now an address a user gives is *unconfirmed* until they enter the code the service
mails to it (``POST api/notifications/confirm``, ``nbjobs notify --confirm CODE``, the
Lab's Notifications dialog); nothing else is sent there before. Where the hub's user
names are verified addresses (``notifications.email.names_are_addresses``), a user's
own name needs no code.

The confirmation mail itself is bounded: one per address per :data:`RESEND_AFTER`,
:data:`CODES_PER_DAY` per user and day. Codes are random, kept only as hashes, expire after
:data:`CODE_LIFETIME`, and :data:`WRONG_CODES_PER_HOUR` wrong ones lock a user out
for the hour.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import uuid
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from nbjobs.config import NotificationsConfig

from ..errors import Invalid, OverQuota
from .store import AddressRecord, NotificationRecord

#: letters and digits that cannot be mistaken for one another
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTVWXYZ23456789"
CODE_LENGTH = 10
RESEND_AFTER = timedelta(minutes=10)
CODE_LIFETIME = timedelta(days=7)
CODES_PER_DAY = 5
WRONG_CODES_PER_HOUR = 10
#: the outbox's event for a confirmation mail
CONFIRM_EVENT = "confirm_email"


def _hash(code: str) -> str:
    return hashlib.sha256(code.strip().upper().replace("-", "").encode()).hexdigest()


def owns(db: Session, config: NotificationsConfig, user: str, address: str) -> bool:
    """Whether ``user`` showed ``address`` is theirs (or their name is it, where names
    are addresses)."""
    address = address.strip().lower()
    email = config.email
    if email is not None and email.names_are_addresses and user.lower() == address:
        return True
    return (
        db.scalar(
            select(AddressRecord.id).where(
                AddressRecord.user == user,
                AddressRecord.address == address,
                AddressRecord.confirmed_at.is_not(None),
            )
        )
        is not None
    )


def new_code(db: Session, user: str, address: str, now: datetime) -> str | None:
    """A code to mail to ``address`` for ``user`` (None: one went there less than
    :data:`RESEND_AFTER` ago; that one still stands). Too many today: :class:`OverQuota`."""
    address = address.strip().lower()
    record = db.scalars(
        select(AddressRecord).where(AddressRecord.user == user, AddressRecord.address == address)
    ).first()
    if record is not None and record.code_sent_at and now - record.code_sent_at < RESEND_AFTER:
        return None
    sent_today = db.scalar(
        select(func.count())
        .select_from(NotificationRecord)
        .where(
            NotificationRecord.user == user,
            NotificationRecord.event == CONFIRM_EVENT,
            NotificationRecord.created_at >= now - timedelta(days=1),
        )
    )
    if (sent_today or 0) >= CODES_PER_DAY:
        raise OverQuota(
            f"nbjobs mailed {CODES_PER_DAY} confirmation codes for you in the last day; "
            "enter one of those (nbjobs notify --confirm CODE), or try again tomorrow"
        )
    if record is None:
        record = AddressRecord(id=uuid.uuid4().hex[:12], user=user, address=address, created_at=now)
        db.add(record)
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    record.code_hash, record.code_sent_at = _hash(code), now
    return f"{code[:5]}-{code[5:]}"


class WrongCodes:
    """Wrong codes per user in the last hour (in this service's memory: a guess at a
    50-bit code is hopeless anyway; this stops a script from trying)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tries: dict[str, list[datetime]] = {}

    def check(self, user: str, now: datetime) -> None:
        with self._lock:
            recent = [t for t in self._tries.get(user, []) if now - t < timedelta(hours=1)]
            self._tries[user] = recent
            if len(recent) >= WRONG_CODES_PER_HOUR:
                raise OverQuota(
                    f"{WRONG_CODES_PER_HOUR} wrong codes in the last hour; wait an hour, "
                    "then copy the code from the newest mail nbjobs sent you"
                )

    def count(self, user: str, now: datetime) -> None:
        with self._lock:
            self._tries.setdefault(user, []).append(now)


def confirm(db: Session, user: str, code: str, now: datetime, wrong: WrongCodes) -> str:
    """Mark the address ``code`` was mailed to as ``user``'s; that address."""
    wrong.check(user, now)
    record = db.scalars(
        select(AddressRecord).where(
            AddressRecord.user == user, AddressRecord.code_hash == _hash(code)
        )
    ).first()
    if record is None or record.code_sent_at is None or now - record.code_sent_at > CODE_LIFETIME:
        wrong.count(user, now)
        raise Invalid(
            "that code confirms no address of yours (codes last 7 days, and only the newest "
            "mailed to an address counts); save the address again to be mailed a new one"
        )
    record.confirmed_at, record.code_hash = now, None
    db.commit()
    return record.address
