"""What each user wants told, and where: checked when it is set.

An address must be in a domain the admin allows (``notifications.email.allowed_domains``)
and the user's own: confirmed by the code mailed to it (:mod:`.addresses`);
a webhook must be ``https://`` (``http://`` only where the admin allows it) to a host
the admin lists (``notifications.webhook.allowed_hosts``), with no user name or
password in it. So a user cannot make the service send mail anywhere, or call an
address inside the cluster; the sender checks again before each attempt (the admin
may have changed the lists) and follows no redirect.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from nbjobs.config import NotificationsConfig

from ..db import JobRecord, rowcount, utcnow
from ..errors import Caller, Conflict, Invalid, NotFound, first_problem
from ..schedules.store import DefinitionRecord
from .addresses import CONFIRM_EVENT, WrongCodes, confirm, new_code, owns
from .messages import confirm_message
from .models import AddressConfirmed, NotifySettings, NotifySettingsInfo, NotifySettingsList
from .store import NotifySettingRecord, notification

if TYPE_CHECKING:
    from ..context import Context

_ADDRESS = re.compile(r"^[^@\s<>\"',;]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)$")


def email_problem(config: NotificationsConfig, address: str) -> str | None:
    """Why mail may not go to ``address`` (None: it may)."""
    if config.email is None:
        return "this service sends no mail (notifications.email is not set in nbjobs.yaml)"
    found = _ADDRESS.match(address.strip())
    if found is None:
        return f"{address!r} is not an email address"
    domain = found.group(1).lower()
    allowed = config.email.allowed_domains
    if allowed and not any(domain == d or domain.endswith("." + d) for d in allowed):
        return (
            f"mail goes only to addresses in {', '.join(allowed)} "
            "(notifications.email.allowed_domains in nbjobs.yaml)"
        )
    return None


def webhook_problem(config: NotificationsConfig, url: str) -> str | None:
    """Why a webhook may not be sent to ``url`` (None: it may)."""
    hooks = config.webhook
    if hooks is None:
        return "this service calls no webhooks (notifications.webhook is not set in nbjobs.yaml)"
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return f"{url!r} is not a URL"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"{url!r} is not an https:// URL"
    if parts.scheme == "http" and not hooks.allow_http:
        return "webhooks must be https:// (notifications.webhook.allow_http is off)"
    if parts.username or parts.password:
        return "a webhook URL may not carry a user name or password"
    host = parts.hostname.lower()
    default = 443 if parts.scheme == "https" else 80
    with_port = f"{host}:{port or default}"
    # a plain host is allowed on its scheme's own port only: host:8787 would reach
    # whatever else listens there (this service's API, a mail relay)
    allowed_here = with_port in hooks.allowed_hosts or (
        (port is None or port == default) and host in hooks.allowed_hosts
    )
    if not allowed_here:
        allowed = ", ".join(hooks.allowed_hosts) or "none"
        return (
            f"webhooks go only to the hosts your admin allows ({allowed}; "
            f"notifications.webhook.allowed_hosts in nbjobs.yaml, a host on port {default} "
            f"unless it names another), not to {with_port}"
        )
    if with_port in own_addresses():
        return "a webhook may not call the job service itself"
    return None


def own_addresses() -> set[str]:
    """``host:port`` of the job service itself, as its hub told it where to listen."""
    url = os.environ.get("JUPYTERHUB_SERVICE_URL")
    if not url:
        return set()
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return set()
    hosts = {parts.hostname or "", "localhost", "127.0.0.1", "::1", "0.0.0.0"}
    return {f"{h}:{port}" for h in hosts if h}


def scope_of(settings: NotifySettings) -> str:
    if settings.job_id and settings.definition_id:
        raise Invalid("give job_id or definition_id, not both")
    if settings.job_id:
        return f"job:{settings.job_id}"
    if settings.definition_id:
        return f"definition:{settings.definition_id}"
    return "user"


class NotifySettingsStore:
    """Reading and saving users' notification settings."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._wrong_codes = WrongCodes()

    def put(self, caller: Caller, settings: NotifySettings) -> NotifySettingsInfo:
        config = self.ctx.config.notifications
        for problem in (
            settings.email and email_problem(config, settings.email),
            settings.webhook and webhook_problem(config, settings.webhook),
        ):
            if problem:
                raise Invalid(problem)
        scope = scope_of(settings)
        with self.ctx.sessions() as db:
            if settings.job_id:
                job = db.get(JobRecord, settings.job_id)
                if job is None or job.user != caller.name:
                    raise NotFound(f"no job {settings.job_id!r} of yours")
                if job.notified_end:
                    raise Conflict(f"job {settings.job_id} has ended and its end was told")
            if settings.definition_id:
                definition = db.get(DefinitionRecord, settings.definition_id)
                if definition is None or definition.user != caller.name:
                    raise NotFound(f"no job definition {settings.definition_id!r} of yours")
            record = db.scalars(
                select(NotifySettingRecord).where(
                    NotifySettingRecord.user == caller.name, NotifySettingRecord.scope == scope
                )
            ).first()
            if record is None:
                record = NotifySettingRecord(
                    id=uuid.uuid4().hex[:12], user=caller.name, scope=scope
                )
                db.add(record)
            record.email = settings.email.strip() if settings.email else None
            record.webhook = settings.webhook.strip() if settings.webhook else None
            record.webhook_format = settings.webhook_format
            record.events = list(dict.fromkeys(settings.on))
            record.queue_minutes = settings.queue_minutes
            record.updated_at = utcnow()
            confirmed = None
            if record.email:
                confirmed = owns(db, config, caller.name, record.email)
                if not confirmed:
                    self._ask_to_confirm(db, caller.name, record.email)
            db.commit()
            return info(record, confirmed)

    def _ask_to_confirm(self, db: Session, user: str, address: str) -> None:
        """Queue the mail with a code that shows ``address`` is ``user``'s (unless one
        went there lately)."""
        now = utcnow()
        code = new_code(db, user, address, now)
        if code is None:
            return
        config = self.ctx.config.notifications
        message = confirm_message(user, address.strip().lower(), code, config.links_base)
        db.add(
            notification(
                user,
                CONFIRM_EVENT,
                f"{CONFIRM_EVENT}:{uuid.uuid4().hex}",
                "email",
                address,
                message,
                now,
            )
        )

    def confirm(self, caller: Caller, code: str) -> AddressConfirmed:
        """The caller entered ``code``: the address it was mailed to is theirs."""
        with self.ctx.sessions() as db:
            address = confirm(db, caller.name, code, utcnow(), self._wrong_codes)
        return AddressConfirmed(address=address)

    def remove(
        self, caller: Caller, *, job_id: str | None = None, definition_id: str | None = None
    ) -> None:
        """Remove the caller's setting for one job or definition (it then follows the
        caller's own), or the caller's own (no messages but JupyterLab's)."""
        try:
            scope = scope_of(
                NotifySettings.model_validate({"job_id": job_id, "definition_id": definition_id})
            )
        except ValidationError as exc:
            raise Invalid(first_problem(exc)) from None
        with self.ctx.sessions() as db:
            removed = rowcount(
                db,
                delete(NotifySettingRecord).where(
                    NotifySettingRecord.user == caller.name, NotifySettingRecord.scope == scope
                ),
            )
            db.commit()
        if not removed:
            what = {"job": "job", "definition": "job definition"}.get(scope.split(":")[0])
            raise NotFound(
                f"you have no notification setting for {what} {(job_id or definition_id)!r}"
                if what
                else "you have no notification setting of your own"
            )

    def list(self, caller: Caller) -> NotifySettingsList:
        with self.ctx.sessions() as db:
            records = db.scalars(
                select(NotifySettingRecord)
                .where(NotifySettingRecord.user == caller.name)
                .order_by(NotifySettingRecord.scope)
            ).all()
            config = self.ctx.config.notifications
            return NotifySettingsList(
                settings=[
                    info(r, owns(db, config, caller.name, r.email) if r.email else None)
                    for r in records
                ]
            )


def info(record: NotifySettingRecord, confirmed: bool | None) -> NotifySettingsInfo:
    kind, _, ident = record.scope.partition(":")
    return NotifySettingsInfo(
        email=record.email,
        email_confirmed=confirmed,
        webhook=record.webhook,
        webhook_format=record.webhook_format,  # type: ignore[arg-type]
        on=record.events,  # type: ignore[arg-type]
        queue_minutes=record.queue_minutes,
        job_id=ident if kind == "job" else None,
        definition_id=ident if kind == "definition" else None,
        updated_at=record.updated_at,
    )
