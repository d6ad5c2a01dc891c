"""A job list during a burst of submits: queue places worked out once for everyone who
asks at once, and the list's reads before the database work queued behind them.

In a burst every submit's answer and every page of the list shows places, and the
queue changes with each submit: four database threads that each worked out the same
places after one change cost the burst's largest share of the service's time
(bench/dispatch_bench.py). The service's side of each query is Python, which runs
one thread at a time: a list read beside the submits' database work took its turn
with it at every query and row.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from nbjobs.job_service import queue
from nbjobs.job_service.db import JobRecord, connect
from nbjobs.job_service.queue import QueuePositions


def record(seq: int, user: str, state: str = "queued", priority: int = 0, **more) -> JobRecord:
    return JobRecord(
        id=f"{seq:012x}",
        seq=seq,
        user=user,
        groups=[],
        name=f"job {seq}",
        flavor="gpu",
        state=state,
        priority=priority,
        path="n.ipynb",
        output_path="n-out.ipynb",
        source_file="/nowhere/n.ipynb",
        snapshot_file="/nowhere/snap.ipynb",
        output_file="/nowhere/n-out.ipynb",
        job_dir="/nowhere",
        parameters={},
        gpus=[],
        gpu_count=1,
        submitted_at=datetime.now(timezone.utc),
        **more,
    )


def test_threads_asking_at_once_after_a_change_share_one_right_answer(tmp_path, monkeypatch):
    sessions = connect(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    positions = QueuePositions(sessions)
    long_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    with sessions() as db:
        db.add_all(
            [
                # ada runs one job; bob ran one long ago and runs none; cy never ran one
                record(1, "ada", state="running", started_at=long_ago),
                record(2, "bob", state="succeeded", started_at=long_ago),
                record(3, "ada"),
                record(4, "ada"),
                record(5, "bob"),
                record(6, "cy"),
                record(7, "ada", priority=5),
            ]
        )
        db.commit()
    worked_out = []
    real = queue.work_out_positions

    def slow_work_out(db):
        worked_out.append(threading.current_thread().name)
        time.sleep(0.3)  # long enough for every asker to arrive meanwhile
        return real(db)

    monkeypatch.setattr(queue, "work_out_positions", slow_work_out)
    answers: list[dict[int, int]] = []

    def ask() -> None:
        with sessions() as db:
            places = positions.get(db)
        answers.append({int(job_id, 16): place for job_id, place in places.items()})

    askers = [threading.Thread(target=ask, name=f"asker-{i}") for i in range(4)]
    for thread in askers:
        thread.start()
    for thread in askers:
        thread.join(timeout=30)

    assert len(worked_out) == 1  # each of the four worked them out before
    # the scheduler's order: ada's urgent job first; then those running no job, cy
    # (never started one) before bob (an hour ago); then ada's others as submitted
    assert answers == [{7: 1, 6: 2, 5: 3, 3: 4, 4: 5}] * 4


async def test_database_work_queued_while_a_list_is_read_waits_for_the_read(svc):
    """A list read while the database thread has a burst of submits to work through
    goes first: the next piece of that work starts once the read ended (it took its
    turn with every one of them before, at each query and row)."""
    import asyncio

    service = svc.service
    gate = service._reads_first  # type: ignore[attr-defined]
    gate.most_wait = 30  # a loaded machine may pause a thread; the order is the point
    order: list[str] = []
    began, wrote = threading.Event(), threading.Event()

    def read() -> None:
        began.set()
        # the read goes on until the write is queued behind it (or, as before, ran)
        deadline = time.monotonic() + 20
        while not gate.waiting and not wrote.is_set() and time.monotonic() < deadline:
            time.sleep(0.001)
        order.append("the list's read")

    def write() -> None:
        order.append("a submit's write")
        wrote.set()

    reading = asyncio.ensure_future(service.read_db(read))
    assert await asyncio.to_thread(began.wait, 20)
    await asyncio.gather(reading, service.in_db(write))

    assert order == ["the list's read", "a submit's write"]
