"""What nbjobs' notebook-server command (``python -m nbjobs.spawner.singleuser``) spares
each student's server at start."""

from __future__ import annotations

import subprocess
import sys


def test_a_notebook_server_s_lab_starts_without_asking_yarn_for_a_registry():
    # in a process of its own: importing JupyterLab's application (as the server does when
    # it loads the Lab) makes an AppOptions and reads its registry; every process it
    # starts meanwhile is recorded, and the registry it settled on printed
    probe = """
import subprocess, sys
started = []
real = subprocess.Popen.__init__
def record(self, args, *a, **k):
    started.append(args if isinstance(args, str) else " ".join(map(str, args)))
    real(self, args, *a, **k)
subprocess.Popen.__init__ = record
from nbjobs.spawner.singleuser import skip_yarn_registry_lookup
if sys.argv[1] == "nbjobs":
    skip_yarn_registry_lookup()
import jupyterlab.labapp
from jupyterlab.commands import AppOptions, YARN_DEFAULT_REGISTRY
assert AppOptions().registry == YARN_DEFAULT_REGISTRY, AppOptions().registry
print("started:", [s for s in started if "yarn" in s])
"""
    ours = subprocess.run(
        [sys.executable, "-c", probe, "nbjobs"], capture_output=True, text=True, timeout=120
    )
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.strip() == "started: []", ours.stdout

    # and what it spares: JupyterLab on its own runs yarn (node) to ask
    plain = subprocess.run(
        [sys.executable, "-c", probe, "plain"], capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    assert "yarn.js config --json" in plain.stdout, plain.stdout
