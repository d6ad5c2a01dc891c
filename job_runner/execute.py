"""Execute one notebook as a job: nbclient underneath, job semantics on top.

What this adds to a plain nbclient run: a status file after every cell, cell
output echoed to our own stdout/stderr as it arrives (the job's log), a
whole-job deadline, SIGTERM handling, samples of the job's GPUs, CPU and memory
(:mod:`.telemetry`), and an output notebook that is always written (atomically,
next to nothing it could overwrite) with whatever ran, the failing cell's
traceback and a banner saying what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbformat import NotebookNode

from .errors import STATE_FOR_EXIT_CODE, BadInput, ExitCode, could_not_write, positive_seconds
from .folder_room import FolderRoom
from .gpus import visible_gpus_within
from .kernel_output_cap import install_code
from .kernel_start import (
    EarlyStart,
    KernelManager,
    LaunchedKernel,
    find_kernel_language,
    kill_now,
)
from .log_echo import EchoingClient, LogEcho
from .output_limits import OutputBudget, OutputLimits
from .output_notebook import (
    cell_error,
    error_dict,
    mark_cell,
    mark_result,
    strip_previous_run,
    write_html,
)
from .parameters import INJECTED_TAG, ParameterError, inject_parameters
from .paths import check_writable_folder, make_folder, same_file, status_file_conflict
from .progress_writes import ProgressWrites
from .reading import read_notebook
from .status import (
    CellError,
    RunStatus,
    atomic_write_text,
    read_stop_reason,
    status_text,
    utc_now,
    write_status,
)
from .telemetry import Sample, Sampler, interval_problem

#: the most the status file lags behind the run (see NotebookJob._write_progress)
PROGRESS_COALESCE = 0.1

#: what ``SystemExit``'s value reads as when a notebook ends itself cleanly:
#: ``sys.exit()``, ``sys.exit(0)``, ``sys.exit(None)``, ``raise SystemExit``
CLEAN_EXIT_VALUES = frozenset({"", "0", "None"})


@dataclass
class RunResult:
    """What a finished run produced."""

    exit_code: ExitCode
    state: str
    output_path: Path
    message: str | None = None
    error: CellError | None = None
    cells_done: int = 0
    cells_total: int = 0
    warnings: list[str] = field(default_factory=list)


def run_notebook(
    input_path: str | os.PathLike[str], output_path: str | os.PathLike[str], **options: Any
) -> RunResult:
    """Execute ``input_path`` and write the executed notebook to ``output_path``, in an
    event loop of its own: see :func:`arun_notebook` for the options."""
    return asyncio.run(arun_notebook(input_path, output_path, **options))


async def arun_notebook(
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    parameters: dict[str, Any] | None = None,
    kernel_name: str | None = None,
    timeout: float | None = None,
    cell_timeout: float | None = None,
    status_file: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    echo: bool = False,
    output_limits: OutputLimits | None = None,
    telemetry_interval: float = 0,
    source_name: str | None = None,
    html_path: str | os.PathLike[str] | None = None,
    make_output_folder: bool = False,
    early: EarlyStart | None = None,
    folder_room: FolderRoom | None = None,
) -> RunResult:
    """Execute ``input_path`` and write the executed notebook to ``output_path``.

    The input is never modified. The output is written in every outcome but a
    bad input: success, a cell that raised, a dead kernel, a time limit, and
    SIGTERM/SIGINT (when called from the main thread). ``timeout`` limits the
    whole run, ``cell_timeout`` each cell, in seconds. With ``echo``, cell
    output is copied to this process's stdout/stderr as it arrives. Output past
    ``output_limits`` (see :mod:`.output_limits`) is left out of the notebook and
    the echo, and counted. With a ``telemetry_interval`` (seconds, at least 1; 0, the
    default here, is off; the command line's default is 10) the job's GPUs, CPU and
    memory are sampled that often into the status file, and the summary goes into the
    output's ``metadata.nbjobs.telemetry`` (see :mod:`.telemetry`). With ``html_path``
    the executed notebook is also written there as HTML (nbconvert; a copy that cannot
    be made is a warning, never a failure). ``make_output_folder`` makes the output's
    folder when it is missing (its own folder must exist).

    Raises :class:`BadInput` (nothing run, nothing written) when the input is
    not a valid notebook, its kernel is not installed, the output would
    overwrite the input or cannot be written, the status file would overwrite
    the input or the output or cannot be written, or the parameters do not fit.

    The kernel is launched first (``early``, when the caller did it already: see
    :mod:`.kernel_start`), and the job checked while it boots.
    """
    if early is None:
        early = await EarlyStart.for_job(input_path, kernel_name, cwd)
    try:
        job = NotebookJob.prepare(
            input_path,
            output_path,
            parameters=parameters or {},
            kernel_name=kernel_name,
            timeout=timeout,
            cell_timeout=cell_timeout,
            status_file=status_file,
            cwd=cwd,
            echo=echo,
            output_limits=output_limits,
            telemetry_interval=telemetry_interval,
            make_output_folder=make_output_folder,
        )
        _finish_preparing(job, html_path, source_name)
    except BaseException:
        await early.discard()  # it ran nothing
        raise
    launched = early.kernel
    if launched is not None and (launched.kernel_name, launched.cwd) != (job.kernel_name, job.cwd):
        await early.discard()  # the notebook, as repaired, names another kernel
    job.early = early
    job.folder_room = folder_room
    return await job.run()


def _finish_preparing(job: NotebookJob, html_path: Any, source_name: str | None) -> None:
    """The checks and settings of :func:`run_notebook` beyond :meth:`NotebookJob.prepare`."""
    job.html_path = Path(html_path).absolute() if html_path is not None else None
    if job.html_path is not None and job.html_path in (job.input_path, job.output_path):
        raise BadInput(f"--html {job.html_path} is INPUT or OUTPUT; choose another path")
    if job.html_path is not None and same_file(job.input_path, job.html_path):
        raise BadInput(
            f"--html {job.html_path} is the INPUT notebook, which the runner never "
            "overwrites; choose another path"
        )
    job.source_name = source_name  # the user's name for it (the input may be a snapshot)
    job.simulated_gpus = os.environ.get("NBJOBS_SIMULATED_GPUS") == "1" and bool(
        os.environ.get("CUDA_VISIBLE_DEVICES")
    )


class NotebookJob:
    """One validated run, ready to execute. Build it with :meth:`prepare`."""

    input_path: Path
    output_path: Path
    status_path: Path | None
    timeout: float | None
    cell_timeout: float | None
    parameters: dict[str, Any]
    echo: bool
    nb: NotebookNode
    cwd: Path
    kernel_name: str
    kernel_language: str
    code_cells: list[int]
    #: the user's code cells (not the injected one): notebook index -> 1-based number
    user_number: dict[int, int]
    #: the user's name for the notebook (``--source-name``), for the log
    source_name: str | None = None
    #: where an HTML copy of the result goes (``--html``); None: no copy
    html_path: Path | None = None
    #: the job's GPUs are simulated (NBJOBS_SIMULATED_GPUS=1, the demo without a GPU)
    simulated_gpus: bool = False
    status: RunStatus
    #: a progress write of the status file failed (and was reported once)
    _progress_unwritten = False
    #: the kernel launched while the job was checked, and the signals meanwhile
    early: EarlyStart
    #: the room left in the owner's folder (``--folder-limit``); None: not limited
    folder_room: FolderRoom | None = None

    def __init__(self) -> None:
        self.stop_reason: tuple[ExitCode, str] | None = None
        #: the notebook cell where the notebook ended itself with sys.exit(0), if it did
        self.stopped_itself_at: int | None = None
        self.current_number = 0  # 1-based position of the running cell among code cells
        self.cell_durations: dict[int, float] = {}
        self.warnings: list[str] = []
        #: what was fixed in the input to make it a valid notebook (see .reading)
        self.repairs: list[str] = []
        self._cells_task: asyncio.Future[None] | None = None
        self._socket_dir: str | None = None
        self.early = EarlyStart()
        self._last_write = 0.0
        self._deferred_write: asyncio.TimerHandle | None = None
        self._progress_writes: ProgressWrites | None = None
        self.output_limits = OutputLimits()
        self.budget = OutputBudget(self.output_limits)
        self._stderr: TextIO = sys.stderr
        self.log_echo = LogEcho(self.output_limits.log, sys.stdout, sys.stderr)
        self.telemetry_interval = 0.0
        self._sampler: Sampler | None = None
        #: the sampler has stopped: a sample still on its way is not written any more
        self._telemetry_ended = False

    # -- preparation: every check that can fail before anything runs --------

    @classmethod
    def prepare(
        cls,
        input_path: str | os.PathLike[str],
        output_path: str | os.PathLike[str],
        *,
        parameters: dict[str, Any],
        kernel_name: str | None,
        timeout: float | None,
        cell_timeout: float | None,
        status_file: str | os.PathLike[str] | None,
        cwd: str | os.PathLike[str] | None,
        echo: bool,
        output_limits: OutputLimits | None = None,
        telemetry_interval: float = 0,
        make_output_folder: bool = False,
    ) -> NotebookJob:
        """Validate everything and load the notebook; raise :class:`BadInput` on any problem."""
        job = cls()
        job.input_path = Path(input_path).absolute()
        job.output_path = Path(output_path).absolute()
        job.status_path = Path(status_file).absolute() if status_file is not None else None
        job.timeout = positive_seconds(timeout, "--timeout")
        job.cell_timeout = positive_seconds(cell_timeout, "--cell-timeout")
        job.parameters = dict(parameters)
        job.echo = echo
        job.output_limits = output_limits or OutputLimits()
        job.budget = OutputBudget(job.output_limits)
        job.log_echo = LogEcho(job.output_limits.log, sys.stdout, sys.stderr)
        problem = interval_problem(telemetry_interval)
        if problem is not None:
            raise BadInput(f"--telemetry-interval: {problem}")
        job.telemetry_interval = float(telemetry_interval)

        job.nb, job.repairs = read_notebook(job.input_path)
        job.warnings += [f"repaired: {r}" for r in job.repairs]
        if same_file(job.input_path, job.output_path):
            raise BadInput(
                f"OUTPUT {job.output_path} is the INPUT notebook; the runner never overwrites "
                "its input, choose another OUTPUT path"
            )
        if make_output_folder:
            make_folder(job.output_path.parent, "OUTPUT")
        check_writable_folder(job.output_path, "OUTPUT")
        if job.status_path is not None:
            conflict = status_file_conflict(job.status_path, job.input_path, job.output_path)
            if conflict is not None:
                raise BadInput(conflict)
            check_writable_folder(job.status_path, "--status-file")
        job.cwd = Path(cwd).absolute() if cwd is not None else job.input_path.parent
        if not job.cwd.is_dir():
            raise BadInput(f"--cwd {job.cwd} is not a folder")

        spec_name = job.nb.metadata.get("kernelspec", {}).get("name")
        job.kernel_name = kernel_name or spec_name or "python3"
        job.kernel_language = find_kernel_language(job.kernel_name)

        strip_previous_run(job.nb)
        try:
            job.warnings += inject_parameters(job.nb, job.parameters, job.kernel_language)
        except ParameterError as exc:
            raise BadInput(str(exc)) from exc
        job.code_cells = [
            i for i, c in enumerate(job.nb.cells) if c.cell_type == "code" and c.source.strip()
        ]
        # People count their own cells, from 1: the cell nbjobs injected is not one of them
        injected = {
            i for i in job.code_cells if INJECTED_TAG in job.nb.cells[i].metadata.get("tags", [])
        }
        mine = [i for i in job.code_cells if i not in injected]
        job.user_number = {index: n for n, index in enumerate(mine, start=1)}
        job.status = RunStatus(
            state="starting",
            cells_total=len(mine),
            input_path=str(job.input_path),
            output_path=str(job.output_path),
            pid=os.getpid(),
            host=socket.gethostname(),
        )
        return job

    # -- the run -------------------------------------------------------------

    async def run(self) -> RunResult:
        """Start the kernel, run every code cell, write the output; never raises for a cell."""
        # Our handlers go in first, and the kernel start runs as a task they can
        # cancel: a cancel during start-up still ends with a status and an output.
        self._install_signal_handlers()
        self.status.started_at = utc_now()
        self._write_status()
        self._log(
            f"running {self.source_name or self.input_path.name} on kernel {self.kernel_name}: "
            f"{len(self.user_number)} code cells"
        )
        if self.simulated_gpus:
            self._log(simulated_gpus_line(os.environ.get("CUDA_VISIBLE_DEVICES", "")))
        for warning in self.warnings:
            self._log(f"warning: {warning}")
        self._start_telemetry()
        self._watch_folder_room()
        started = time.monotonic()
        client = EchoingClient(
            self.nb,
            kernel_name=self.kernel_name,
            timeout=self.cell_timeout,
            interrupt_on_timeout=False,
            allow_errors=False,
            shutdown_kernel="immediate",
            resources={"metadata": {"path": str(self.cwd)}},
            kernel_manager_class=KernelManager,
        )
        if self.early.kernel is not None:
            client.km = self.early.kernel.km
            self._socket_dir = self.early.kernel.socket_dir
        if self.echo:
            client.on_output = self.log_echo.output
        client.budget = self.budget

        exit_code, message, error = ExitCode.SUCCEEDED, None, None
        try:
            self._cells_task = asyncio.ensure_future(self._start_kernel(client))
            for sig in self.early.signals[:1]:  # cancelled while it was checked
                self._stop_on_signal(sig)
            try:
                await self._cells_task
            except asyncio.CancelledError:
                await self._shutdown_kernel(client)
            if self.stop_reason is not None:
                exit_code, message = self.stop_reason
            else:
                async with client.async_setup_kernel():
                    # nbclient has just put in its own handlers (they only shut the kernel
                    # down); ours interrupt the cell and keep the partial output.
                    self._install_signal_handlers()
                    self.status.state = "running"  # written with the first cell
                    await self._cap_kernel_writes(client)
                    exit_code, message, error = await self._run_cells(client)
                    # the last sample while the kernel is still there to be measured
                    if self._sampler is not None:
                        await asyncio.to_thread(self._sampler.stop)
        except DeadKernelError as exc:  # the kernel never came up, or died between cells
            exit_code, message = self._stopped_or(ExitCode.FAILED, f"kernel died: {exc}")
        except RuntimeError as exc:
            exit_code, message = ExitCode.FAILED, f"kernel {self.kernel_name} failed: {exc}"
        finally:
            self._remove_signal_handlers()
            if self._socket_dir is not None:
                shutil.rmtree(self._socket_dir, ignore_errors=True)

        return self._finish(exit_code, message, error, time.monotonic() - started)

    async def _run_cells(
        self, client: NotebookClient
    ) -> tuple[ExitCode, str | None, CellError | None]:
        loop = asyncio.get_running_loop()
        deadline = None
        if self.timeout is not None:
            deadline = loop.call_later(
                self.timeout,
                self._stop,
                ExitCode.TIMED_OUT,
                f"timed out after {_seconds(self.timeout)} (job time limit)",
            )
        self._cells_task = asyncio.ensure_future(self._execute_cells(client))
        current = None
        try:
            await self._cells_task
            return ExitCode.SUCCEEDED, None, None
        except CellExecutionError as exc:
            current = self.status.current_cell
            ename = getattr(exc, "ename", type(exc).__name__)
            evalue = getattr(exc, "evalue", str(exc))
            if ename == "SystemExit" and str(evalue).strip() in CLEAN_EXIT_VALUES:
                # sys.exit(0) / sys.exit() / raise SystemExit: the notebook chose to stop
                # here, as a script would; a clean end, not a failure (papermill agrees).
                self.status.cells_done = self._user_cells_in(self.current_number)
                self.stopped_itself_at = current
                message = (
                    f"the notebook stopped itself at {self._cell_label()} "
                    f"(SystemExit: {str(evalue).strip() or 'None'}); the cells after it did not run"
                )
                return ExitCode.SUCCEEDED, message, None
            message = f"{self._cell_label()} raised {ename}: {evalue}".strip()
            if ename == "StdinNotImplementedError":
                message += (
                    " (jobs have no keyboard: pass the value as a parameter instead of input())"
                )
            return ExitCode.FAILED, _one_line(message), cell_error(self.nb, current, ename, evalue)
        except CellTimeoutError:
            current = self.status.current_cell
            message = (
                f"{self._cell_label()} ran longer than the per-cell limit of "
                f"{_seconds(self.cell_timeout)}"
            )
            mark_cell(self.nb, current, message)
            return ExitCode.TIMED_OUT, message, CellError(current or 0, "CellTimeoutError", message)
        except (DeadKernelError, asyncio.CancelledError):
            current = self.status.current_cell
            if self.stop_reason is None:
                message = f"kernel died while running {self._cell_label()}"
                mark_cell(self.nb, current, message + " (out of memory, a crash, or os._exit)")
                return ExitCode.FAILED, message, CellError(current or 0, "DeadKernelError", message)
            exit_code, message = self.stop_reason
            if self.folder_room is not None and self.folder_room.full and client.km:
                # killed, not interrupted: an interrupted kernel between two messages says
                # so on its own stderr, which is the job's log, past the line ending it
                with contextlib.suppress(Exception):
                    await kill_now(client.km)
            else:
                await self._interrupt_kernel(client)
            mark_cell(self.nb, current, message)
            return exit_code, message, CellError(current or 0, exit_code.name, message)
        finally:
            if deadline is not None:
                deadline.cancel()

    async def _cap_kernel_writes(self, client: NotebookClient) -> None:
        """In a Python kernel, keep every message it sends within what a cell may keep
        (see :mod:`.kernel_output_cap`): ``print('x' * 200_000_000)``, or 200 writes of
        1 MB that ipykernel would join, otherwise go out as one message of 200 MB, held
        several times over by the kernel while sending and by the runner while receiving.
        Silent (no output, no history) and done once, before the first cell.
        """
        if self.kernel_language != "python" or client.kc is None:
            return
        # a kernel that refuses still runs the cells, and so does a runner installed
        # without its sources (the code sent is read from them)
        with contextlib.suppress(Exception):
            code = install_code(self.output_limits)
            msg_id = client.kc.execute(code, silent=True, store_history=False)
            await client.async_wait_for_reply(msg_id)

    async def _execute_cells(self, client: NotebookClient) -> None:
        # One status write per cell boundary: it says both how many cells are done
        # and which one runs now (the write is the progress reporting's main cost).
        total = len(self.code_cells)
        self.status.current_cell = self.code_cells[0] if self.code_cells else None
        self._write_status()
        user_cells_done = 0
        for number, index in enumerate(self.code_cells, start=1):
            cell = self.nb.cells[index]
            self.current_number = number
            self._log(self._cell_label())
            started = time.monotonic()
            try:
                await client.async_execute_cell(cell, index)
            finally:
                self.cell_durations[index] = time.monotonic() - started
                self.budget.finish_cell(index, cell.outputs)
            user_cells_done += index in self.user_number
            self.status.cells_done = user_cells_done
            if number < total:
                self.status.current_cell = self.code_cells[number]
                self._write_progress()

    def _cell_label(self) -> str:
        """The running cell as its author counts: "code cell 2 of 3" (the user's code
        cells from 1, the injected parameters cell not among them)."""
        if not self.current_number:
            return "the kernel's start"
        index = self.code_cells[self.current_number - 1]
        if index not in self.user_number:
            return "the parameters cell nbjobs injected"
        return f"code cell {self.user_number[index]} of {len(self.user_number)}"

    def _user_cells_in(self, count: int) -> int:
        """How many of the first ``count`` code cells are the user's."""
        return sum(1 for index in self.code_cells[:count] if index in self.user_number)

    # -- stopping ------------------------------------------------------------

    def _stop(self, exit_code: ExitCode, message: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = (exit_code, message)
            self._log(message)
        if self._cells_task is not None and not self._cells_task.done():
            self._cells_task.cancel()

    def _stopped_or(self, exit_code: ExitCode, message: str) -> tuple[ExitCode, str]:
        return self.stop_reason if self.stop_reason is not None else (exit_code, message)

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stop_on_signal, sig)
            except (RuntimeError, ValueError):  # not the main thread: no signal handling
                return

    def _stop_on_signal(self, sig: int) -> None:
        """Cancelled: with the reason the job service left beside the status file, when
        it left one (``stop-reason.txt``: its GPUs were idle, say), else the signal."""
        reason = read_stop_reason(self.status_path) or f"cancelled by {signal.Signals(sig).name}"
        self._stop(ExitCode.CANCELLED, reason)

    def _remove_signal_handlers(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        except (RuntimeError, ValueError):
            pass

    async def _start_kernel(self, client: NotebookClient) -> None:
        if client.km is None:  # none launched early: now (what goes wrong raises here)
            launched = await LaunchedKernel.launch(self.kernel_name, self.cwd)
            client.km, self._socket_dir = launched.km, launched.socket_dir
        await client.async_start_new_kernel_client()

    async def _shutdown_kernel(self, client: NotebookClient) -> None:
        """Stop a kernel whose start was cancelled half-way."""
        if client.kc is not None:
            client.kc.stop_channels()
        if client.km is not None and client.km.has_kernel:
            try:
                await kill_now(client.km)
            except Exception as exc:  # already gone: nothing left to stop
                self._log(f"could not shut the kernel down: {exc}")

    async def _interrupt_kernel(self, client: NotebookClient) -> None:
        if client.km is None:
            return
        try:
            await asyncio.wait_for(
                asyncio.ensure_future(_maybe_await(client.km.interrupt_kernel())), 2
            )
        except Exception as exc:  # a kernel that is gone or hung is shut down right after
            self._log(f"could not interrupt the kernel: {exc}")

    # -- results -------------------------------------------------------------

    def _finish(
        self, exit_code: ExitCode, message: str | None, error: CellError | None, duration: float
    ) -> RunResult:
        state = STATE_FOR_EXIT_CODE[exit_code]
        self._end_telemetry()
        error = mark_result(
            self.nb,
            state,
            message,
            error,
            failed=exit_code != ExitCode.SUCCEEDED,
            stopped_at=self.stopped_itself_at,
            simulated_gpus=self.simulated_gpus,
            durations=self.cell_durations,
        )
        self.nb.metadata["nbjobs"] = {
            "state": state,
            "message": message,
            "parameters": self.parameters,
            "started_at": self.status.started_at,
            "finished_at": utc_now(),
            "duration_seconds": round(duration, 3),
            "kernel": {"name": self.kernel_name, "language": self.kernel_language},
            "host": self.status.host,
            "input_path": str(self.input_path),
            "cells_done": self.status.cells_done,
            "cells_total": self.status.cells_total,
            "gpus": visible_gpus_within(),
            "gpus_simulated": self.simulated_gpus,
            "telemetry": self.status.telemetry_summary,
            "warnings": self.warnings,
            "repairs": self.repairs,
            "output": {
                **self.budget.summary(),
                "log_dropped_characters": self.log_echo.dropped,
            },
            "error": None if error is None else error_dict(error),
        }
        if self.html_path is not None:
            self._write_html(self.html_path)
        try:
            # fsync'ed: on NFS a rename can be acknowledged before the data is stable.
            atomic_write_text(self.output_path, nbformat.writes(self.nb), durable=True)
        except OSError as exc:  # a full disk, a quota, a folder made read-only
            unwritten = could_not_write("the output notebook", self.output_path, exc)
            self._log(unwritten)
            if exit_code == ExitCode.SUCCEEDED:
                exit_code, message = ExitCode.FAILED, unwritten
            else:
                message = f"{message or state}; {unwritten}"
            state = STATE_FOR_EXIT_CODE[exit_code]

        self.status.state = state
        self.status.exit_code = int(exit_code)
        self.status.message = message
        self.status.error = error
        self.status.finished_at = self.nb.metadata["nbjobs"]["finished_at"]
        try:
            self._write_status(durable=True)
        except OSError as exc:  # the job service falls back on the exit code
            self._log(could_not_write("the status file", self.status_path or "", exc))
        if self._progress_writes is not None:
            self._progress_writes.close()
        outcome = f"{state} ({message})" if message else state
        self._log(f"done: {outcome}; executed notebook: {self._shown(self.output_path)}")
        return RunResult(
            exit_code=exit_code,
            state=state,
            output_path=self.output_path,
            message=message,
            error=error,
            cells_done=self.status.cells_done,
            cells_total=self.status.cells_total,
            warnings=self.warnings,
        )

    def _write_html(self, path: Path) -> None:
        """Write the executed notebook as HTML to ``path``; a copy that cannot be made
        is a warning in the log and the output, never the job's failure."""
        problem = write_html(self.nb, path)
        if problem is None:
            self._log(f"HTML copy: {self._shown(path)}")
            return
        warning = f"no HTML copy: {problem}"
        self.warnings.append(warning)
        self.nb.metadata["nbjobs"]["warnings"].append(warning)  # a copy of self.warnings
        self._log(warning)

    def _watch_folder_room(self) -> None:
        """Stop the run, failed, when the owner's folder has no room left (the log
        reached it, or the folder measured past it)."""
        room = self.folder_room
        if room is None:
            return
        loop = asyncio.get_running_loop()

        def stop() -> None:  # from the watching thread, or from a write to the log
            loop.call_soon_threadsafe(self._stop, ExitCode.FAILED, room.message())

        room.when_full(stop)
        room.start_watching()

    # -- telemetry -----------------------------------------------------------

    def _start_telemetry(self) -> None:
        """Sample the job's GPUs, CPU and memory every interval, in a thread of its own;
        each sample reaches the status file through the event loop."""
        if not self.telemetry_interval:
            return
        loop = asyncio.get_running_loop()
        self._sampler = Sampler(
            self.telemetry_interval,
            on_sample=lambda sample, summary: loop.call_soon_threadsafe(
                self._telemetry_arrived, sample, summary
            ),
            on_note=lambda line: loop.call_soon_threadsafe(self._log, line),
        )
        self._sampler.start()

    def _telemetry_arrived(self, sample: Sample, summary: Sample) -> None:
        if self._telemetry_ended:
            return
        self.status.telemetry, self.status.telemetry_summary = sample, summary
        self._write_progress()  # one write an interval, during a long cell too

    def _end_telemetry(self) -> None:
        """Take the last sample (waiting a moment at most: none when it was taken already)
        and keep the final summary."""
        if self._sampler is None or self._telemetry_ended:
            return
        latest, summary = self._sampler.stop()
        self._telemetry_ended = True
        if latest is not None:
            self.status.telemetry, self.status.telemetry_summary = latest, summary

    # -- logging -------------------------------------------------------------

    def _write_status(self, durable: bool = False) -> None:
        # Only the final status is fsync'ed: a progress write is superseded within
        # PROGRESS_COALESCE, and an fsync per write is a round trip on NFS.
        if self._deferred_write is not None:
            self._deferred_write.cancel()
            self._deferred_write = None
        if self.status_path is not None:
            if self._progress_writes is not None:
                self._progress_writes.settle()  # progress under way lands before this
            try:
                write_status(self.status_path, self.status, durable=durable, last_resort=durable)
            except OSError as exc:
                if durable:
                    raise
                self._progress_unwritable(exc)
            self._last_write = time.monotonic()

    def _write_progress(self) -> None:
        """Progress after a cell: written at once, unless the last write was under
        PROGRESS_COALESCE ago; then once, that much later, with whatever is newest.
        A run of tiny cells costs a few writes, and no reader is ever more than
        PROGRESS_COALESCE behind. The writes are made in a thread (see
        :mod:`.progress_writes`), while the kernel runs the next cell."""
        if self.status_path is None or self._deferred_write is not None:
            return
        wait = self._last_write + PROGRESS_COALESCE - time.monotonic()
        if wait <= 0:
            self._write_progress_now()
        else:
            self._deferred_write = asyncio.get_running_loop().call_later(
                wait, self._write_progress_now
            )

    def _write_progress_now(self) -> None:
        self._deferred_write = None
        if self.status_path is None:
            return
        if self._progress_writes is None:
            self._progress_writes = ProgressWrites(self.status_path, self._progress_unwritable)
        self._progress_writes.write(status_text(self.status))
        self._last_write = time.monotonic()

    def _progress_unwritable(self, exc: OSError) -> None:
        # Progress is worth a warning, not the job: the final status tries harder.
        if not self._progress_unwritten:
            self._progress_unwritten = True
            unwritten = could_not_write("the status file", self.status_path or "", exc)
            self._log(f"warning: {unwritten}; the job goes on")

    def _shown(self, path: str | os.PathLike[str]) -> str:
        """A path as the log shows it: from the job's folder (where its notebook is) when
        it lies inside it, as its owner sees their files; never the server's full path."""
        try:
            return str(Path(path).absolute().relative_to(self.cwd))
        except ValueError:
            return Path(path).name

    def _log(self, line: str) -> None:
        if self.echo:
            # The log may be on a full disk too; the status file carries what matters.
            with contextlib.suppress(OSError):
                print(f"[nbjobs] {line}", file=self._stderr, flush=True)


def simulated_gpus_line(visible: str) -> str:
    """The log's word on simulated GPUs: "GPU 0 is simulated", "GPUs 0,1 are simulated"."""
    ids = [part.strip() for part in visible.split(",") if part.strip()]
    which = f"GPU {ids[0]} is" if len(ids) == 1 else f"GPUs {','.join(ids)} are"
    return (
        f"{which} simulated (a machine without a GPU, trying nbjobs out): "
        "nothing here computes on a GPU"
    )


# -- checks used by prepare ---------------------------------------------------


def _seconds(value: float | None) -> str:
    return f"{value:g} s"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value
