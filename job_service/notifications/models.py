"""What ``api/notifications`` reads and answers."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Event = Literal["succeeded", "failed", "timed_out", "cancelled", "queued_long", "run_refused"]
#: what a user is told about unless they say otherwise
DEFAULT_EVENTS: list[Event] = ["failed", "timed_out", "run_refused"]


class NotifySettings(BaseModel):
    """``PUT api/notifications/settings``: where and when the caller is told; for one job
    or one definition (``job_id``, ``definition_id``) or by default (neither)."""

    model_config = ConfigDict(extra="forbid")

    email: str | None = Field(default=None, max_length=320)
    webhook: str | None = Field(default=None, max_length=2048)
    webhook_format: Literal["json", "slack", "teams"] = "json"
    on: list[Event] = Field(default_factory=lambda: list(DEFAULT_EVENTS))
    #: queued_long: after this many minutes waiting in the queue
    queue_minutes: int | None = Field(default=None, ge=1, le=7 * 24 * 60)
    job_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{1,32}$")
    definition_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{1,32}$")


class NotifySettingsInfo(NotifySettings):
    """Settings as saved."""

    #: whether mail goes to ``email``: false until the code nbjobs mailed there is
    #: entered (``POST api/notifications/confirm``); None without an email
    email_confirmed: bool | None = None
    updated_at: datetime


class ConfirmAddress(BaseModel):
    """``POST api/notifications/confirm``: the code nbjobs mailed to an address."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=64)


class AddressConfirmed(BaseModel):
    """The address a code confirmed: mail about the caller's jobs may go there now."""

    address: str


class NotifySettingsList(BaseModel):
    settings: list[NotifySettingsInfo]


class Attempt(BaseModel):
    at: datetime
    ok: bool
    error: str | None = None


class Notification(BaseModel):
    """One message on one channel, with every attempt to send it."""

    id: str
    user: str
    job_id: str | None = None
    definition_id: str | None = None
    event: str
    channel: Literal["email", "webhook"]
    target: str
    subject: str
    #: ``held``: past the user's rate limit, waiting to be sent in a summary;
    #: ``summarised``: sent as part of one
    state: Literal["pending", "sending", "sent", "failed", "held", "summarised"]
    attempts: list[Attempt]
    next_attempt_at: datetime | None = None
    created_at: datetime
    sent_at: datetime | None = None


class NotificationList(BaseModel):
    notifications: list[Notification]
