"""Starting a job's runner never holds up the job service: the API answers while
runners start (a fork and a control group's join take tens of milliseconds each on a
loaded machine, and eight jobs submitted at once start together), and what a starting
job takes (its slot, its GPUs) is taken from the moment its start begins.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .conftest import start_service, stop_all


async def test_the_api_answers_while_runners_start_and_their_slots_stay_taken(
    tmp_path, monkeypatch
):
    svc = await start_service(tmp_path)  # cpu_slots: 2
    backend = svc.service.backend
    starting = threading.Semaphore(0)
    go = threading.Event()
    started = threading.Event()
    start_rank = backend._start_rank

    def slow_start(*args: Any, **kwargs: Any) -> Any:
        # a runner whose start takes until the test says (as a slow fork and join would)
        starting.release()
        go.wait(timeout=30)
        running = start_rank(*args, **kwargs)
        started.set()
        return running

    monkeypatch.setattr(backend, "_start_rank", slow_start)
    try:
        svc.write("ada", "quick.ipynb", "x = 1")
        first, second, third = [await svc.submit("ada", "quick.ipynb") for _ in range(3)]
        for _ in range(2):  # both slots' starts are under way
            assert await asyncio.to_thread(starting.acquire, timeout=60)
        # asked while both runners are still starting
        seen = [await svc.job("ada", job["id"]) for job in (first, second)]
        waiting = await svc.wait(
            "ada", third["id"], until=lambda j: j["waiting_reason"] is not None, timeout=30
        )
        answered_before_a_start_ended = not started.is_set()
        go.set()
        done = [await svc.wait("ada", job["id"], timeout=120) for job in (first, second, third)]
    finally:
        go.set()
        await stop_all(svc)

    assert answered_before_a_start_ended
    assert [job["state"] for job in seen] == ["starting", "starting"], seen
    # the two slots are held by the jobs being started: the third waits, saying why
    assert waiting["state"] == "queued", waiting
    assert waiting["waiting_reason"].startswith("waiting for a free slot"), waiting
    assert [job["state"] for job in done] == ["succeeded"] * 3, done
