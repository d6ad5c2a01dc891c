"""Who asks, and the refusals every part of the job service speaks.

Kept apart from the service so that the parts around it (classes, handlers, the
dispatcher) share them without importing one another: each error is an HTTP
status and a sentence that tells the caller what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError


@dataclass(frozen=True)
class Caller:
    """Who is asking: a user name, their groups, whether they administer nbjobs."""

    name: str
    groups: frozenset[str] = field(default_factory=frozenset)
    admin: bool = False
    #: False when the hub requires custom:nbjobs:submit and this caller lacks it
    may_submit: bool = True
    #: may provision classes (custom:nbjobs:teach, or nbjobs.yaml's teachers)
    teacher: bool = False
    #: why this caller's token may not use nbjobs at all (a 403 that says so); None: it may
    refused: str | None = None
    #: when the hub made this user (its ``created``, as it wrote it): a user deleted and made
    #: again under the same name has another (job_service/deleted_users.py); None: unknown
    created: str | None = None


class ServiceError(Exception):
    """A request the service refuses; ``status`` is the HTTP status, the text says what to do."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Invalid(ServiceError):
    status = 400


class Forbidden(ServiceError):
    status = 403


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class TooLarge(ServiceError):
    status = 413


class OverQuota(ServiceError):
    status = 429


class Busy(ServiceError):
    """The service is too busy to take this request now: 503, with ``Retry-After``."""

    status = 503

    def __init__(self, message: str, retry_after: int = 30) -> None:
        super().__init__(message)
        #: seconds after which the caller may try again (the ``Retry-After`` header)
        self.retry_after = retry_after


class InsufficientStorage(ServiceError):
    status = 507


class StorageFailed(ServiceError):
    """Writing in the user's folder failed for a reason the user cannot fix (EIO)."""

    status = 500


class DamagedRecord(ServiceError):
    """A job's database record the service cannot make sense of: the service's fault (500).

    A job list and the usage leave such a record out (and log it); asking for the
    job itself gets this sentence.
    """

    status = 500

    def __init__(self, job_id: str, reason: str) -> None:
        super().__init__(
            f"job {job_id}'s record in the job database is damaged ({reason}); an admin can "
            "repair or delete that row"
        )
        self.job_id = job_id


def first_problem(exc: Exception) -> str:
    """What is wrong with a record, from the error its model raised: one short clause."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc)
