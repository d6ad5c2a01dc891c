"""The output cap inside a Python kernel: no message the kernel sends outgrows a cell.

The runner's :class:`~.output_limits.OutputBudget` decides what the output notebook keeps,
but only after a message has arrived, and a message arrives whole: a 200 MB stream
message is held several times over (the frames, the decoded JSON, the output) before
the budget can drop it; and messages the runner has not read yet wait in its memory. So
the kernel is asked, before the first cell, to send no more than the runner can use:

* a write to stdout or stderr bigger than a cell keeps is cut to its start and end,
  with a line saying how much was left out;
* ipykernel joins the writes of a fifth of a second into one message (200 writes of
  1 MB went out as one message of 200 MB): writes are counted, and what waits is sent
  before it would outgrow a cell;
* once a cell has printed more than the runner keeps of it and logs (``through``: the
  larger of a cell's limit and the log's), the runner keeps only the newest text of
  each stream: so the kernel keeps that too, and sends it twice a second and when the
  cell ends, with how many characters it left out in the message's metadata
  (``nbjobs_left_out``, counted by the runner's budget and said in the log). What it
  passed on before is sent first, on its own, so a message with that count carries
  only kept-back text: the runner places it as the stream's end, never after its start;
* whatever still goes out bigger (a display, a cell's result, a traceback, output of a
  subprocess) is cut or dropped where every message leaves the kernel (its session's
  ``send``), with a line saying so.

:func:`install_code` gives the code the runner sends (silently) to the kernel.
"""

from __future__ import annotations

import inspect
from typing import Any

from .output_limits import LEFT_OUT_KEY, OutputLimits

#: how often a kernel that keeps only the newest text of a stream sends it (seconds)
TAIL_EVERY = 0.5


def install_code(limits: OutputLimits) -> str:
    """The code that installs the cap in a Python kernel, for ``limits``.

    A write or message bigger than a whole cell is cut to two fifths of the cell's
    room (a fifth for its start, a fifth for its end), so what is sent fits in the
    head the runner keeps. Nothing is left in the user's namespace.
    """
    whole = max(2048, limits.cell)
    half = max(1024, limits.cell // 5)
    through = max(whole, limits.log)
    name = _nbjobs_cap_output.__name__
    call = f"{name}({whole}, {half}, {through}, {TAIL_EVERY!r}, {LEFT_OUT_KEY!r})"
    return f"{inspect.getsource(_nbjobs_cap_output)}\n{call}\ndel {name}\n"


# Over 80 lines: the kernel runs this from its source (inspect.getsource), so it must be
# one function that defines all it needs.
def _nbjobs_cap_output(whole: int, half: int, through: int, every: float, key: str) -> None:
    # Runs in the kernel, from its source: standard library and IPython only, and
    # annotations that the kernel's own names resolve.
    import sys
    import threading
    import time
    from collections import deque
    from typing import Any  # noqa: F401 (this module's are strings; the kernel's are not)

    from IPython import get_ipython

    shell: Any = get_ipython()
    lock = threading.Lock()
    #: this cell's: characters passed on as written, and per stream name the newest
    #: text kept back (parts, size, characters that fell out, when last sent)
    cell: Any = {"passed": 0, "tails": {}}
    #: characters left out, per stream name, for the next stream message to say
    left_out: Any = {}

    def cut(text: str, what: str) -> str:
        left = len(text) - 2 * half
        return text[:half] + f"\n[nbjobs] {left:,} characters of {what} left out\n" + text[-half:]

    def shorten(text: Any, most: int) -> Any:
        if not isinstance(text, str) or len(text) <= most:
            return text
        return (
            text[: most // 2]
            + f"[nbjobs: {len(text) - most:,} characters left out]"
            + text[-most // 2 :]
        )

    def keep_newest(stream: Any, name: str, text: str) -> None:
        with lock:
            tail = cell["tails"].setdefault(name, [deque(), 0, 0, time.monotonic()])
            tail[0].append(text)
            tail[1] += len(text)
            limit = whole // 2
            while tail[1] > limit:
                first = tail[0][0]
                excess = tail[1] - limit
                if len(first) <= excess:
                    tail[0].popleft()
                    tail[1] -= len(first)
                    tail[2] += len(first)
                else:
                    tail[0][0] = first[excess:]
                    tail[1] -= excess
                    tail[2] += excess
            due = time.monotonic() - tail[3] >= every
        if due:
            send_tail(stream, name)

    def flush_both() -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()

    def send_tail(stream: Any, name: str) -> None:
        # nothing kept back (a cell that printed within its room): nothing to send, and
        # no flush (each waits on the kernel's IO thread: 9 % of a 500-cell notebook's
        # time when done twice after every cell)
        with lock:
            tail = cell["tails"].get(name)
            if tail is None or not tail[1]:
                return
        # anything still waiting in the stream goes out first: the message that carries
        # the kept-back text (and its count) must carry nothing else
        stream.flush()
        with lock:
            tail = cell["tails"].get(name)
            if tail is None or not tail[1]:
                return
            text, dropped = "".join(tail[0]), tail[2]
            tail[0], tail[1], tail[2], tail[3] = deque(), 0, 0, time.monotonic()
            left_out[name] = left_out.get(name, 0) + dropped
        type(stream).write(stream, text)  # ipykernel's own write: past any wrapper
        stream.flush()

    def cap_stream(stream: Any) -> None:
        write = stream.write
        name = getattr(stream, "name", None) or "stdout"
        waiting = [0]  # characters written since this cap last sent them

        def capped(text: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(text, str):
                return write(text, *args, **kwargs)
            written = len(text)
            if written > whole:
                text = cut(text, "one write")
            # no lock on this path, taken by every print: threads that print at once
            # may miscount by a write, which moves a limit by a write
            passed = cell["passed"] + len(text)
            if cell["tails"] or passed > through:
                if not cell["tails"]:
                    # what was passed on goes out now, on its own: ipykernel would join
                    # it to the kept-back text, which the runner places after a gap
                    flush_both()
                keep_newest(stream, name, text)
                return written
            cell["passed"] = passed
            if waiting[0] and waiting[0] + len(text) > whole:
                # ipykernel would join this to what waits: send that first
                stream.flush()
                waiting[0] = 0
            waiting[0] += len(text)
            write(text, *args, **kwargs)
            return written

        capped.nbjobs_capped = True  # type: ignore[attr-defined]
        stream.write = capped

    def before_each_cell(*_: Any) -> None:
        with lock:
            cell["passed"], cell["tails"] = 0, {}
        # IPython puts a stream's own write back after each cell: cap it again
        for stream in (sys.stdout, sys.stderr):
            if not getattr(stream.write, "nbjobs_capped", False):
                cap_stream(stream)

    def after_each_cell(*_: Any) -> None:
        # the end of what the cell printed is what a reader looks for: send it now
        for stream in (sys.stdout, sys.stderr):
            send_tail(stream, getattr(stream, "name", None) or "stdout")

    def within(data: Any) -> Any:
        # a rich output bigger than a cell keeps is dropped, as the runner would drop
        # it, with a line that says so
        if not isinstance(data, dict):
            return data
        sizes = {k: len(v) for k, v in data.items() if isinstance(v, (str, bytes))}
        big = sorted(k for k, n in sizes.items() if n > whole)
        if not big:
            return data
        kept = {k: v for k, v in data.items() if k not in big and k != "text/plain"}
        kept["text/plain"] = (
            f"[nbjobs] an output of {sum(sizes[k] for k in big):,} "
            f"characters ({', '.join(big)}) left out: more than a cell keeps"
        )
        return kept

    def traceback_within(content: Any) -> Any:
        lines = content.get("traceback")
        lines = list(lines) if isinstance(lines, list) else []
        evalue = content.get("evalue")
        size = sum(len(x) for x in [evalue, *lines] if isinstance(x, str))
        if size <= whole:
            return content
        if len(lines) > 200:
            lines = [*lines[:100], f"[nbjobs] {len(lines) - 200:,} lines left out", *lines[-100:]]
        most = max(400, half // max(1, len(lines)))
        return dict(
            content,
            evalue=shorten(evalue, half),
            traceback=[shorten(line, most) for line in lines],
        )

    def within_a_cell(kind: Any, content: Any) -> Any:
        if not isinstance(content, dict):
            return content
        if kind == "stream":
            text = content.get("text")
            if isinstance(text, str) and len(text) > whole:
                return dict(content, text=cut(text, "one output message"))
        elif kind in ("display_data", "execute_result", "update_display_data"):
            data = content.get("data")
            kept = within(data)
            if kept is not data:
                return dict(content, data=kept)
        elif kind == "error" or (kind == "execute_reply" and content.get("status") == "error"):
            return traceback_within(content)
        elif kind == "clear_output":
            with lock:  # the runner's budget starts over: so does this cell's
                cell["passed"], cell["tails"] = 0, {}
                left_out.clear()
        return content

    def cap_session(session: Any) -> None:
        send = session.send

        def capped_send(
            stream: Any, msg_or_type: Any, content: Any = None, *a: Any, **k: Any
        ) -> Any:
            if isinstance(msg_or_type, dict):
                header = msg_or_type.get("header") or {}
                kind = header.get("msg_type", msg_or_type.get("msg_type"))
                before = msg_or_type.get("content")
                after = within_a_cell(kind, before)
                if after is not before:
                    msg_or_type = dict(msg_or_type, content=after)
                if kind == "stream" and left_out and isinstance(after, dict):
                    with lock:
                        dropped = left_out.pop(after.get("name"), 0)
                    if dropped:
                        metadata = dict(msg_or_type.get("metadata") or {}, **{key: dropped})
                        msg_or_type = dict(msg_or_type, metadata=metadata)
            else:
                content = within_a_cell(msg_or_type, content)
            return send(stream, msg_or_type, content, *a, **k)

        session.send = capped_send
        session.nbjobs_capped = True

    sessions = [
        getattr(getattr(shell, "kernel", None), "session", None),
        getattr(sys.stdout, "session", None),
        getattr(sys.stderr, "session", None),
        getattr(shell.display_pub, "session", None),
        getattr(shell.displayhook, "session", None),
    ]
    for session in {id(s): s for s in sessions if s is not None}.values():
        if not getattr(session, "nbjobs_capped", False):
            cap_session(session)
    shell.events.register("pre_run_cell", before_each_cell)
    shell.events.register("post_run_cell", after_each_cell)
