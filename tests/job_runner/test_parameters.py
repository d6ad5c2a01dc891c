"""Parameters, the papermill way: typed values in an injected cell after the `parameters` cell."""

from __future__ import annotations

import json
import os
import sys

import nbformat
import pytest
from nbjobs.job_runner import ExitCode

from .helpers import PYTHON3, code, markdown, run_cli

TRICKY = {
    "count": 3,
    "rate": 2.5,
    "big": 12345678901234567890,
    "flag": True,
    "off": False,
    "nothing": None,
    "items": [1, "two", [3.0, None]],
    "config": {"a": 1, "nested": {"b": [True]}},
    "text": 'it\'s "quoted"\nsecond line\\ with backslash',
    "unicode": "Grüße, 東京 ✓ 🚀",
    "empty": "",
}


def executed(path):
    return nbformat.read(path, as_version=4)


def test_values_keep_their_json_types(make_notebook, tmp_path):
    names = ", ".join(TRICKY)
    source = make_notebook(
        code("\n".join(f"{name} = 'default'" for name in TRICKY), "parameters"),
        f"import json\nprint(json.dumps([{names}]))",
        f"print([type(v).__name__ for v in [{names}]])",
    )
    params = tmp_path / "params.json"
    params.write_text(json.dumps(TRICKY))

    proc = run_cli(source, tmp_path / "out.ipynb", "--parameters", params)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = executed(tmp_path / "out.ipynb")
    printed = nb.cells[2].outputs[0]["text"]
    assert json.loads(printed) == list(TRICKY.values())
    types = nb.cells[3].outputs[0]["text"].strip()
    assert types == str([type(v).__name__ for v in TRICKY.values()])
    assert nb.metadata["nbjobs"]["parameters"] == TRICKY


def test_injected_cell_follows_the_parameters_cell(make_notebook, tmp_path):
    source = make_notebook(
        markdown("# Report"),
        "import math",
        code("n = 1\nlabel = 'x'", "parameters"),
        "print(n, label)",
    )

    proc = run_cli(source, tmp_path / "out.ipynb", "-p", "n", "5", "-p", "label", "five")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = executed(tmp_path / "out.ipynb")
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags[2] == ["parameters"]
    assert tags[3] == ["injected-parameters"]
    assert "n = 5" in nb.cells[3].source
    assert "label = 'five'" in nb.cells[3].source
    assert nb.cells[4].outputs[0]["text"] == "5 five\n"


def test_without_a_parameters_cell_the_injected_cell_goes_first(make_notebook, tmp_path):
    source = make_notebook(markdown("# Report"), "print(n * 2)")

    proc = run_cli(source, tmp_path / "out.ipynb", "-p", "n", "21")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = executed(tmp_path / "out.ipynb")
    assert nb.cells[0].metadata["tags"] == ["injected-parameters"]
    assert "no cell is tagged 'parameters'" in nb.cells[0].source
    assert nb.cells[2].outputs[0]["text"] == "42\n"
    assert "no cell is tagged 'parameters'" in proc.stderr


def test_unknown_parameter_warns_but_runs(make_notebook, tmp_path):
    source = make_notebook(code("alpha = 0.1", "parameters"), "print(alpha, alhpa)")

    proc = run_cli(source, tmp_path / "out.ipynb", "-p", "alhpa", "0.5")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = executed(tmp_path / "out.ipynb")
    warning = "parameter(s) alhpa not defined in the parameters cell (it defines: alpha)"
    assert warning in nb.cells[1].source
    assert warning in " ".join(nb.metadata["nbjobs"]["warnings"])
    assert nb.cells[2].outputs[0]["text"] == "0.1 0.5\n"


def test_rerunning_an_output_replaces_the_injected_cell(make_notebook, tmp_path):
    source = make_notebook(code("n = 0", "parameters"), "print(n)")
    first = tmp_path / "first.ipynb"
    second = tmp_path / "second.ipynb"

    run_cli(source, first, "-p", "n", "1", check=True)
    run_cli(first, second, "-p", "n", "2", check=True)

    nb = executed(second)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert "n = 2" in injected[0].source
    assert sum("nbjobs-banner" in c.metadata.get("tags", []) for c in nb.cells) == 0
    assert nb.cells[-1].outputs[0]["text"] == "2\n"


def test_rerunning_a_failed_output_drops_the_old_banner(make_notebook, tmp_path):
    source = make_notebook(code("fail = True", "parameters"), "assert not fail, 'asked to fail'")
    failed = tmp_path / "failed.ipynb"
    fixed = tmp_path / "fixed.ipynb"

    assert run_cli(source, failed).returncode == ExitCode.FAILED
    proc = run_cli(failed, fixed, "-p", "fail", "false")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = executed(fixed)
    assert not any("nbjobs-banner" in c.metadata.get("tags", []) for c in nb.cells)
    assert nb.metadata["nbjobs"]["state"] == "succeeded"


#: what ``-p NAME RAW`` gives: each RAW and the value the notebook gets
P_VALUES = [
    ("5", 5),
    ("2.5", 2.5),
    ("true", True),
    ("null", None),
    ("[1, 2]", [1, 2]),
    ('{"a": 1}', {"a": 1}),
    ('"007"', "007"),
    ("plain words", "plain words"),
]


@pytest.fixture(scope="module")
def p_values_run(tmp_path_factory) -> tuple[int, str, list[object]]:
    """One run given every raw value of :data:`P_VALUES` with its own ``-p v<i> RAW``
    (one runner and kernel for all the cases, not one each): its exit code, its log and
    the values its notebook printed, in order."""
    folder = tmp_path_factory.mktemp("p-values")
    names = [f"v{i}" for i in range(len(P_VALUES))]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = PYTHON3
    nb.cells = [
        code(" = ".join(names) + " = None", "parameters"),
        code(f"import json\nfor v in [{', '.join(names)}]:\n    print(json.dumps(v))"),
    ]
    nbformat.write(nb, folder / "in.ipynb")
    raws = [raw for raw, _ in P_VALUES]
    given = [arg for name, raw in zip(names, raws, strict=True) for arg in ("-p", name, raw)]

    proc = run_cli(folder / "in.ipynb", folder / "out.ipynb", *given)

    printed = executed(folder / "out.ipynb").cells[2].outputs[0]["text"].splitlines()
    return proc.returncode, proc.stderr, [json.loads(line) for line in printed]


@pytest.mark.parametrize(("index", "raw", "value"), [(i, *p) for i, p in enumerate(P_VALUES)])
def test_p_values_are_json_when_they_parse(p_values_run, index, raw, value):
    exit_code, log, printed = p_values_run

    assert exit_code == ExitCode.SUCCEEDED, log
    assert len(printed) == len(P_VALUES), printed
    assert printed[index] == value, raw


def test_p_wins_over_parameters(make_notebook, tmp_path):
    source = make_notebook(code("a = b = 0", "parameters"), "print(a, b)")

    proc = run_cli(
        source, tmp_path / "out.ipynb", "--parameters", '{"a": 1, "b": 1}', "-p", "b", "2"
    )

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    assert executed(tmp_path / "out.ipynb").cells[2].outputs[0]["text"] == "1 2\n"


def test_cells_are_counted_as_their_author_counts_them_not_the_injected_one(
    make_notebook, tmp_path
):
    source = make_notebook(
        markdown("# Report"),
        code("n = 1", "parameters"),
        "print(n)",
        "raise ValueError(f'bad n: {n}')",
    )
    status = tmp_path / "status.json"

    proc = run_cli(
        source,
        tmp_path / "out.ipynb",
        "-p",
        "n",
        "7",
        "--status-file",
        status,
        "--source-name",
        "weekly report.ipynb",
    )

    assert proc.returncode == ExitCode.FAILED
    # three code cells of the author's; the injected one is not counted, nor numbered
    assert "running weekly report.ipynb on kernel python3: 3 code cells" in proc.stderr
    assert "code cell 1 of 3" in proc.stderr
    assert "the parameters cell nbjobs injected" in proc.stderr
    final = json.loads(status.read_text())
    assert final["message"] == "code cell 3 of 3 raised ValueError: bad n: 7"
    assert (final["cells_done"], final["cells_total"]) == (2, 3)
    # the error still points at the failing cell of the output notebook, by its index
    nb = executed(tmp_path / "out.ipynb")
    assert nb.cells[final["error"]["cell_index"]].source.startswith("raise ValueError")


def test_a_kernel_the_job_side_lacks_is_named_with_what_to_do(make_notebook, tmp_path):
    source = make_notebook("print(1)")
    nb = nbformat.read(source, as_version=4)
    nb.metadata["kernelspec"] = {"name": "julia-1.10", "display_name": "Julia", "language": "julia"}
    nbformat.write(nb, source)
    status = tmp_path / "status.json"

    proc = run_cli(source, tmp_path / "out.ipynb", "--status-file", status)

    assert proc.returncode == ExitCode.BAD_INPUT
    message = json.loads(status.read_text())["message"]
    assert message.startswith(
        "the notebook's kernel 'julia-1.10' is not installed where jobs run (there: "
    )
    assert "python3" in message
    assert "Kernel > Change Kernel" in message
    assert "--kernel" not in message  # a Lab user has no such option to pass


def test_a_kernel_installed_in_ipythons_old_folder_still_runs_the_job(make_notebook, tmp_path):
    # jupyter_client looks in $IPYTHONDIR/kernels too; the runner names that folder
    # itself (not importing IPython to learn it) and must not lose it
    spec = tmp_path / "ipython" / "kernels" / "old-python"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec_json = {"argv": argv, "display_name": "Old place", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(spec_json))
    source = make_notebook("print('from the old place')")
    nb = nbformat.read(source, as_version=4)
    nb.metadata["kernelspec"] = {"name": "old-python", "display_name": "Old place"}
    nbformat.write(nb, source)

    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")}
    proc = run_cli(source, tmp_path / "out.ipynb", env=env)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    assert "on kernel old-python" in proc.stderr
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert [o.get("text") for o in out.cells[-1].outputs] == ["from the old place\n"]
