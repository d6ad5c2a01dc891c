"""The outbox: what to tell, queued once; then sent apart from everything else.

Two rounds run in the service that holds the dispatcher lease:

- **finding** (every few seconds, one transaction, no network): jobs that ended since
  and were not told yet, jobs queued longer than their owner's ``queue_minutes``, and
  scheduled runs that were refused. For each, the owner's settings (the job's own, its
  definition's, else their default) decide the channels; one message per channel is
  queued under a unique key, and the job or run is marked told, in the same commit.
  Mail goes only to an address the user confirmed (:mod:`.addresses`). Past
  ``rate_limit.messages`` in ``rate_limit.period`` for one user and channel, messages
  are ``held``; once the period has room, the held ones go as one summary.
- **sending** (every second or two): messages due are claimed with a conditional
  UPDATE, sent with no transaction open (mail through SMTP on a thread, webhooks with
  tornado's client, no redirects followed), and every attempt is recorded. A failure
  is tried again after ``first_delay``, doubling up to ``max_delay``, until
  ``attempts``; then the message is ``failed``, its attempts there to read.

Nothing here touches a job: a mail server that hangs delays only mail.
"""

from __future__ import annotations

import asyncio
import json
import os
import smtplib
import ssl
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from nbjobs.config import EmailConfig, NotificationsConfig

from ..db import JobRecord, rowcount, utcnow
from ..periodic import Periodic
from ..schedules.store import DefinitionRecord, DefinitionRunRecord
from .addresses import CONFIRM_EVENT, owns
from .messages import Message, job_message, refused_message, summary_message, webhook_body
from .models import Notification, NotificationList
from .settings import email_problem, webhook_problem
from .store import NotificationRecord, NotifySettingRecord, notification

if TYPE_CHECKING:
    from ..context import Context

#: ended jobs older than this are not told (a service upgraded onto a database of old
#: jobs does not mail about all of them)
RECENT = timedelta(hours=6)
#: messages sent at once, at most
SEND_BATCH = 20
#: a message ``sending`` for longer than this was interrupted (a crash): send it again
STALE_SEND = timedelta(minutes=5)
ENDS = ("succeeded", "failed", "timed_out", "cancelled")
#: mails sent at once (SMTP is blocking; each takes a thread of the outbox's own)
MAIL_THREADS = 4


class Outbox:
    """Finds what to tell and sends it, while this service holds the lease."""

    def __init__(self, ctx: Context, clock: Callable[[], datetime] = utcnow) -> None:
        self.ctx = ctx
        self.clock = clock
        self._finding = Periodic(
            lambda: ctx.in_db(self.find),
            lambda: 3.0,
            what="finding what to tell users",
            log=lambda: ctx.log,
        )
        self._mail_threads = ThreadPoolExecutor(MAIL_THREADS, thread_name_prefix="nbjobs-mail")
        self._sending = Periodic(
            self.send_due,
            lambda: 1.0,
            what="sending notifications",
            log=lambda: ctx.log,
        )

    @property
    def config(self) -> NotificationsConfig:
        return self.ctx.config.notifications

    def run(self) -> None:
        if self.config.email is not None or self.config.webhook is not None:
            self._finding.run()
            self._sending.run()

    async def stop(self) -> None:
        """No more rounds (a round can still be run by hand, as tests do)."""
        await self._finding.stop()
        await self._sending.stop()

    def close(self) -> None:
        """Let the mail threads go (the service is stopping): a mail in flight is left
        to its timeout, and tried again by the next ctx."""
        self._mail_threads.shutdown(wait=False, cancel_futures=True)

    def halt(self) -> None:
        self._finding.halt()
        self._sending.halt()

    # -- finding -------------------------------------------------------------------------

    def find(self) -> int:
        """Queue what there is to tell; how many messages were queued."""
        now = self.clock()
        queued = 0
        with self.ctx.sessions() as db:
            ended = db.scalars(
                select(JobRecord).where(
                    JobRecord.finished_at.is_not(None),
                    JobRecord.finished_at >= now - RECENT,
                    JobRecord.notified_end.is_(None),
                    JobRecord.state.in_(ENDS),
                )
            ).all()
            for job in ended:
                queued += self._queue_for_job(db, job, job.state, now)
                job.notified_end = 1
            # Only the jobs of users who asked to hear of long waits: the others' queued
            # jobs are never told, and would be looked at again every round.
            waiters = db.scalars(
                select(NotifySettingRecord.user)
                .where(NotifySettingRecord.queue_minutes.is_not(None))
                .distinct()
            ).all()
            waiting = db.scalars(
                select(JobRecord).where(
                    JobRecord.state == "queued",
                    JobRecord.notified_wait.is_(None),
                    JobRecord.submitted_at <= now - timedelta(minutes=1),
                    JobRecord.user.in_(waiters),
                )
            ).all()
            for job in waiting:
                setting = self._setting_for(db, job.user, job.id, job.definition_id)
                minutes = setting.queue_minutes if setting is not None else None
                if minutes is None or job.submitted_at > now - timedelta(minutes=minutes):
                    continue
                queued += self._queue_for_job(db, job, "queued_long", now)
                job.notified_wait = 1
            refused = db.scalars(
                select(DefinitionRunRecord).where(
                    DefinitionRunRecord.state == "refused", DefinitionRunRecord.notified.is_(None)
                )
            ).all()
            for run in refused:
                definition = db.get(DefinitionRecord, run.definition_id)
                run.notified = 1
                if definition is None:
                    continue
                setting = self._setting_for(db, definition.user, None, definition.id)
                if setting is None or "run_refused" not in setting.events:
                    continue
                message = refused_message(definition.name, definition.id, run.reason or "")
                queued += self._queue(
                    db, setting, "run_refused", f"run:{run.id}", message, now, None, definition.id
                )
            queued += self._summarise(db, now)
            try:
                db.commit()
            except IntegrityError:  # queued by another process meanwhile: theirs stands
                db.rollback()
                return 0
        return queued

    def _setting_for(
        self, db: Session, user: str, job_id: str | None, definition_id: str | None
    ) -> NotifySettingRecord | None:
        """The most specific of the user's settings: the job's, its definition's, theirs."""
        scopes = [f"job:{job_id}"] if job_id else []
        scopes += [f"definition:{definition_id}"] if definition_id else []
        scopes.append("user")
        found = {
            r.scope: r
            for r in db.scalars(
                select(NotifySettingRecord).where(
                    NotifySettingRecord.user == user, NotifySettingRecord.scope.in_(scopes)
                )
            )
        }
        return next((found[s] for s in scopes if s in found), None)

    def _queue_for_job(self, db: Session, job: JobRecord, event: str, now: datetime) -> int:
        setting = self._setting_for(db, job.user, job.id, job.definition_id)
        if setting is None or event not in setting.events:
            return 0
        message = job_message(event, job, self.config.links_base, now)
        return self._queue(db, setting, event, f"job:{job.id}", message, now, job.id, None)

    def _queue(
        self,
        db: Session,
        setting: NotifySettingRecord,
        event: str,
        about: str,
        message: Message,
        now: datetime,
        job_id: str | None,
        definition_id: str | None,
    ) -> int:
        queued = 0
        channels = [("email", setting.email), ("webhook", setting.webhook)]
        for channel, target in channels:
            if not target:
                continue
            if channel == "email" and not owns(db, self.config, setting.user, target):
                continue  # never confirmed as theirs: nothing goes there
            over = (
                self._sent_lately(db, setting.user, channel, now) >= self.config.rate_limit.messages
            )
            db.add(
                notification(
                    setting.user,
                    event,
                    f"{event}:{about}:{channel}",
                    channel,
                    target,
                    message,
                    now,
                    payload=webhook_body(event, message, setting.webhook_format)
                    if channel == "webhook"
                    else None,
                    state="held" if over else "pending",
                    job_id=job_id,
                    definition_id=definition_id,
                )
            )
            queued += 1
        return queued

    def _sent_lately(self, db: Session, user: str, channel: str, now: datetime) -> int:
        """Messages to ``user`` on ``channel`` within the rate limit's period (held ones
        and confirmation mails aside)."""
        since = now - timedelta(seconds=float(self.config.rate_limit.period or 3600))
        return int(
            db.scalar(
                select(func.count())
                .select_from(NotificationRecord)
                .where(
                    NotificationRecord.user == user,
                    NotificationRecord.channel == channel,
                    NotificationRecord.created_at >= since,
                    NotificationRecord.state.not_in(("held", "summarised")),
                    NotificationRecord.event != CONFIRM_EVENT,
                )
            )
            or 0
        )

    def _summarise(self, db: Session, now: datetime) -> int:
        """Held messages, one summary per user and channel once the period has room."""
        held = db.scalars(
            select(NotificationRecord)
            .where(NotificationRecord.state == "held")
            .order_by(NotificationRecord.created_at)
        ).all()
        groups: dict[tuple[str, str, str], list[NotificationRecord]] = {}
        for record in held:
            groups.setdefault((record.user, record.channel, record.target), []).append(record)
        queued = 0
        for (user, channel, target), records in groups.items():
            if self._sent_lately(db, user, channel, now) >= self.config.rate_limit.messages:
                continue
            message = summary_message([r.subject for r in records], records[0].created_at)
            form = "json"
            if channel == "webhook":
                default = self._setting_for(db, user, None, None)
                form = default.webhook_format if default is not None else "json"
            db.add(
                notification(
                    user,
                    "summary",
                    f"summary:{uuid.uuid4().hex}",
                    channel,
                    target,
                    message,
                    now,
                    payload=webhook_body("summary", message, form)
                    if channel == "webhook"
                    else None,
                )
            )
            for record in records:
                record.state = "summarised"
            queued += 1
        return queued

    # -- sending -------------------------------------------------------------------------

    async def send_due(self) -> int:
        """Send what is due, all at once; how many were tried."""
        claim = uuid.uuid4().hex[:12]
        due = await self.ctx.in_db(self._claim, claim)
        await asyncio.gather(*(self._send_one(item) for item in due))
        return len(due)

    def _claim(self, claim: str) -> list[dict[str, Any]]:
        now = self.clock()
        with self.ctx.sessions() as db:
            ids = db.scalars(
                select(NotificationRecord.id)
                .where(
                    or_(
                        (NotificationRecord.state == "pending")
                        & (NotificationRecord.next_attempt_at <= now),
                        (NotificationRecord.state == "sending")
                        & (NotificationRecord.next_attempt_at <= now - STALE_SEND),
                    )
                )
                .order_by(NotificationRecord.next_attempt_at)
                .limit(SEND_BATCH)
            ).all()
            if not ids:
                return []
            rowcount(
                db,
                update(NotificationRecord)
                .where(
                    NotificationRecord.id.in_(ids),
                    NotificationRecord.state.in_(("pending", "sending")),
                )
                .values(state="sending", claim=claim, next_attempt_at=now),
            )
            db.commit()
            rows = db.scalars(
                select(NotificationRecord).where(NotificationRecord.claim == claim)
            ).all()
            return [
                {
                    "id": r.id,
                    "channel": r.channel,
                    "target": r.target,
                    "subject": r.subject,
                    "text": r.text,
                    "payload": r.payload,
                    "claim": claim,
                }
                for r in rows
            ]

    async def _send_one(self, item: dict[str, Any]) -> None:
        error: str | None = None
        try:
            if item["channel"] == "email":
                # its own threads: a mail server that hangs holds these, never the
                # threads submits read notebooks on
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self._mail_threads, self._mail, item)
            else:
                await self._post(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure of the far side is recorded, never raised
            error = _sentence(exc)
        await self.ctx.in_db(self._record, item, error)

    def _mail(self, item: dict[str, Any]) -> None:
        config = self.config
        problem = email_problem(config, item["target"])
        if problem:
            raise SendFailed(problem)
        email = config.email
        assert email is not None
        message = EmailMessage()
        message["From"] = email.from_
        message["To"] = item["target"]
        message["Subject"] = item["subject"]
        message.set_content(item["text"])
        timeout = float(email.timeout or 20)
        if email.security == "ssl":
            context = _tls_context(email)
            with smtplib.SMTP_SSL(
                email.smtp_host, email.smtp_port, timeout=timeout, context=context
            ) as smtp:
                _log_in(smtp, email)
                smtp.send_message(message)
            return
        with smtplib.SMTP(email.smtp_host, email.smtp_port, timeout=timeout) as smtp:
            if email.security == "starttls":
                smtp.starttls(context=_tls_context(email))
            _log_in(smtp, email)
            smtp.send_message(message)

    async def _post(self, item: dict[str, Any]) -> None:
        config = self.config
        problem = webhook_problem(config, item["target"])
        if problem:
            raise SendFailed(problem)
        assert config.webhook is not None
        timeout = float(config.webhook.timeout or 10)
        request = HTTPRequest(
            item["target"],
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "nbjobs"},
            body=json.dumps(item["payload"]),
            follow_redirects=False,
            connect_timeout=timeout,
            request_timeout=timeout,
        )
        response = await AsyncHTTPClient().fetch(request, raise_error=False)
        if response.code == 599:
            # the same words for a refused connection, a timeout and an unknown name: the
            # attempts a user reads must not tell which ports of a host are open
            raise SendFailed(
                "the webhook could not be reached (no answer in time, or no connection); "
                "check its address with the service that gave it"
            )
        if not 200 <= response.code < 300:
            raise SendFailed(f"the webhook answered HTTP {response.code}")

    def _record(self, item: dict[str, Any], error: str | None) -> None:
        now = self.clock()
        config = self.config
        with self.ctx.sessions() as db:
            record = db.get(NotificationRecord, item["id"])
            if record is None or record.claim != item["claim"]:
                return  # another sender took it over meanwhile
            attempts = [*(record.attempts or []), {"at": now.isoformat(), "ok": error is None}]
            if error is not None:
                attempts[-1]["error"] = error
            record.attempts = attempts
            record.claim = None
            if error is None:
                record.state, record.sent_at = "sent", now
            elif len(attempts) >= config.attempts:
                record.state = "failed"
            else:
                delay = float(config.first_delay or 30) * 2 ** (len(attempts) - 1)
                record.state = "pending"
                record.next_attempt_at = now + timedelta(
                    seconds=min(delay, float(config.max_delay or 3600))
                )
            db.commit()
        if error is not None:
            self.ctx.metrics.notification_failed()
            self.ctx.log.warning(
                "notification %s (%s to %s): attempt %d failed: %s",
                item["id"],
                item["channel"],
                item["target"],
                len(attempts),
                error,
            )

    # -- reading -------------------------------------------------------------------------

    def list(self, caller: Any, *, user: str | None = None, limit: int = 50) -> NotificationList:
        """The caller's messages, newest first (admins: everyone's, or one user's)."""
        query = select(NotificationRecord)
        who = user if caller.admin else caller.name
        if who is not None:
            query = query.where(NotificationRecord.user == who)
        with self.ctx.sessions() as db:
            rows = db.scalars(
                query.order_by(NotificationRecord.created_at.desc()).limit(limit)
            ).all()
            return NotificationList(
                notifications=[
                    Notification(
                        id=r.id,
                        user=r.user,
                        job_id=r.job_id,
                        definition_id=r.definition_id,
                        event=r.event,
                        channel=r.channel,  # type: ignore[arg-type]
                        target=r.target,
                        subject=r.subject,
                        state=r.state,  # type: ignore[arg-type]
                        attempts=r.attempts or [],  # type: ignore[arg-type]
                        next_attempt_at=r.next_attempt_at if r.state == "pending" else None,
                        created_at=r.created_at,
                        sent_at=r.sent_at,
                    )
                    for r in rows
                ]
            )


def _tls_context(email: EmailConfig) -> ssl.SSLContext:
    """The server's certificate and host name are checked (a failed handshake fails the
    attempt: mail never goes on in the clear), against ``ca_file`` when it is set."""
    return ssl.create_default_context(cafile=email.ca_file)


def _log_in(smtp: smtplib.SMTP, email: EmailConfig) -> None:
    if not email.username:
        return
    password = None
    if email.password_file is not None:
        password = Path(email.password_file).read_text().strip()
    elif email.password_env is not None:
        password = os.environ.get(email.password_env)
    if not password:
        raise SendFailed(
            "notifications.email has a username but no password (password_file or "
            "password_env in nbjobs.yaml)"
        )
    smtp.login(email.username, password)


class SendFailed(Exception):
    """A message not sent, for a reason this module words itself."""


def _sentence(exc: BaseException) -> str:
    """What an attempt's record says: this module's own sentence, or the error's kind
    and text (``ConnectionRefusedError: [Errno 111] Connection refused``)."""
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, SendFailed) else f"{type(exc).__name__}: {text}"
