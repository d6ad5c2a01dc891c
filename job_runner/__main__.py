"""``python -m nbjobs.job_runner``: the command every job runs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .lean_imports import decline_format_checkers

# before nbformat imports jsonschema: over a second of every job's start-up otherwise
decline_format_checkers()

from .errors import BadInput, ExitCode, positive_seconds  # noqa: E402
from .folder_room import FolderRoom, room_for_log  # noqa: E402
from .kernel_start import EarlyStart  # noqa: E402
from .log_file import teed_to  # noqa: E402
from .output_limits import MiB, OutputLimits  # noqa: E402
from .parameters import ParameterError, parse_parameter_value, parse_parameters_arg  # noqa: E402
from .paths import make_folder, same_file, status_file_conflict  # noqa: E402
from .ranks import NODES_ENV, node_rank, rank_file  # noqa: E402
from .script import run_script  # noqa: E402
from .status import RunStatus, utc_now, write_status  # noqa: E402
from .telemetry import DEFAULT_INTERVAL, interval_problem  # noqa: E402

EPILOG = """\
exit codes:
  0  succeeded: every cell ran
  1  failed: a cell raised (not tagged raises-exception) or the kernel died;
     OUTPUT holds the run up to and including that cell, with its traceback.
     Also when OUTPUT could not be written at the end (a full disk, a quota,
     a folder no longer writable): the status file's message says so and
     what to do
  2  bad input: INPUT unreadable or not a valid notebook, kernel not installed,
     OUTPUT equal to INPUT or not writable, --status-file equal to INPUT or
     OUTPUT or not writable, bad parameters or options; nothing was run and
     nothing was written but the status file (when it is usable)
  3  timed out: --timeout or --cell-timeout reached; OUTPUT holds partial output
  4  cancelled: SIGTERM or SIGINT received; OUTPUT holds partial output

output limits: a cell's outputs are kept up to --max-cell-output (all cells
together up to --max-output); past that, the end of each stream is kept and a
note says how much was left out between; rich outputs past it are dropped. The
log gets cell output up to --max-log-output. metadata.nbjobs.output says what
was left out. Memory stays bounded however much a notebook prints.

telemetry: every --telemetry-interval seconds (default 10; 0 = off) the GPUs
the job was given (NVML, else nvidia-smi; as CUDA_VISIBLE_DEVICES selects them;
neither is asked when it is empty) and the CPU and memory of its processes are
sampled into the status file
("telemetry", "telemetry_summary"); the summary also goes into the output's
metadata.nbjobs.telemetry (a script's or command's: the status file only). Sampling
never fails the job.

parameters (papermill-style): a cell tagged "injected-parameters" is inserted
after the cell tagged "parameters" (first, if there is none). -p values are
read as JSON when they parse (5, 2.5, true, null, [1,2], {"a":1}, "\\"quoted\\"")
and as plain strings otherwise; -p wins over --parameters for the same name.

room for job files: with --folder-limit the job's log stops where the owner's
job files (--folder, their .nbjobs) would pass the limit, counting from
--folder-used; the folder is also measured every 2 s while the job runs. At the
limit the job stops: exit code 1, "no room left in your folder (N MiB of M for
job files)"; its output is still written. Files the job writes elsewhere are
not counted.

multi-node jobs: a runner whose NBJOBS_NODE_RANK is k > 0 (a rank other than 0
of a job on several nodes) writes its status, log and output into the status
file's folder, named with its rank (status-rank-k.json, log-rank-k.txt,
output-rank-k.log), and no HTML copy; rank 0 writes the job's own files.
"""


# Over 80 lines: one add_argument per option, in the order --help lists them.
def build_parser() -> argparse.ArgumentParser:
    """The runner's argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m nbjobs.job_runner",
        description="Execute a notebook headless as an nbjobs job and write the executed copy.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", metavar="INPUT", help="notebook to execute (never modified)")
    parser.add_argument("output", metavar="OUTPUT", help="where to write the executed notebook")
    parser.add_argument(
        "--parameters", metavar="JSON|FILE", help="parameters as a JSON object or a JSON file"
    )
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="one parameter (repeatable)",
    )
    parser.add_argument("--kernel", metavar="NAME", help="kernel to use instead of the notebook's")
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write the executed notebook as HTML to FILE (needs nbconvert; a copy "
        "that cannot be made is a warning, not a failure)",
    )
    parser.add_argument(
        "--script",
        action="store_true",
        help="INPUT is a script (.py, .sh), not a notebook: run it; OUTPUT gets its output",
    )
    parser.add_argument(
        "--command",
        metavar="CMD",
        help="run this shell command (bash -c) instead of INPUT (give - as INPUT); OUTPUT "
        "gets its output",
    )
    parser.add_argument(
        "--make-output-folder",
        action="store_true",
        help="make OUTPUT's folder when it is missing (its own folder must exist)",
    )
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="limit for the whole run")
    parser.add_argument("--cell-timeout", type=float, metavar="SECONDS", help="limit for each cell")
    parser.add_argument(
        "--status-file", metavar="FILE", help="JSON progress file, replaced atomically"
    )
    parser.add_argument("--cwd", metavar="DIR", help="working folder (default: the notebook's)")
    parser.add_argument(
        "--source-name",
        metavar="NAME",
        help="the notebook's name as its user knows it, for the log (INPUT may be a copy)",
    )
    parser.add_argument(
        "--log-file",
        metavar="FILE",
        help="also append the log (stdout and stderr) to FILE, e.g. the job's folder on "
        "shared storage",
    )
    parser.add_argument(
        "--log-file-mode",
        type=_mode,
        default=0o600,
        metavar="OCTAL",
        help="permissions of a --log-file the runner makes (default 600)",
    )
    parser.add_argument(
        "--telemetry-interval",
        type=_interval,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"sample GPUs, CPU and memory this often (default {DEFAULT_INTERVAL:g}; at "
        "least 1; 0 = off)",
    )
    parser.add_argument(
        "--folder-limit",
        type=_byte_count,
        metavar="BYTES",
        help="the most the owner's job files may take (storage.max_job_files): past it "
        "the log stops and the job fails saying there is no room left",
    )
    parser.add_argument(
        "--folder-used",
        type=_byte_count,
        default=0,
        metavar="BYTES",
        help="what the owner's job files took when the job started (default 0)",
    )
    parser.add_argument(
        "--folder",
        metavar="DIR",
        help="the owner's job files (their .nbjobs), measured while the job runs",
    )
    defaults = OutputLimits()
    for flag, default, what in [
        ("--max-cell-output", defaults.cell, "output kept per cell in OUTPUT"),
        ("--max-output", defaults.notebook, "output kept for all cells together"),
        ("--max-log-output", defaults.log, "cell output copied to the log"),
    ]:
        parser.add_argument(
            flag,
            type=_size,
            default=default,
            metavar="SIZE",
            help=f"{what} (characters; 512K, 2M, 1G; default {default // MiB}M); the rest is "
            "counted and its start and end kept",
        )
    return parser


def _size(text: str) -> int:
    """A size from the command line: ``1048576``, ``512K``, ``2M``, ``1G`` (1024-based)."""
    units = {"": 1, "K": 1024, "M": MiB, "G": 1024 * MiB}
    number, unit = text.strip().upper().removesuffix("IB").removesuffix("B"), ""
    if number and number[-1] in units:
        number, unit = number[:-1], number[-1]
    try:
        value = int(float(number) * units[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (like 512K, 2M, 1G)") from None
    if value < 1024:
        raise argparse.ArgumentTypeError(f"{text!r} is too small; give at least 1K")
    return value


def _byte_count(text: str) -> int:
    """A number of bytes from the command line: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is below 0; give 0 or more bytes")
    return value


def _interval(text: str) -> float:
    """Seconds between telemetry samples: 0 (off) or at least 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds (like 10, or 0 for off)"
        ) from None
    problem = interval_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def _mode(text: str) -> int:
    """File permissions from the command line, in octal: ``600``, ``0640``."""
    try:
        value = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an octal mode like 600") from None
    if not 0 <= value <= 0o777:
        raise argparse.ArgumentTypeError(f"{text!r} is not a file mode (000 to 777)")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the exit code."""
    args = build_parser().parse_args(argv)
    rank = node_rank()
    if rank:
        as_rank(args, rank)
    if args.log_file is not None:
        conflict = log_file_conflict(args)
        if conflict is not None:
            print(f"nbjobs-runner: error: {conflict}", file=sys.stderr)
            _record_bad_input(args, conflict)
            return int(ExitCode.BAD_INPUT)
    # the log file may hold a little more than the cell output: the runner's own lines
    limit = args.max_log_output + MiB
    room = folder_room(args)
    with teed_to(args.log_file, mode=args.log_file_mode, limit=limit), room_for_log(room):
        if rank:
            nodes = os.environ.get(NODES_ENV, "?")
            print(f"nbjobs-runner: rank {rank} of {nodes} nodes; rank 0 writes the job's result")
        try:
            return _run(args, room)
        except Exception:
            # a runner bug: its traceback belongs in the job's log, wherever that is
            traceback.print_exc()
            return int(ExitCode.FAILED)


def folder_room(args: argparse.Namespace) -> FolderRoom | None:
    """The room left for the owner's job files (``--folder-limit``), or None."""
    if args.folder_limit is None:
        return None
    folder = Path(args.folder).absolute() if args.folder else None
    return FolderRoom(args.folder_limit, args.folder_used, folder)


def as_rank(args: argparse.Namespace, rank: int) -> None:
    """Make a runner of rank ``rank`` > 0 of a multi-node job write its own files into
    the job's folder (:func:`.ranks.rank_file`): its status file, its log, its output;
    never the job's result, nor an HTML copy (rank 0 writes those)."""
    output = Path(args.output)
    if args.status_file:
        status = Path(args.status_file)
        args.status_file = str(rank_file(status, rank))
        args.output = str(rank_file(status.with_name(f"output{output.suffix}"), rank))
    else:
        args.output = str(rank_file(output, rank))
    if args.log_file:
        args.log_file = str(rank_file(Path(args.log_file), rank))
    args.html = None
    args.make_output_folder = False


def log_file_conflict(args: argparse.Namespace) -> str | None:
    """Why ``--log-file`` must not be appended to (it is INPUT, OUTPUT or the status
    file, maybe through a link), or None when it may."""
    others = [("INPUT", args.input), ("OUTPUT", args.output)]
    if args.status_file:
        others.append(("--status-file", args.status_file))
    for what, path in others:
        if same_file(Path(path).absolute(), Path(args.log_file).absolute()):
            return (
                f"--log-file {Path(args.log_file).absolute()} is the {what} file; the log "
                "would be appended to it: choose another path for the log"
            )
    return None


def _run(args: argparse.Namespace, room: FolderRoom | None = None) -> int:
    try:
        # before anything starts (a notebook's kernel is launched early): a refusal is
        # then the runner's one line, never a kernel's interrupted start beside it
        positive_seconds(args.timeout, "--timeout")
        positive_seconds(args.cell_timeout, "--cell-timeout")
        parameters: dict[str, Any] = {}
        if args.parameters:
            parameters.update(parse_parameters_arg(args.parameters))
        for name, value in args.parameter:
            parameters[name] = parse_parameter_value(value)
        if args.script or args.command is not None:
            if args.make_output_folder:
                make_folder(Path(args.output).absolute().parent, "OUTPUT")
            return run_script(
                None if args.command is not None else args.input,
                args.output,
                command=args.command,
                parameters=parameters,
                timeout=args.timeout,
                status_file=args.status_file,
                cwd=args.cwd,
                source_name=args.source_name,
                max_output=args.max_output,
                telemetry_interval=args.telemetry_interval,
                room=room,
            )
        exit_code = asyncio.run(_run_notebook(args, parameters, room))
    except (BadInput, ParameterError) as exc:
        print(f"nbjobs-runner: error: {exc}", file=sys.stderr)
        _record_bad_input(args, str(exc))
        return int(ExitCode.BAD_INPUT)
    return int(exit_code)


async def _run_notebook(
    args: argparse.Namespace, parameters: dict[str, Any], room: FolderRoom | None = None
) -> ExitCode:
    """Launch the kernel, import what running a notebook takes while it boots (nbformat,
    nbclient: a tenth of a second), then check and run the job (see :mod:`.kernel_start`)."""
    early = await EarlyStart.for_job(args.input, args.kernel, args.cwd)
    try:
        from .execute import arun_notebook
    except BaseException:
        await early.discard()
        raise
    result = await arun_notebook(
        args.input,
        args.output,
        parameters=parameters,
        kernel_name=args.kernel,
        timeout=args.timeout,
        cell_timeout=args.cell_timeout,
        status_file=args.status_file,
        cwd=args.cwd,
        echo=True,
        output_limits=OutputLimits(
            cell=args.max_cell_output, notebook=args.max_output, log=args.max_log_output
        ),
        telemetry_interval=args.telemetry_interval,
        source_name=args.source_name,
        html_path=args.html,
        make_output_folder=args.make_output_folder,
        early=early,
        folder_room=room,
    )
    return result.exit_code


def _record_bad_input(args: argparse.Namespace, message: str) -> None:
    """Tell the job service why nothing ran, if the status file can be written."""
    if not args.status_file or status_file_conflict(args.status_file, args.input, args.output):
        return  # no status file, or one that would overwrite a notebook
    now = utc_now()
    status = RunStatus(
        state="failed",
        started_at=now,
        finished_at=now,
        input_path=str(Path(args.input).absolute()),
        output_path=str(Path(args.output).absolute()),
        exit_code=int(ExitCode.BAD_INPUT),
        message=message,
    )
    with contextlib.suppress(OSError):
        write_status(args.status_file, status)


def exit_now(code: int) -> None:
    """End the process with ``code`` once the job is done and all of it written (the
    output, the status file, the log: closed or flushed by then), skipping the
    interpreter's teardown: freeing every module and ZeroMQ's contexts takes about 40 ms,
    7 % of a short job, and leaves nothing on disk that was not there already."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())  # a wrong command line exits in main(), as argparse does
