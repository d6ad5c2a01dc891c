"""``nbjobs notify`` changes only what its command line names.

The service replaces a notification setting as a whole (``PUT
api/notifications/settings``); the command reads the setting of the scope first, so
``--webhook URL`` given after ``--email ADDRESS`` keeps the mail.
"""

from __future__ import annotations

from typing import Any

from nbjobs.client import notify


class Recorder:
    """A job service that answers GET with ``settings`` and keeps what was PUT."""

    def __init__(self, settings: list[dict[str, Any]]) -> None:
        self.settings, self.put = settings, []

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        if method == "GET":
            return {"settings": self.settings}
        self.put.append(body)
        return body


def changed(settings: list[dict[str, Any]], *argv: str) -> dict[str, Any]:
    args = notify.notify_parser().parse_args(list(argv))
    return notify._changed(Recorder(settings), args)  # type: ignore[arg-type]


MAIL = {
    "email": "ada@uni.example",
    "webhook": None,
    "webhook_format": "json",
    "on": ["failed"],
    "queue_minutes": None,
    "job_id": None,
    "definition_id": None,
}


def test_a_webhook_added_later_keeps_the_mail_and_its_events():
    body = changed([MAIL], "--webhook", "https://hooks.uni.example/x", "--format", "slack")

    assert body == {
        "email": "ada@uni.example",
        "webhook": "https://hooks.uni.example/x",
        "webhook_format": "slack",
        "on": ["failed"],
    }


def test_an_empty_address_stops_that_channel_only():
    both = {**MAIL, "webhook": "https://hooks.uni.example/x"}

    assert changed([both], "--email", "") == {
        "email": None,
        "webhook": "https://hooks.uni.example/x",
        "webhook_format": "json",
        "on": ["failed"],
    }


def test_a_job_s_own_setting_starts_from_that_job_s_not_the_user_s():
    job = {**MAIL, "email": None, "webhook": "https://hooks.uni.example/j", "job_id": "ab12"}

    assert changed([MAIL, job], "--job", "ab12", "--on", "succeeded") == {
        "webhook": "https://hooks.uni.example/j",
        "webhook_format": "json",
        "on": ["succeeded"],
        "job_id": "ab12",
    }
    # a job with no setting yet starts from nothing (the user's stays as it is)
    assert changed([MAIL], "--job", "cd34", "--email", "ada@uni.example") == {
        "email": "ada@uni.example",
        "job_id": "cd34",
    }
