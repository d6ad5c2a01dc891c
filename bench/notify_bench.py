"""Does sending notifications slow job dispatch? Dispatch latency with and without 1 000
notifications waiting on a mail server that never answers.

    python bench/notify_bench.py [--rounds 30] [--pending 1000]

The real job service (tornado, SQLite, the local backend running the stand-in runner of
bench/service_bench.py) in this process, called over HTTP on loopback. Measured twice in
the same run: submit -> runner running, p50 and p95,

  baseline  notifications off;
  loaded    mail configured to a server that accepts connections and never answers
            (every attempt hangs until its timeout), and ``--pending`` messages queued,
            so the outbox is sending, and stuck, the whole time.

Printed: both, and loaded / baseline. Goal: p95 ratio under 1.25 (the outbox runs on its
own threads and rounds; dispatch should not notice it).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import threading
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nbjobs.job_service.db import utcnow
from nbjobs.job_service.notifications.store import NotificationRecord
from service_bench import Bench, dispatch_latencies, pct


def silent_smtp() -> tuple[int, threading.Event]:
    """A TCP server that accepts every connection and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(512)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                held.append(conn)  # kept open, unanswered
            except TimeoutError:
                continue
        for conn in held:
            conn.close()
        listener.close()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1], stop


def queue_pending(bench: Bench, count: int) -> None:
    now = utcnow()
    with bench.service.sessions() as db:
        for n in range(count):
            db.add(
                NotificationRecord(
                    id=uuid.uuid4().hex[:12],
                    key=f"bench:{n}",
                    user="ada",
                    event="failed",
                    channel="email",
                    target="ada@uni.example",
                    subject="[nbjobs] bench",
                    text="bench",
                    state="pending",
                    next_attempt_at=now - timedelta(seconds=1),
                    attempts=[],
                    created_at=now,
                )
            )
        db.commit()


async def run(rounds: int, pending: int) -> tuple[list[float], list[float]]:
    from nbjobs.config import NotificationsConfig

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        async with Bench(work / "baseline", gpus=1, users=["ada"]) as bench:
            baseline = await dispatch_latencies(bench, rounds)
        port, stop = silent_smtp()
        loaded_bench = Bench(work / "loaded", gpus=1, users=["ada"])
        loaded_bench.config = loaded_bench.config.model_copy(
            update={
                "notifications": NotificationsConfig.model_validate(
                    {
                        "email": {
                            "smtp_host": "127.0.0.1",
                            "smtp_port": port,
                            "from": "nbjobs@uni.example",
                            "security": "none",
                            "timeout": 5,
                        }
                    }
                )
            }
        )
        try:
            async with loaded_bench as bench:
                queue_pending(bench, pending)
                await asyncio.sleep(1.5)  # the outbox has claimed its first batch
                loaded = await dispatch_latencies(bench, rounds)
        finally:
            stop.set()
    return baseline, loaded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--pending", type=int, default=1000)
    args = parser.parse_args()
    baseline, loaded = asyncio.run(run(args.rounds, args.pending))
    ms = 1000
    print(f"dispatch (submit -> runner running), {args.rounds} jobs each, one service each")
    for name, values in (("notifications off", baseline), (f"{args.pending} stuck", loaded)):
        print(
            f"  {name:<20} p50 {statistics.median(values) * ms:7.1f} ms"
            f"   p95 {pct(values, 95) * ms:7.1f} ms"
        )
    p50 = statistics.median(loaded) / statistics.median(baseline)
    p95 = pct(loaded, 95) / pct(baseline, 95)
    print(f"  loaded / baseline    p50 {p50:7.2f}x     p95 {p95:7.2f}x   (goal: p95 < 1.25x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
