"""A notebook that ends itself: ``sys.exit(0)`` is a clean stop, a non-zero code a failure."""

from __future__ import annotations

import nbformat
import pytest
from nbjobs.job_runner import ExitCode, read_status

from .helpers import run_cli


@pytest.mark.parametrize(
    "call", ["sys.exit(0)", "sys.exit()", "raise SystemExit", "sys.exit(None)"]
)
def test_a_clean_exit_stops_the_run_and_succeeds(make_notebook, tmp_path, call):
    source = make_notebook(
        "print('before')",
        f"import sys\nif True:\n    {call}",
        "print('never')",
    )
    output, status = tmp_path / "out.ipynb", tmp_path / "s.json"

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    final = read_status(status)
    assert final is not None
    assert final.state == "succeeded"
    assert final.error is None
    assert final.message is not None
    assert "stopped itself at code cell 2 of 3" in final.message
    nb = nbformat.read(output, as_version=4)
    nbformat.validate(nb)
    banner = nb.cells[0]
    assert "alert-info" in banner.source
    assert "The notebook stopped itself" in banner.source
    assert nb.metadata["nbjobs"]["state"] == "succeeded"
    printed = [c for c in nb.cells if c.cell_type == "code" and "print('never')" in c.source]
    assert printed[0].execution_count is None  # the cell after the exit did not run
    assert printed[0].outputs == []


def test_a_non_zero_exit_is_a_failure_with_its_code(make_notebook, tmp_path):
    source = make_notebook("import sys; sys.exit(3)", "print('never')")
    output, status = tmp_path / "out.ipynb", tmp_path / "s.json"

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.FAILED, proc.stderr
    final = read_status(status)
    assert final is not None
    assert final.state == "failed"
    assert final.error is not None
    assert final.error.ename == "SystemExit"
    assert final.error.evalue == "3"
