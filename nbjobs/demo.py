"""``nbjobs demo``: see a notebook run as a job on this machine.

Until the single-machine hub lands, the demo runs ``examples/hello.ipynb``
through the job runner exactly as a job would (a separate process, a status
file, the log streamed), and shows where the executed notebook went.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# In the wheel the examples sit inside the package; in a checkout, beside it.
_HERE = Path(__file__).resolve().parent
EXAMPLES = _HERE / "examples" if (_HERE / "examples").is_dir() else _HERE.parent / "examples"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example notebook as a job and report where its output is."""
    parser = argparse.ArgumentParser(prog="nbjobs demo", description=__doc__)
    parser.add_argument(
        "--workdir",
        default=".nbjobs-demo",
        help="folder standing in for the user's shared storage (default: .nbjobs-demo)",
    )
    parser.add_argument(
        "-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="parameter"
    )
    args = parser.parse_args(argv)

    source = EXAMPLES / "hello.ipynb"
    if not source.is_file():
        print(f"nbjobs demo: the example {source} is missing from this install", file=sys.stderr)
        return 2
    workdir = Path(args.workdir).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    notebook = workdir / "hello.ipynb"
    shutil.copyfile(source, notebook)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    output = workdir / f"hello.{stamp}.output.ipynb"
    status = workdir / f".hello.{stamp}.status.json"

    command = [sys.executable, "-m", "nbjobs.job_runner", str(notebook), str(output)]
    command += ["--status-file", str(status)]
    for name, value in args.p:
        command += ["-p", name, value]
    print(f"nbjobs demo: running {notebook} as a job\n  $ {' '.join(command)}\n", flush=True)
    code = subprocess.call(command)
    print()
    if output.exists():
        print(f"nbjobs demo: the executed notebook is {output}")
        print(f"  open it with: jupyter lab {output}")
    print(f"nbjobs demo: the job ended with exit code {code} (status in {status})")
    return code
