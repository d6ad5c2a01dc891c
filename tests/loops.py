"""Programs that try to take a machine's process slots, bounded so that without a limit
they end by themselves: run one as ``python -c LOOP N`` (or a file of it, with ``N``),
and it prints ``forked N`` (or ``started N``) when nothing stopped it, else
``refused after N`` and why."""

from __future__ import annotations

#: forks up to N children that sleep, then kills and reaps them
FORK_LOOP = """
import os, sys, time
forked = []
try:
    for _ in range(int(sys.argv[1])):  # bounded: without a limit it stops by itself
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        forked.append(pid)
    print("forked", len(forked))
except OSError as exc:
    print("refused after", len(forked), exc.strerror)
for pid in forked:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
"""
