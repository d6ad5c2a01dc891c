"""The runner's ``--html`` copy and ``--make-output-folder``: what the job service asks
for when a user wants an HTML copy or their results in an outputs folder."""

from __future__ import annotations

import os

import nbformat
from nbjobs.job_runner import ExitCode

from .helpers import read_json, run_cli


def test_an_html_copy_is_written_beside_the_output_in_a_folder_made_for_it(make_notebook, tmp_path):
    source = make_notebook("print('in both')")
    out = tmp_path / "nbjobs-outputs" / "run.ipynb"
    html = out.with_suffix(".html")

    proc = run_cli(source, out, "--make-output-folder", "--html", html)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    assert "in both" in html.read_text()
    result = nbformat.read(out, as_version=4)
    assert result.cells[0].outputs[0]["text"] == "in both\n"
    assert result.metadata["nbjobs"]["warnings"] == []
    # the log names the files as their owner sees them, from the notebook's folder
    assert "HTML copy: nbjobs-outputs/run.html\n" in proc.stderr
    assert "executed notebook: nbjobs-outputs/run.ipynb\n" in proc.stderr
    assert str(tmp_path) not in proc.stderr  # never the server's full path


def test_without_nbconvert_the_job_still_succeeds_and_says_why_there_is_no_copy(
    make_notebook, tmp_path
):
    source = make_notebook("print(1)")
    # an environment where nbconvert cannot be imported (a minimal job image)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "nbconvert.py").write_text("raise ImportError('not in this image')\n")
    env = {**os.environ, "PYTHONPATH": f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out, html = tmp_path / "out.ipynb", tmp_path / "out.html"

    proc = run_cli(source, out, "--html", html, env=env)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    assert not html.exists()
    warnings = nbformat.read(out, as_version=4).metadata["nbjobs"]["warnings"]
    assert warnings == [
        "no HTML copy: nbconvert is not installed where jobs run (ask your admin to add it)"
    ]


def test_an_output_folder_that_cannot_be_made_is_bad_input_with_nothing_run(
    make_notebook, tmp_path
):
    source = make_notebook("open('ran', 'w').write('x')")
    (tmp_path / "nbjobs-outputs").write_text("a file where the folder goes")
    status = tmp_path / "status.json"

    proc = run_cli(
        source,
        tmp_path / "nbjobs-outputs" / "run.ipynb",
        "--make-output-folder",
        "--status-file",
        status,
        "--cwd",
        tmp_path,
    )

    assert proc.returncode == ExitCode.BAD_INPUT
    assert read_json(status)["message"].startswith("cannot make OUTPUT folder")
    assert not (tmp_path / "ran").exists()


def test_the_html_copy_may_not_be_the_input(make_notebook, tmp_path):
    source = make_notebook("print(1)")
    before = source.read_bytes()
    proc = run_cli(source, tmp_path / "out.ipynb", "--html", source)
    assert proc.returncode == ExitCode.BAD_INPUT
    assert "--html" in proc.stderr
    assert source.read_bytes() == before
