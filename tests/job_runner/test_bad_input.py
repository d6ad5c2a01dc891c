"""Bad input: one clear line on stderr, exit 2, nothing run and nothing written over."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbjobs.job_runner import BadInput, ExitCode, read_status, run_notebook

from .helpers import NOTEBOOKS, leftovers, run_cli


def error_line(stderr: str) -> str:
    """The runner's one error line (the only line it prints for bad input)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("nbjobs-runner: error: ")
    return lines[0].removeprefix("nbjobs-runner: error: ")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("truncated.ipynb", "is not a notebook: invalid JSON at line"),
        ("not_a_notebook.ipynb", "is not a valid notebook"),
        ("cells_not_a_list.ipynb", "is not a notebook: it has no list of cells"),
    ],
)
def test_broken_notebooks_are_refused(tmp_path, name, expected):
    source = tmp_path / name
    shutil.copy(NOTEBOOKS / name, source)
    before = source.read_bytes()
    status = tmp_path / "status.json"

    proc = run_cli(source, tmp_path / "out.ipynb", "--status-file", status)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert expected in error_line(proc.stderr)
    assert not (tmp_path / "out.ipynb").exists()
    assert source.read_bytes() == before
    final = read_status(status)
    assert final is not None
    assert final.exit_code == ExitCode.BAD_INPUT
    assert final.state == "failed"
    assert expected in (final.message or "")


def test_an_unknown_cell_type_is_kept_as_a_raw_cell_and_said(tmp_path):
    """JupyterLab opens such a file (showing the cell as raw); the runner runs it too."""
    proc = run_cli(NOTEBOOKS / "bad_cell_type.ipynb", tmp_path / "out.ipynb")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "raw"
    assert nb.cells[0].source == "A1 = 2"
    assert nb.metadata["nbjobs"]["repairs"] == [
        "cell 1 had cell type 'spreadsheet'; it is kept as a raw cell"
    ]


def test_missing_kernel_names_the_installed_ones(tmp_path):
    proc = run_cli(NOTEBOOKS / "missing_kernel.ipynb", tmp_path / "out.ipynb")

    assert proc.returncode == ExitCode.BAD_INPUT
    message = error_line(proc.stderr)
    assert "no-such-kernel-xyz" in message
    assert "python3" in message
    assert not (tmp_path / "out.ipynb").exists()


def test_kernel_option_overrides_a_missing_kernel(tmp_path):
    proc = run_cli(
        NOTEBOOKS / "missing_kernel.ipynb", tmp_path / "out.ipynb", "--kernel", "python3"
    )

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr


def test_missing_input(tmp_path):
    proc = run_cli(tmp_path / "nope.ipynb", tmp_path / "out.ipynb")

    assert proc.returncode == ExitCode.BAD_INPUT
    assert error_line(proc.stderr) == f"INPUT {tmp_path / 'nope.ipynb'} does not exist"


def test_output_equal_to_input_is_refused(make_notebook):
    source = make_notebook("print('x')")
    before = source.read_bytes()

    proc = run_cli(source, source)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert "is the INPUT notebook" in error_line(proc.stderr)
    assert source.read_bytes() == before


def test_output_that_is_a_link_to_the_input_is_refused(make_notebook, tmp_path):
    source = make_notebook("print('x')")
    before = source.read_bytes()
    link = tmp_path / "link.ipynb"
    link.symlink_to(source)

    proc = run_cli(source, link)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert "is the INPUT notebook" in error_line(proc.stderr)
    assert source.read_bytes() == before


@pytest.mark.parametrize("through", ["same path", "relative path", "symlink", "hard link"])
@pytest.mark.parametrize("notebook", ["INPUT", "OUTPUT"])
def test_status_file_that_is_a_notebook_is_refused(make_notebook, tmp_path, notebook, through):
    source = make_notebook("print('x')")
    output = tmp_path / "out.ipynb"
    output.write_text("last week's result")  # an OUTPUT may exist: it is replaced on success
    target = source if notebook == "INPUT" else output
    before = {p: p.read_bytes() for p in (source, output)}
    status = {
        "same path": target,
        "relative path": Path("sub", "..", target.name),
        "symlink": tmp_path / "status.json",
        "hard link": tmp_path / "status.json",
    }[through]
    (tmp_path / "sub").mkdir()
    if through == "symlink":
        status.symlink_to(target)
    elif through == "hard link":
        status.hardlink_to(target)
    listing = sorted(p.name for p in tmp_path.iterdir())

    proc = run_cli(source, output, "--status-file", status, cwd=tmp_path)

    assert proc.returncode == ExitCode.BAD_INPUT
    message = error_line(proc.stderr)
    assert message.startswith(f"--status-file {tmp_path / status} is the {notebook} notebook")
    assert message.endswith("choose another path for the status file")
    assert {p: p.read_bytes() for p in (source, output)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # nothing written


def test_status_file_equal_to_an_output_that_does_not_exist_yet(make_notebook, tmp_path):
    source = make_notebook("print('x')")
    output = tmp_path / "out.ipynb"
    (tmp_path / "status.json").symlink_to(output)  # dangling: OUTPUT is not written yet

    proc = run_cli(source, output, "--status-file", tmp_path / "status.json")

    assert proc.returncode == ExitCode.BAD_INPUT
    assert "is the OUTPUT notebook" in error_line(proc.stderr)
    assert not output.exists()


def test_status_file_equal_to_a_broken_input_leaves_it_alone(tmp_path):
    # The input is refused first (not JSON); the status that records why must not
    # land on the input either.
    source = tmp_path / "truncated.ipynb"
    shutil.copy(NOTEBOOKS / "truncated.ipynb", source)
    before = source.read_bytes()

    proc = run_cli(source, tmp_path / "out.ipynb", "--status-file", source)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert "is not a notebook" in error_line(proc.stderr)
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["truncated.ipynb"]


def test_status_file_equal_to_output_through_python_api(make_notebook, tmp_path):
    source = make_notebook("print('x')")
    output = tmp_path / "out.ipynb"

    with pytest.raises(BadInput, match="is the OUTPUT notebook"):
        run_notebook(source, output, status_file=output)
    assert not output.exists()


def test_status_file_folder_missing(make_notebook, tmp_path):
    source = make_notebook("print('x')")
    status = tmp_path / "no" / "such" / "status.json"

    proc = run_cli(source, tmp_path / "out.ipynb", "--status-file", status)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert error_line(proc.stderr) == (
        f"--status-file folder {tmp_path / 'no' / 'such'} does not exist"
    )
    assert not (tmp_path / "out.ipynb").exists()
    assert not (tmp_path / "no").exists()


def test_output_folder_missing(make_notebook, tmp_path):
    source = make_notebook("print('x')")

    proc = run_cli(source, tmp_path / "no" / "such" / "out.ipynb")

    assert proc.returncode == ExitCode.BAD_INPUT
    assert error_line(proc.stderr) == f"OUTPUT folder {tmp_path / 'no' / 'such'} does not exist"


def test_output_folder_not_writable(make_notebook, not_writable_folder):
    source = make_notebook("print('x')")

    proc = run_cli(source, not_writable_folder / "out.ipynb")

    assert proc.returncode == ExitCode.BAD_INPUT
    assert error_line(proc.stderr).startswith(
        f"cannot write to OUTPUT folder {not_writable_folder}"
    )


def test_output_that_is_a_folder(make_notebook, tmp_path):
    source = make_notebook("print('x')")
    (tmp_path / "results").mkdir()

    proc = run_cli(source, tmp_path / "results")

    assert proc.returncode == ExitCode.BAD_INPUT
    assert "is a folder; give a file path" in error_line(proc.stderr)


def test_existing_output_is_untouched_when_the_input_is_bad(tmp_path):
    output = tmp_path / "out.ipynb"
    output.write_text("last week's result")

    proc = run_cli(NOTEBOOKS / "truncated.ipynb", output)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert output.read_text() == "last week's result"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--parameters", "{not json"], "parameters are not valid JSON"),
        (["--parameters", "[1, 2]"], "parameters must be a JSON object"),
        (["-p", "not an identifier", "1"], "is not a valid Python identifier"),
        (["--timeout", "0"], "--timeout must be a positive number of seconds"),
        (["--cell-timeout", "-5"], "--cell-timeout must be a positive number of seconds"),
    ],
)
def test_bad_options(make_notebook, tmp_path, args, expected):
    source = make_notebook("n = 1")

    proc = run_cli(source, tmp_path / "out.ipynb", *args)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert expected in error_line(proc.stderr)
    assert not (tmp_path / "out.ipynb").exists()
    assert leftovers(tmp_path) == []


def test_parameters_file_that_does_not_exist(make_notebook, tmp_path):
    source = make_notebook("x = 1")

    proc = run_cli(source, tmp_path / "out.ipynb", "--parameters", tmp_path / "params.json")

    assert proc.returncode == ExitCode.BAD_INPUT
    assert "cannot read parameters file" in error_line(proc.stderr)


def test_python_api_raises_bad_input(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        run_notebook(tmp_path / "missing.ipynb", tmp_path / "out.ipynb")
