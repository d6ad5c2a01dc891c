"""What a benchmarked service's event loop went through, recorded inside its process.

Three records, each a list of plain tuples written as JSON when the service stops:

  lags       (when, seconds): how late a 10 ms sleep woke; a loop that blocks shows
             here, a request queued elsewhere (a thread pool) does not
  gc         (when, generation, seconds): every garbage collection
  callbacks  (when, seconds, what): every callback of the loop that ran for longer
             than :data:`SLOW_CALLBACK`, named by the coroutine it stepped and where
             that coroutine stopped next (or the function it called)

A long callback is one that held the loop: a synchronous database call, a scheduling
pass or a JSON encoding run on the loop's thread. Under load it may also be one that
waited for the GIL while another thread of the service held it; the name says which
code was running either way. ``when`` is ``time.monotonic()``, which the benchmark's
own process shares, so each record can be cut to a phase of the benchmark.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import time
from pathlib import Path
from types import CodeType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: how often the lag is checked
LAG_TICK = 0.01
#: a callback that runs this long is recorded
SLOW_CALLBACK = 0.02


class LoopWatch:
    """Records lags, GC pauses and long callbacks from :meth:`start` until :meth:`write`."""

    def __init__(self) -> None:
        self.lags: list[tuple[float, float]] = []
        self.collections: list[tuple[float, int, float]] = []
        self.callbacks: list[tuple[float, float, str]] = []
        self._collecting: list[float] = []
        self._task: asyncio.Future[None] | None = None
        self._run: Any = None

    def start(self) -> None:
        """Begin recording (in the running loop)."""
        gc.callbacks.append(self._on_collect)
        self._run = asyncio.events.Handle._run
        watch = self

        def timed_run(handle: asyncio.Handle) -> None:
            # Where the task waited is read before every step (it has moved on after),
            # but as the frame and line only: named (paths, strings) only for the slow
            # steps. Naming each step cost the service a sixth of its loop's CPU in a
            # storm, which the benchmark then counted as the service's own.
            task = getattr(getattr(handle, "_callback", None), "__self__", None)
            before = innermost(task) if isinstance(task, asyncio.Task) else None
            began = time.monotonic()
            watch._run(handle)
            took = time.monotonic() - began
            if took >= SLOW_CALLBACK:
                was = _named(*before) if before is not None else None
                watch.callbacks.append((began, took, describe(handle, was)))

        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
        self._task = asyncio.ensure_future(self._watch_lag())

    def write(self, folder: Path) -> None:
        """Stop recording; write ``service-lags.json``, ``-gc.json``, ``-callbacks.json``."""
        if self._task is not None:
            self._task.cancel()
        if self._run is not None:
            asyncio.events.Handle._run = self._run  # type: ignore[method-assign]
        gc.callbacks.remove(self._on_collect)
        (folder / "service-lags.json").write_text(json.dumps(self.lags))
        (folder / "service-gc.json").write_text(json.dumps(self.collections))
        (folder / "service-callbacks.json").write_text(json.dumps(self.callbacks))

    async def _watch_lag(self) -> None:
        while True:
            began = time.monotonic()
            await asyncio.sleep(LAG_TICK)
            self.lags.append((began, time.monotonic() - began - LAG_TICK))

    def _on_collect(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._collecting[:] = [time.monotonic()]
        elif self._collecting:
            began = self._collecting[0]
            self.collections.append((began, info["generation"], time.monotonic() - began))


def describe(handle: asyncio.Handle, before: str | None = None) -> str:
    """A callback as ``coroutine: where it was -> where it stopped next`` (a task's step:
    the innermost coroutine it awaited, each time) or as the function it called."""
    callback = getattr(handle, "_callback", None)
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        name = getattr(getattr(coro, "cr_code", None), "co_qualname", repr(coro))
        return f"{name}: {before or 'start'} -> {awaiting(task) or 'end'}"
    func = getattr(callback, "func", callback)  # functools.partial
    code = getattr(func, "__code__", None)
    if code is not None:
        return f"{code.co_qualname} ({_short(code.co_filename)}:{code.co_firstlineno})"
    return "a cancelled callback" if callback is None else repr(callback)[:120]


def innermost(task: asyncio.Task[Any]) -> tuple[CodeType, int] | None:
    """The code and line where a task's innermost coroutine waits; None: it ended."""
    coro: Any = task.get_coro()
    frame = None
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or frame
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return None if frame is None else (frame.f_code, frame.f_lineno)


def awaiting(task: asyncio.Task[Any]) -> str | None:
    """Where a task's innermost coroutine waits (``function (file:line)``); None: ended."""
    where = innermost(task)
    return None if where is None else _named(*where)


def _named(code: CodeType, line: int) -> str:
    return f"{code.co_qualname} ({_short(code.co_filename)}:{line})"


@functools.lru_cache(maxsize=4096)
def _short(filename: str) -> str:
    """A source file's path from its package (``job_service/queue.py``, ``tornado/web.py``)."""
    path = Path(filename)
    parts = path.parts
    if "site-packages" in parts:
        return "/".join(parts[parts.index("site-packages") + 1 :])
    if path.is_relative_to(ROOT):
        return str(path.relative_to(ROOT))
    return "/".join(parts[-2:])
