"""Bounded output: however much a notebook prints, the result stays openable and memory bounded.

A teaching notebook's ``while True: print(...)`` under a time limit, or one cell printing
200 MB, once made output notebooks of hundreds of megabytes (JupyterLab cannot open them)
and a runner that held all of it in memory (an OOM kill in a pod with a memory limit).

The rule, per code cell: outputs are kept as they come until the cell has kept
``cell`` characters (text and rich outputs alike; a character of a stream is about a
byte); stream text past half of that goes to a tail of at most the other half, per
stream, where newer text pushes older text out; rich outputs past the limit (images,
HTML) are dropped. When
the cell ends (or a later output is kept, such as the error of the cell), a note says
how much was dropped, then the tail follows: the head and the end of what the cell
printed, and a count of what lies between. The whole notebook's outputs stop growing at
``notebook`` characters the same way. Dropped text is never kept in memory, only counted.
A Python kernel keeps back text the same way before sending it (:mod:`.kernel_output_cap`):
a stream message saying the kernel left text out before it becomes that stream's tail.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # nbformat is imported where a cell or an output is made
    from nbformat import NotebookNode

MiB = 1024 * 1024
#: the metadata key of a stream message that says how many characters of it the kernel
#: left out before sending it (see :mod:`.kernel_output_cap`)
LEFT_OUT_KEY = "nbjobs_left_out"


@dataclass(frozen=True)
class OutputLimits:
    """How much output a run keeps (characters; the runner's ``--max-*-output`` options)."""

    #: kept per code cell in the output notebook
    cell: int = 2 * MiB
    #: kept for all cells together
    notebook: int = 16 * MiB
    #: copied to the job's log (the runner's stdout and stderr), the rest counted
    log: int = 32 * MiB

    def as_dict(self) -> dict[str, int]:
        return {"cell": self.cell, "notebook": self.notebook, "log": self.log}


@dataclass
class _Tail:
    """The newest text of one stream, at most ``limit`` characters."""

    limit: int
    parts: deque[str] = field(default_factory=deque)
    size: int = 0

    def add(self, text: str) -> int:
        """Keep ``text`` at the end; return how many characters fell out of the front."""
        if self.limit <= 0:
            return len(text)
        if len(text) >= self.limit:
            dropped = self.size + len(text) - self.limit
            self.parts = deque([text[len(text) - self.limit :]])
            self.size = self.limit
            return dropped
        self.parts.append(text)
        self.size += len(text)
        dropped = 0
        while self.size > self.limit:
            first = self.parts[0]
            excess = self.size - self.limit
            if len(first) <= excess:
                self.parts.popleft()
                self.size -= len(first)
                dropped += len(first)
            else:
                self.parts[0] = first[excess:]
                self.size -= excess
                dropped += excess
        return dropped

    def text(self) -> str:
        return "".join(self.parts)


class OutputBudget:
    """Decides, output by output, what a run keeps; counts what it drops."""

    def __init__(self, limits: OutputLimits) -> None:
        self.limits = limits
        self.notebook_kept = 0
        #: characters dropped, per notebook cell index
        self.dropped: dict[int, int] = {}
        self._cell: int | None = None
        self._cell_kept = 0
        self._tails: dict[str, _Tail] = {}
        self._cell_dropped = 0
        self._rich_dropped = 0

    # -- per output -----------------------------------------------------------------

    def admit(self, cell_index: int, msg: dict[str, Any], outs: list[NotebookNode]) -> bool:
        """Whether an output message may be appended to the cell's outputs as usual.

        False: the budget took it (a stream's text went to the tail, or it was dropped).
        When it is True for a non-stream output after something was dropped, the note
        and the tail are put into ``outs`` first, so they stay in order.
        """
        self._enter(cell_index)
        kind = msg.get("msg_type")
        content = msg.get("content", {})
        if kind == "stream" and (gap := left_out_by_kernel(msg)):
            self._after_a_gap(content.get("name", "stdout"), content.get("text", ""), gap)
            return False
        size = _size_of(kind, content)
        room = min(self.limits.cell - self._cell_kept, self.limits.notebook - self.notebook_kept)
        # streams keep half the cell's room for their end (the tail)
        head_room = min(room, self.limits.cell // 2 - self._cell_kept)
        if kind == "stream" and (self._tails or size > head_room):
            name = content.get("name", "stdout")
            text = content.get("text", "")
            if not self._tails and head_room > 0:
                room = head_room
                # fill the head to the brim first; the tail takes the rest
                head, text = text[:room], text[room:]
                outs.append(_new_output("stream", name=name, text=head))
                self._keep(len(head))
            tail = self._tails.setdefault(name, _Tail(self._tail_room()))
            self._drop(tail.add(text))
            return False
        if kind == "error":
            self._flush_into(outs)  # a traceback is always kept, after the note and tail
            self._keep(size)
            return True
        if size > room:
            self._rich_dropped += 1
            self._drop(size)
            return False
        self._flush_into(outs)
        self._keep(size)
        return True

    def cleared(self, cell_index: int) -> None:
        """The cell cleared its outputs (``clear_output``): its budget starts over."""
        if cell_index == self._cell:
            self.notebook_kept -= self._cell_kept
            self._cell_kept = 0
            self._tails = {}

    def finish_cell(self, cell_index: int, outs: list[NotebookNode]) -> None:
        """The cell ended: add the note and the tail of what it printed past its limit."""
        if cell_index == self._cell:
            self._flush_into(outs)
        self._cell = None

    # -- what the output notebook records ------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {
            "limits": self.limits.as_dict(),
            "dropped_characters": sum(self.dropped.values()),
            "cells_with_dropped_output": sorted(self.dropped),
        }

    # -- inside ------------------------------------------------------------------------

    def _enter(self, cell_index: int) -> None:
        if cell_index != self._cell:
            self._cell = cell_index
            self._cell_kept = 0
            self._tails = {}
            self._cell_dropped = 0
            self._rich_dropped = 0

    def _after_a_gap(self, name: str, text: str, gap: int) -> None:
        """A stream's text that the kernel kept back: ``gap`` characters it left out
        came before ``text``, so ``text`` is the newest of the stream, never its start.

        It becomes the stream's tail on its own: the tail held so far lies before the
        gap, so it is left out too (and counted), as is whatever of ``text`` the tail
        has no room for.
        """
        older = self._tails.get(name)
        self._drop(gap + (older.size if older else 0))
        tail = self._tails[name] = _Tail(self._tail_room())
        self._drop(tail.add(text))

    def _tail_room(self) -> int:
        return min(self.limits.cell // 2, max(0, self.limits.notebook - self.notebook_kept))

    def _keep(self, size: int) -> None:
        self._cell_kept += size
        self.notebook_kept += size

    def _drop(self, size: int) -> None:
        if size:
            assert self._cell is not None
            self._cell_dropped += size
            self.dropped[self._cell] = self.dropped.get(self._cell, 0) + size

    def _flush_into(self, outs: list[NotebookNode]) -> None:
        if not self._cell_dropped:
            # the tail held everything past the head: the output is whole, say nothing
            for name, tail in self._tails.items():
                outs.append(_new_output("stream", name=name, text=tail.text()))
                self._keep(tail.size)
            self._tails = {}
            self._rich_dropped = 0
            return
        what = f"{self._cell_dropped:,} characters of output"
        if self._rich_dropped:
            what += f" (with {self._rich_dropped} rich outputs such as images)"
        note = (
            f"[nbjobs] {what} were left out here: this cell reached the output limit "
            f"({_size(self.limits.cell)} a cell, {_size(self.limits.notebook)} a notebook). "
            "The start is above"
            + (", the end below" if self._tails else "")
            + ". Print less, or write large results to a file.\n"
        )
        outs.append(_new_output("stream", name="stderr", text=note))
        for name, tail in self._tails.items():
            text = tail.text()
            outs.append(_new_output("stream", name=name, text=text))
            self._keep(len(text))
        self._tails = {}
        self._cell_dropped = 0
        self._rich_dropped = 0


def left_out_by_kernel(msg: dict[str, Any]) -> int:
    """Characters of a stream the kernel left out before sending ``msg`` (0: none)."""
    metadata = msg.get("metadata")
    count = metadata.get(LEFT_OUT_KEY, 0) if isinstance(metadata, dict) else 0
    return count if isinstance(count, int) and count > 0 else 0


def _size_of(kind: str | None, content: dict[str, Any]) -> int:
    if kind == "stream":
        return len(content.get("text", ""))
    if kind == "error":
        return sum(len(line) for line in content.get("traceback", [])) + 100
    data = content.get("data", {})
    total = 0
    for value in data.values():
        total += len(value) if isinstance(value, str) else len(json.dumps(value))
    return total + 100


def _size(n: int) -> str:
    if n >= MiB:
        return f"{n / MiB:g} MiB"
    return f"{n / 1024:g} KiB" if n >= 1024 else f"{n} characters"


def _new_output(output_type: str, **fields: Any) -> NotebookNode:
    """An nbformat output (nbformat imported here: the runner's start does not wait on it)."""
    from nbformat.v4 import new_output

    return new_output(output_type, **fields)
