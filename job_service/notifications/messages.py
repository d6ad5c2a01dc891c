"""What a message says: what ended, how, after how long, the failing cell and its error,
and where the output and the log are (links when ``notifications.links_base`` is set).

One wording for every channel: mail gets the subject and the text; a webhook gets a
JSON body with the same text and the facts as fields (``json``), or the text in the
shape Slack's or Microsoft Teams' incoming webhooks take (``slack``, ``teams``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ..db import JobRecord, utcnow

#: how each end reads in a sentence
ENDED = {
    "succeeded": "succeeded",
    "failed": "failed",
    "timed_out": "ran out of time",
    "cancelled": "was cancelled",
}


@dataclass(frozen=True)
class Message:
    subject: str
    text: str
    #: the facts, for a JSON webhook
    facts: dict[str, Any]


def spoken(seconds: float) -> str:
    """A duration as people write it: ``45 s``, ``5 min 3 s``, ``2 h 10 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")


def links(base: str | None, job: JobRecord) -> dict[str, str]:
    """Where the user opens the output and the log, through the hub (their own server)."""
    if not base:
        return {}
    root = base.rstrip("/") + "/hub/user-redirect"
    return {
        "output": f"{root}/lab/tree/{quote(job.output_path)}",
        "log": f"{root}/nbjobs/api/jobs/{job.id}/logs",
    }


def job_message(
    event: str, job: JobRecord, links_base: str | None, now: datetime | None = None
) -> Message:
    """A job that ended (``event`` is its state) or has waited long (``queued_long``)."""
    name = f'"{job.name}" ({job.id})'
    facts: dict[str, Any] = {
        "id": job.id,
        "name": job.name,
        "user": job.user,
        "state": job.state,
        "flavor": job.flavor,
        "notebook": job.path,
        "output": job.output_path,
        "message": job.message,
        "error": job.error,
    }
    lines: list[str] = []
    if event == "queued_long":
        waited = (job.started_at or now or utcnow()) - job.submitted_at
        subject = f'[nbjobs] "{job.name}" has waited {spoken(waited.total_seconds())} to start'
        lines.append(
            f"Job {name} has waited {spoken(waited.total_seconds())} in the queue for flavor "
            f"{job.flavor}."
        )
        if job.waiting_reason:
            lines.append(f"Why: {job.waiting_reason}")
    else:
        ran = 0.0
        if job.started_at and job.finished_at:
            ran = (job.finished_at - job.started_at).total_seconds()
        how = ENDED.get(event, event)
        after = f" after {spoken(ran)}" if job.started_at else " before it started"
        subject = f'[nbjobs] "{job.name}" {how}{after}'
        facts["duration_seconds"] = ran if job.started_at else None
        lines.append(f"Job {name} {how}{after} on flavor {job.flavor}.")
        # the runner's own sentence names the failing cell as the user counts cells
        if job.message and event != "succeeded":
            lines.append(f"Why: {job.message}")
        if job.error:
            lines.append(f"Error: {job.error.get('ename')}: {job.error.get('evalue')}")
    lines.append(f"Notebook: {job.path}")
    where = links(links_base, job)
    if event != "queued_long":
        lines.append(f"Output: {job.output_path}" + (f" ({where['output']})" if where else ""))
    if where:
        lines.append(f"Log: {where['log']}")
    facts["links"] = where
    return Message(subject, "\n".join(lines), facts)


def refused_message(definition_name: str, definition_id: str, reason: str) -> Message:
    """A scheduled run that could not start."""
    subject = f'[nbjobs] a scheduled run of "{definition_name}" was refused'
    text = (
        f'The scheduled run of job definition "{definition_name}" ({definition_id}) did not '
        f"start: {reason}\n"
        f"See its runs with `nbjobs schedule runs {definition_id}`."
    )
    return Message(
        subject, text, {"definition": definition_id, "name": definition_name, "reason": reason}
    )


def webhook_body(event: str, message: Message, form: str) -> dict[str, Any]:
    """The JSON a webhook is sent, in the shape its receiver takes."""
    if form == "slack":
        return {"text": f"*{message.subject}*\n{message.text}"}
    if form == "teams":
        return {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": message.subject,
            "title": message.subject,
            "text": message.text.replace("\n", "  \n"),
        }
    return {"event": event, "subject": message.subject, "text": message.text, **message.facts}


def confirm_message(user: str, address: str, code: str, links_base: str | None) -> Message:
    """The mail that asks whether ``address`` is ``user``'s."""
    where = (
        f"in JupyterLab at {links_base.rstrip('/')}/hub/user-redirect/lab (Jobs > "
        "Notifications), or"
        if links_base
        else "in JupyterLab (Jobs > Notifications), or"
    )
    text = (
        f"Someone signed in to nbjobs as {user!r} asked for messages about their jobs to be "
        f"sent to {address}.\n\n"
        f"If that was you, enter this code {where} in a terminal: nbjobs notify --confirm "
        f"{code}\n\nCode: {code} (it lasts 7 days)\n\n"
        "If it was not you, ignore this mail: nothing more is sent to this address unless "
        "the code is entered."
    )
    facts = {"user": user, "address": address}
    return Message("[nbjobs] confirm your address for job notifications", text, facts)


def summary_message(subjects: list[str], since: datetime) -> Message:
    """The messages held past a user's rate limit, as one."""
    count = len(subjects)
    listed = subjects[:50]
    more = [f"... and {count - len(listed)} more"] if count > len(listed) else []
    text = "\n".join(
        [
            f"{count} more messages about your jobs since {since:%Y-%m-%d %H:%M} UTC, held "
            "because more came than you are sent in that time:",
            "",
            *(f"- {s.removeprefix('[nbjobs] ')}" for s in listed),
            *more,
            "",
            "See every job with `nbjobs list`, or in JupyterLab's Jobs panel.",
        ]
    )
    return Message(f"[nbjobs] {count} more messages about your jobs", text, {"count": count})
