"""`nbjobs demo` (until the hub lands): the example notebook runs as a job."""

from __future__ import annotations

import subprocess
import sys

import nbformat


def test_demo_runs_the_example_and_says_where_the_output_is(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "demo", "--workdir", tmp_path, "-p", "steps", "5"],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert proc.returncode == 0, proc.stderr
    (output,) = tmp_path.glob("hello.*.output.ipynb")
    assert f"the executed notebook is {output}" in proc.stdout
    assert "step   5  loss" in proc.stdout  # the job's output streamed live
    nb = nbformat.read(output, as_version=4)
    assert nb.metadata["nbjobs"]["state"] == "succeeded"
    assert "{'steps': 5, 'final_loss'" in nb.cells[-1].outputs[0]["data"]["text/plain"]
