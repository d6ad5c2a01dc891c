"""Programs tests run to load a machine: ones that try to take its process slots,
bounded so that without a limit they end by themselves (run one as ``python -c LOOP N``,
or a file of it, with ``N``: it prints ``forked N`` (or ``started N``) when nothing
stopped it, else ``refused after N`` and why), and a spin on the CPU that says what
share of a core it got (:func:`cpu_spin`)."""

from __future__ import annotations

from pathlib import Path

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


def cpu_spin(seconds: float, share_file: str) -> str:
    """Python source that spins for ``seconds`` of CPU (however long a busy machine takes
    to give them) and writes to ``share_file`` the share of one core it got, in percent:
    what a CPU reading taken while it spun should show, on a quiet machine or a loaded
    one."""
    return (
        "import time\n"
        "wall, cpu = time.monotonic(), time.process_time()\n"
        f"while time.process_time() - cpu < {seconds}:\n"
        "    pass\n"
        "share = 100 * (time.process_time() - cpu) / (time.monotonic() - wall)\n"
        f"open({share_file!r}, 'w').write(str(share))\n"
    )


def spun_share(share_file: str | Path) -> float:
    """The share of a core a :func:`cpu_spin` got, checked to be enough to mean something."""
    share = float(Path(share_file).read_text())
    assert share > 5, f"the spin barely ran ({share:.0f} % of a core): a reading means nothing"
    return share
