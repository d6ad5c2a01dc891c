"""Telling users about their jobs when they are not watching: by email and by webhook.

:mod:`.settings` keeps what each user wants told and where (checked against the
admin's allowed mail domains and webhook hosts when it is set), :mod:`.messages` words
what happened, and :mod:`.outbox` finds what to tell (jobs that ended, jobs waiting
long, scheduled runs refused), queues one message per channel, and sends them apart
from everything else: retried with backoff, every attempt recorded, never slowing or
failing a job.
"""
