"""Progress in the status file, written off the runner's event loop.

A status write is a new file renamed over the old one, so that a reader never sees half
of it. On ext4 a rename over an existing file also makes the kernel allocate the new
file's blocks at once (``auto_da_alloc``): about 1.5 ms a write on a quiet disk and
5 ms on a busy one, which the event loop would spend between one cell's reply and the
next cell's request. :class:`ProgressWrites` spends it in a thread of its own instead,
while the kernel runs the next cell.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .status import atomic_write_text


class ProgressWrites:
    """Replaces a status file with progress in a thread, in order, newest first: a write
    asked for while an older one waits replaces it, so a slow disk never builds a queue.

    Errors go to ``on_error`` (from that thread); the final status is not written here
    but after :meth:`settle`, so that no progress lands after it.
    """

    def __init__(self, path: Path, on_error: Callable[[OSError], None]) -> None:
        self._path = path
        self._on_error = on_error
        self._lock = threading.Lock()
        self._waiting: str | None = None
        self._last: Future[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def write(self, text: str) -> None:
        """Have ``text`` replace the file soon (a thread is started on first use); once
        closed, nothing (the final status is written)."""
        if self._closed:
            return
        with self._lock:
            queued = self._waiting is not None
            self._waiting = text
        if queued:
            return  # the write queued already takes the newest text
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="nbjobs-status")
        self._last = self._executor.submit(self._write_waiting)

    def settle(self) -> None:
        """Return once every write asked for is done: a write after this lands after them."""
        last, self._last = self._last, None
        if last is not None:
            last.result()  # never raises: _write_waiting hands its errors to on_error

    def close(self) -> None:
        """Settle, and end the thread."""
        self._closed = True
        self.settle()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _write_waiting(self) -> None:
        with self._lock:
            text, self._waiting = self._waiting, None
        if text is None:
            return
        try:
            atomic_write_text(self._path, text)
        except OSError as exc:
            self._on_error(exc)
