"""Notebooks as people have them: nbformat 4.0 to 4.5, files from other editors, small defects.

Every output notebook validates against the version it declares (always 4.5, every
cell with an id, as JupyterLab writes an older notebook when it saves it), whether
the run succeeded, failed, was cancelled or timed out, with parameters or without.
Defects Jupyter tolerates are repaired and said; what cannot be read is refused.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbjobs.job_runner import ExitCode, read_status

from .helpers import run_cli, runner_command, wait_for

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def _cell(source: str, minor: int, *, tags: tuple[str, ...] = (), **extra: Any) -> dict:
    cell: dict[str, Any] = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {"tags": list(tags)} if tags else {},
        "outputs": [],
        "source": source.splitlines(keepends=True),  # as Jupyter saves it: a list of lines
        **extra,
    }
    if minor >= 5:
        cell["id"] = f"c{abs(hash(source)) % 10**8}"
    return cell


def _notebook(tmp_path: Path, minor: int, *sources: str, params: bool = False) -> Path:
    cells = [_cell("alpha = 1", minor, tags=("parameters",))] if params else []
    cells += [_cell(s, minor) for s in sources]
    cells.insert(0, {"cell_type": "markdown", "metadata": {}, "source": "# Title"})
    if minor >= 5:
        cells[0]["id"] = "title"
    data = {"cells": cells, "metadata": KERNEL, "nbformat": 4, "nbformat_minor": minor}
    path = tmp_path / f"nb{minor}.ipynb"
    path.write_text(json.dumps(data))
    return path


def _check_output(output: Path) -> nbformat.NotebookNode:
    raw = json.loads(output.read_text())
    nb = nbformat.reads(output.read_text(), as_version=4)
    nbformat.validate(nb)  # against the version it declares
    assert (raw["nbformat"], raw["nbformat_minor"]) == (4, 5)
    ids = [c["id"] for c in raw["cells"]]
    assert all(ids)
    assert len(set(ids)) == len(ids)
    return nb


@pytest.mark.parametrize("minor", [0, 1, 2, 4, 5])
@pytest.mark.parametrize("params", [False, True], ids=["plain", "parameters"])
def test_every_4x_notebook_gives_a_valid_output(tmp_path, minor, params):
    source = _notebook(tmp_path, minor, "print(alpha if 'alpha' in dir() else 0)", params=params)
    output = tmp_path / "out.ipynb"
    extra = ["-p", "alpha", "7"] if params else []

    proc = run_cli(source, output, *extra)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = _check_output(output)
    printed = [o["text"] for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert printed == (["7\n"] if params else ["0\n"])
    assert json.loads(source.read_text())["nbformat_minor"] == minor  # the input is untouched


@pytest.mark.parametrize("minor", [0, 4])
def test_failed_and_timed_out_outputs_of_old_notebooks_validate(tmp_path, minor):
    failing = _notebook(tmp_path, minor, "raise ValueError('no')")
    out = tmp_path / "failed.ipynb"
    assert run_cli(failing, out).returncode == ExitCode.FAILED
    assert "Execution failed" in _check_output(out).cells[0].source

    slow = _notebook(tmp_path, minor, "import time; time.sleep(60)")
    out = tmp_path / "timed_out.ipynb"
    assert run_cli(slow, out, "--timeout", "2").returncode == ExitCode.TIMED_OUT
    assert "timed out" in _check_output(out).cells[0].source


def test_cancelled_output_of_an_old_notebook_validates(tmp_path):
    source = _notebook(tmp_path, 2, "print(1)", "import time\nfor i in range(600): time.sleep(0.1)")
    output, status = tmp_path / "out.ipynb", tmp_path / "s.json"
    with subprocess.Popen(
        runner_command(source, output, "--status-file", status),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        wait_for(
            lambda: (s := read_status(status)) is not None and s.cells_done == 1,
            what="the first cell to finish",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == ExitCode.CANCELLED
    assert "cancelled" in _check_output(output).cells[0].source


def test_vscode_and_colab_notebooks_run(tmp_path):
    vscode = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 3,
                "metadata": {},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": ["old\n"]}],
                "source": ["print('from vscode')"],
            }
        ],
        "metadata": {
            "kernelspec": {"display_name": ".venv", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.7"},
            "orig_nbformat": 4,
            "vscode": {"interpreter": {"hash": "ab" * 32}},
        },
        "nbformat": 4,
        "nbformat_minor": 2,
    }
    colab = {
        "nbformat": 4,
        "nbformat_minor": 0,
        "metadata": {
            "colab": {"provenance": [], "gpuType": "T4"},
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
            "language_info": {"name": "python"},
            "accelerator": "GPU",
        },
        "cells": [
            {
                "cell_type": "code",
                "source": ["print('from colab')"],
                "metadata": {"id": "AbC123xyz", "colab": {"base_uri": "https://localhost:8080/"}},
                "execution_count": None,
                "outputs": [],
            }
        ],
    }
    for name, data, expected in [
        ("vscode", vscode, "from vscode\n"),
        ("colab", colab, "from colab\n"),
    ]:
        source, output = tmp_path / f"{name}.ipynb", tmp_path / f"{name}.out.ipynb"
        source.write_text(json.dumps(data, indent=1))
        proc = run_cli(source, output)
        assert proc.returncode == ExitCode.SUCCEEDED, (name, proc.stderr)
        nb = _check_output(output)
        assert nb.cells[0].outputs[0]["text"] == expected


def test_defects_jupyter_tolerates_are_repaired_and_said(tmp_path):
    data = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 1,
                "metadata": {},
                # a stream without its name: the schema wants one, Jupyter runs it anyway
                "outputs": [{"output_type": "stream", "text": "old\n"}],
                "source": "print('ran')",
            },
            {"cell_type": "markdown", "metadata": {}, "source": "text", "outputs": []},
        ],
        "metadata": KERNEL,
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    source, output, status = tmp_path / "d.ipynb", tmp_path / "out.ipynb", tmp_path / "s.json"
    source.write_text(json.dumps(data))
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(nbformat.reads(source.read_text(), as_version=4))  # really defective

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = _check_output(output)
    assert nb.cells[0].outputs[0]["text"] == "ran\n"
    repairs = nb.metadata["nbjobs"]["repairs"]
    assert any("cell 1's saved outputs" in r for r in repairs), repairs
    assert any("markdown cell 2 carried 'outputs'" in r for r in repairs), repairs
    assert "repaired: cell 1's saved outputs" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"nbformat": 2, "worksheets": []}), "nbformat 2"),
        (json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {}}), "no list of cells"),
        (json.dumps([1, 2]), "is not an object"),
        # an nbformat 3 worksheet without its cells: nbformat cannot make it a notebook
        (
            json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{}]}),
            "a key the notebook needs is missing (cells)",
        ),
    ],
)
def test_what_cannot_be_read_is_refused_with_a_sentence(tmp_path, text, says):
    source, output = tmp_path / "bad.ipynb", tmp_path / "out.ipynb"
    source.write_text(text)
    proc = run_cli(source, output)
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr
    assert says in proc.stderr
    assert not output.exists()
