"""The job's log as the kernel's outputs reach it: what a cell prints goes to the
runner's stdout or stderr (the job's log) while the job runs, tracebacks without their
colours, results and displays as their plain text; up to the log's limit
(``--max-log-output``), past which output is only counted. The nbclient that hands each
output to it keeps the notebook's outputs within their budget (:mod:`.output_limits`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TextIO

from nbclient import NotebookClient
from nbformat import NotebookNode

from .output_limits import OutputBudget, left_out_by_kernel
from .output_notebook import ANSI


class LogEcho:
    """Copies the kernel's output messages to ``stdout`` and ``stderr``, ``limit``
    characters of them at most; counts what it copied and what it left out."""

    def __init__(self, limit: int, stdout: TextIO, stderr: TextIO) -> None:
        self.limit = limit
        self.stdout = stdout
        self.stderr = stderr
        #: characters of cell output copied to the log, and left out of it
        self.logged = 0
        self.dropped = 0

    def output(self, msg: dict[str, Any]) -> None:
        """Log one output message. A log that cannot be written (a full disk) costs the
        log, not the job: the output notebook holds every output anyway."""
        with contextlib.suppress(OSError):
            self._message(msg)

    def _message(self, msg: dict[str, Any]) -> None:
        content = msg.get("content", {})
        kind = msg.get("msg_type")
        if kind == "stream":
            stream = self.stderr if content.get("name") == "stderr" else self.stdout
            # text the kernel kept back is counted as never logged (it starts keeping
            # back only once a cell printed more than the log's limit)
            self.dropped += left_out_by_kernel(msg)
            self._text(stream, content.get("text", ""))
        elif kind == "error":
            tb = "\n".join(ANSI.sub("", line) for line in content.get("traceback", []))
            self.stderr.write(tb + "\n")
            self.stderr.flush()
        elif kind in ("execute_result", "display_data"):
            text = content.get("data", {}).get("text/plain")
            if text:
                self._text(self.stdout, text + "\n")

    def _text(self, stream: TextIO, text: str) -> None:
        """Copy output to the log until the log's limit; past it, only count it."""
        room = self.limit - self.logged
        if room <= 0:
            self.dropped += len(text)
            return
        if len(text) > room:
            self.dropped += len(text) - room
            text = text[:room] + (
                f"\n[nbjobs] the log reached its limit ({self.limit:,} characters); "
                "later output is counted, not logged (the output notebook keeps the start and "
                "end of each cell's output)\n"
            )
        self.logged += len(text)
        stream.write(text)
        stream.flush()


class EchoingClient(NotebookClient):
    """An nbclient that keeps outputs within a budget and hands each one kept to a callback."""

    on_output: Callable[[dict[str, Any]], None] | None = None
    budget: OutputBudget | None = None

    def output(
        self,
        outs: list[NotebookNode],
        msg: dict[str, Any],
        display_id: str | None,
        cell_index: int,
    ) -> NotebookNode | None:
        if self.on_output is not None:
            self.on_output(msg)  # the log has a budget of its own
        hooked = self.output_hook_stack[msg["parent_header"].get("msg_id")]
        if self.budget is not None and not hooked and not self.budget.admit(cell_index, msg, outs):
            return None
        return super().output(outs, msg, display_id, cell_index)

    def clear_output(self, outs: list[NotebookNode], msg: dict[str, Any], cell_index: int) -> None:
        super().clear_output(outs, msg, cell_index)
        if self.budget is not None and not msg.get("content", {}).get("wait"):
            self.budget.cleared(cell_index)
