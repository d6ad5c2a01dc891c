"""A reader of a log's tail learns where the tail starts (``X-Log-Offset``) and resumes there."""

from __future__ import annotations

from .test_logs import finished_job_with_log, get_log


async def test_the_answer_says_where_in_the_log_it_starts(svc):
    job, log = await finished_job_with_log(svc)

    tail = await get_log(svc, job["id"], tail="64")
    resumed = await get_log(svc, job["id"], offset=tail.headers["X-Log-Offset"])
    whole = await get_log(svc, job["id"])
    more = await get_log(svc, job["id"], tail=str(len(log) * 2))

    assert int(tail.headers["X-Log-Offset"]) == len(log) - 64
    assert tail.content == log[-64:]
    assert resumed.content == log[-64:]  # the same bytes, asked for by offset
    assert whole.headers["X-Log-Offset"] == "0"
    assert more.headers["X-Log-Offset"] == "0"  # a tail longer than the log: all of it
