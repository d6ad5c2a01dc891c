"""The tables of notifications: what users want told, and every message with its
attempts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..db import Base, UTCDateTime


class NotifySettingRecord(Base):
    """Where and when one user is told: their default, or for one job or definition."""

    __tablename__ = "nbjobs_notify_settings"
    __table_args__ = (UniqueConstraint("user", "scope", name="uq_nbjobs_notify_scope"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user: Mapped[str] = mapped_column(String(255), index=True)
    #: ``user`` (the default), ``job:<id>`` or ``definition:<id>``
    scope: Mapped[str] = mapped_column(String(64))
    email: Mapped[str | None] = mapped_column(String(320), nullable=True)
    webhook: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: ``json``, ``slack`` or ``teams``
    webhook_format: Mapped[str] = mapped_column(String(16), default="json")
    #: the events told: succeeded, failed, timed_out, cancelled, queued_long, run_refused
    events: Mapped[list[str]] = mapped_column(JSON, default=list)
    #: queued_long: after how many minutes of waiting
    queue_minutes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class NotificationRecord(Base):
    """One message on one channel, and what became of it."""

    __tablename__ = "nbjobs_notifications"
    __table_args__ = (
        # the sender's one query: what is due, soonest first
        Index("ix_nbjobs_notifications_due", "state", "next_attempt_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: what it is about, once per channel: ``failed:job:<id>:email`` (unique: an event is
    #: never queued twice, whatever restarts happen)
    key: Mapped[str] = mapped_column(String(128), unique=True)
    user: Mapped[str] = mapped_column(String(255), index=True)
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    definition_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    event: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(16))
    target: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    #: the webhook's JSON body (None for mail)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: ``pending``, ``sending`` (claimed by the sender), ``sent`` or ``failed`` (given up)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: every attempt: ``{"at": ..., "ok": ..., "error": ...}``
    attempts: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    claim: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AddressRecord(Base):
    """A mail address a user asked to be told at, and whether they showed it is theirs
    (by the code mailed to it)."""

    __tablename__ = "nbjobs_mail_addresses"
    __table_args__ = (UniqueConstraint("user", "address", name="uq_nbjobs_mail_address"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user: Mapped[str] = mapped_column(String(255), index=True)
    #: the address, lowercased
    address: Mapped[str] = mapped_column(String(320))
    #: SHA-256 of the code last mailed to it (the code itself is kept nowhere)
    code_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    code_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


def notification(
    user: str,
    event: str,
    key: str,
    channel: str,
    target: str,
    message: Any,
    now: datetime,
    *,
    payload: dict[str, Any] | None = None,
    state: str = "pending",
    job_id: str | None = None,
    definition_id: str | None = None,
) -> NotificationRecord:
    """A new message to send (``message``: a :class:`~.messages.Message`), due now."""
    return NotificationRecord(
        id=uuid.uuid4().hex[:12],
        key=key,
        user=user,
        job_id=job_id,
        definition_id=definition_id,
        event=event,
        channel=channel,
        target=target,
        subject=message.subject,
        text=message.text,
        payload=payload,
        state=state,
        next_attempt_at=now,
        attempts=[],
        created_at=now,
    )
