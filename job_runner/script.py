"""Scripts and commands as jobs: ``train.py`` or ``prepare.sh`` from the user's folder, or
a shell command, run with the same status file, log, time limit and cancel as a notebook.

Its output is its log: what it prints goes to the runner's stdout (the job's log) and
to OUTPUT (a ``.log`` next to the script), kept up to ``max_output`` characters (then
its end, with a note of how much was left out). Its exit code decides the job's state:
0 succeeded, anything else failed ("train.py exited with code 3: <its last line>").
The parameters reach it as environment variables: ``NBJOBS_PARAMETERS`` (all of them
as JSON) and ``NBJOBS_PARAM_<NAME>`` for each (text as is, anything else as JSON).

It runs in a process group of its own: a time limit or a cancel stops the whole group
(SIGTERM, then SIGKILL after a grace), never just the interpreter.

With a ``telemetry_interval`` its GPUs, CPU and memory are sampled as a notebook's are
(:mod:`.telemetry`: the runner's process tree, so the script and whatever it starts),
into the status file's ``telemetry`` and ``telemetry_summary``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

from .errors import STATE_FOR_EXIT_CODE, BadInput, ExitCode, could_not_write
from .folder_room import FolderRoom, write_within
from .status import RunStatus, read_stop_reason, utc_now, write_status
from .telemetry import Sample, Sampler, interval_problem

#: how a script is started, by its suffix
INTERPRETERS = {".py": [sys.executable, "-u"], ".sh": ["/bin/bash"]}
#: seconds between SIGTERM and SIGKILL when a script is stopped
GRACE = 10.0


def parameter_env(parameters: dict[str, Any]) -> dict[str, str]:
    """The environment variables that carry ``parameters`` to a script."""
    env = {"NBJOBS_PARAMETERS": json.dumps(parameters)}
    for name, value in parameters.items():
        env[f"NBJOBS_PARAM_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


class ScriptJob:
    """One script or command, run to its end."""

    def __init__(
        self,
        input_path: Path | None,
        output_path: Path,
        *,
        command: str | None,
        parameters: dict[str, Any],
        timeout: float | None,
        status_path: Path | None,
        cwd: Path,
        source_name: str | None,
        max_output: int,
        telemetry_interval: float = 0,
        room: FolderRoom | None = None,
    ) -> None:
        problem = interval_problem(telemetry_interval)
        if problem is not None:
            raise BadInput(f"--telemetry-interval: {problem}")
        if command is None and input_path is None:
            raise BadInput("give a script (INPUT) or --command")
        if command is None:
            assert input_path is not None
            kind = INTERPRETERS.get(input_path.suffix)
            if kind is None:
                raise BadInput(
                    f"INPUT {input_path.name} is not a script this runner starts "
                    "(.py with Python, .sh with bash); use --command for anything else"
                )
            if not input_path.is_file():
                raise BadInput(f"INPUT {input_path} does not exist")
            self.argv = [*kind, str(input_path)]
        else:
            self.argv = ["/bin/bash", "-c", command]
        if not cwd.is_dir():
            raise BadInput(f"--cwd {cwd} is not a folder")
        if input_path is not None and output_path.absolute() == input_path.absolute():
            raise BadInput(f"OUTPUT {output_path} is the script itself; choose another path")
        self.name = source_name or (input_path.name if input_path else "the command")
        self.output_path = output_path
        self.parameters = parameters
        self.timeout = timeout
        self.status_path = status_path
        self.cwd = cwd
        self.max_output = max_output
        self.status = RunStatus(
            state="starting",
            started_at=utc_now(),
            input_path=str(input_path or ""),
            output_path=str(output_path),
            pid=os.getpid(),
            host=socket.gethostname(),
        )
        self._stop_reason: tuple[ExitCode, str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.telemetry_interval = float(telemetry_interval)
        self._sampler: Sampler | None = None
        self._telemetry_ended = False
        #: the room left in the owner's folder: at its end the script is stopped
        self.room = room
        #: the status is written from the main thread and the sampling thread
        self._status_lock = threading.Lock()

    def _write_status(self, durable: bool = False) -> None:
        if self.status_path is not None:
            with self._status_lock:
                write_status(self.status_path, self.status, durable=durable, last_resort=durable)

    # -- telemetry -----------------------------------------------------------

    def _start_telemetry(self) -> None:
        if not self.telemetry_interval:
            return
        self._sampler = Sampler(
            self.telemetry_interval, on_sample=self._telemetry_arrived, on_note=self._log
        )
        self._sampler.start()

    def _telemetry_arrived(self, sample: Sample, summary: Sample) -> None:
        """From the sampling thread: the sample into the status file at once."""
        with self._status_lock:
            if self._telemetry_ended:
                return
            self.status.telemetry, self.status.telemetry_summary = sample, summary
        try:
            self._write_status()
        except OSError as exc:
            self._log(could_not_write("the status file", self.status_path or "", exc))

    def _end_telemetry(self) -> None:
        """The last sample (a moment's wait at most) and the final summary."""
        if self._sampler is None:
            return
        latest, summary = self._sampler.stop()
        with self._status_lock:
            self._telemetry_ended = True
            if latest is not None:
                self.status.telemetry, self.status.telemetry_summary = latest, summary

    def _log(self, line: str) -> None:
        print(f"[nbjobs] {line}", file=sys.stderr, flush=True)

    def stop(self, code: ExitCode, reason: str) -> None:
        """Stop the script's whole process group: SIGTERM, then SIGKILL after GRACE."""
        if self._stop_reason is None:
            self._stop_reason = (code, reason)
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)

        def kill_later() -> None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(GRACE)
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        threading.Thread(target=kill_later, daemon=True).start()

    def run(self) -> int:
        env = {**os.environ, **parameter_env(self.parameters), "PYTHONUNBUFFERED": "1"}
        self._log(f"running {self.name}: {' '.join(self.argv[:2])} ...")
        try:
            self.output_path.parent.mkdir(exist_ok=True)
            out = self.output_path.open("wb")
        except OSError as exc:
            raise BadInput(could_not_write("the output log", self.output_path, exc)) from None
        kept = 0
        dropped = 0
        tail: deque[bytes] = deque(maxlen=1000)
        last_line = b""
        with out:
            self._proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.status.state = "running"
            self._write_status()
            self._start_telemetry()
            if self.room is not None:
                room = self.room
                room.when_full(lambda: self.stop(ExitCode.FAILED, room.message()))
                room.start_watching()
            timer = None
            if self.timeout:
                timer = threading.Timer(
                    self.timeout,
                    self.stop,
                    (ExitCode.TIMED_OUT, f"time limit of {self.timeout:g} s reached"),
                )
                timer.daemon = True
                timer.start()
            assert self._proc.stdout is not None
            for line in iter(self._proc.stdout.readline, b""):
                write_within(sys.stdout, line)
                if line.strip():
                    last_line = line
                if kept + len(line) <= self.max_output:
                    out.write(line)
                    kept += len(line)
                else:
                    dropped += len(line)
                    tail.append(line)
            returncode = self._proc.wait()
            if timer is not None:
                timer.cancel()
            if dropped:
                kept_tail = b"".join(tail)
                out.write(
                    f"\n[nbjobs] {dropped - len(kept_tail)} bytes of output left out here; "
                    "the end follows\n".encode()
                )
                out.write(kept_tail)
        return self._finish(returncode, last_line.decode("utf-8", "replace").strip())

    def _finish(self, returncode: int, last_line: str) -> int:
        self._end_telemetry()
        message: str | None = None
        if self._stop_reason is not None:
            code, message = self._stop_reason
        elif returncode == 0:
            code = ExitCode.SUCCEEDED
        else:
            code = ExitCode.FAILED
            if returncode < 0:
                how = f"was killed by {signal.Signals(-returncode).name}"
            else:
                how = f"exited with code {returncode}"
            message = f"{self.name} {how}" + (f": {last_line[:300]}" if last_line else "")
        self.status.state = STATE_FOR_EXIT_CODE[code]
        self.status.exit_code = int(code)
        self.status.message = message
        self.status.finished_at = utc_now()
        try:
            self._write_status(durable=True)
        except OSError as exc:
            self._log(could_not_write("the status file", self.status_path or "", exc))
        self._log(f"done: {self.status.state}" + (f" ({message})" if message else ""))
        return int(code)


def run_script(
    input_path: str | None,
    output_path: str,
    *,
    command: str | None,
    parameters: dict[str, Any],
    timeout: float | None,
    status_file: str | None,
    cwd: str | None,
    source_name: str | None,
    max_output: int,
    telemetry_interval: float = 0,
    room: FolderRoom | None = None,
) -> int:
    """Run a script or command as a job; its exit code as the runner's (see ExitCode)."""
    source = Path(input_path).absolute() if input_path and input_path != "-" else None
    job = ScriptJob(
        source,
        Path(output_path).absolute(),
        command=command,
        parameters=parameters,
        timeout=timeout,
        status_path=Path(status_file).absolute() if status_file else None,
        cwd=Path(cwd).absolute() if cwd else (source.parent if source else Path.cwd()),
        source_name=source_name,
        max_output=max_output,
        telemetry_interval=telemetry_interval,
        room=room,
    )

    def cancelled(signum: int, _frame: object) -> None:
        # with the reason the job service left (its GPUs were idle, say), as a notebook's
        reason = read_stop_reason(job.status_path)
        job.stop(ExitCode.CANCELLED, reason or f"cancelled by {signal.Signals(signum).name}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, cancelled)
        signal.signal(signal.SIGINT, cancelled)
    if job.status_path is not None:
        job._write_status()
    return job.run()
