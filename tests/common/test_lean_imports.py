"""The processes nbjobs starts skip jsonschema's optional format checkers (1.5 s of CPU each),
and a job's runner skips IPython.

rfc3987-syntax builds an Earley parser for RFC 3987 with lark when jsonschema imports
it, isoduration imports arrow, ...; the hub, each notebook server, the notebook checker
and each job's runner import jsonschema. Each is started here as nbjobs starts it, under
``-X importtime``: it imports jsonschema, never lark nor any other format checker.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

#: modules that only a format checker's own code imports: -X importtime names a declined
#: module too (the import was tried, and failed), so these tell that none of it ran
RAN_A_CHECKER = {
    "lark",  # rfc3987_syntax's grammar
    "arrow",  # isoduration's
    "isoduration.parser",
    "webcolors._definitions",
    "uri_template.charset",
    "fqdn._compat",
}

NOTEBOOK = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}).encode()

STARTS = {
    "the hub": ["-m", "nbjobs.hub_config.run", "--help-all"],
    "a notebook server": ["-m", "nbjobs.spawner.singleuser", "--help-all"],
    "the notebook checker": [
        *("-m", "nbjobs.job_service.notebooks"),
        *("--memory", str(1 << 30), "--cells", "10"),
    ],
}


def imported(args: list[str]) -> set[str]:
    """The modules a Python process started with ``args`` imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        input=NOTEBOOK,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    lines = done.stderr.decode().splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}


@pytest.mark.parametrize("what", list(STARTS))
def test_a_process_nbjobs_starts_imports_jsonschema_without_its_format_checkers(what):
    modules = imported(STARTS[what])
    assert "jsonschema" in modules  # the check means something: jsonschema was imported
    assert not modules & RAN_A_CHECKER


def test_a_jobs_runner_runs_its_notebook_without_them_nor_ipython(tmp_path):
    notebook = tmp_path / "one.ipynb"
    cell = {"cell_type": "code", "source": "1", "metadata": {}, "outputs": []}
    cell["execution_count"] = None
    kernelspec = {"name": "python3", "display_name": "Python 3"}
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": kernelspec}}
    notebook.write_text(json.dumps({**nb, "cells": [cell]}))
    modules = imported(["-m", "nbjobs.job_runner", str(notebook), str(tmp_path / "out.ipynb")])
    assert json.loads((tmp_path / "out.ipynb").read_text())["cells"][0]["outputs"]
    assert "jsonschema" in modules
    assert not modules & RAN_A_CHECKER
    # IPython is the kernel's: the runner finds kernels without it (36 ms of every start)
    assert "jupyter_client.kernelspec" in modules
    assert not {m for m in modules if m.split(".")[0] == "IPython"}


def test_where_the_grammar_is_installed_plain_jupyterhub_builds_it():
    """What the above is measured against: without nbjobs's start, lark is imported."""
    # by its distribution, not find_spec: a test that ran nbjobs's CLI in this process
    # declined the module here too
    try:
        installed = bool(importlib.metadata.distribution("rfc3987-syntax"))
    except importlib.metadata.PackageNotFoundError:
        installed = False
    assert ("lark" in imported(["-m", "jupyterhub", "--help-all"])) == installed
