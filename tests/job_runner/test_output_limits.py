"""Runaway output: a flood cannot sink a job, its memory or the result's openability."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time

import nbformat
import psutil
from nbjobs.job_runner import ExitCode, read_status
from nbjobs.job_runner.output_limits import LEFT_OUT_KEY, OutputBudget, OutputLimits, _Tail

from .helpers import run_cli, runner_command

KiB = 1024
MiB = 1024 * KiB


def _run_measuring_the_runner(*args: object) -> tuple[int, int, str]:
    """Run the runner to its end; its exit code, its own peak RSS in bytes (the high-water
    mark the kernel keeps for it, the kernel's own memory not included) and its log."""
    peak = 0
    with subprocess.Popen(
        runner_command(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as proc:
        log: list[bytes] = []
        reader = threading.Thread(target=lambda: log.append(proc.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        while proc.poll() is None:
            with (
                contextlib.suppress(OSError, ValueError, IndexError),
                open(f"/proc/{proc.pid}/status") as status,
            ):
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * KiB)
            time.sleep(0.02)
        reader.join()
    return proc.returncode, peak, b"".join(log).decode(errors="replace")


def _stream_text(cell: nbformat.NotebookNode, name: str = "stdout") -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == name)


def test_a_cell_that_prints_too_much_keeps_its_start_and_end(make_notebook, tmp_path):
    source = make_notebook(
        "for i in range(200_000):\n    print(f'line {i:06d}')",
        "print('next cell runs')",
    )
    output, status = tmp_path / "out.ipynb", tmp_path / "s.json"

    proc = run_cli(
        source,
        output,
        "--status-file",
        status,
        "--max-cell-output",
        "64K",
        "--max-log-output",
        "8K",
    )

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr[-2000:]
    nb = nbformat.read(output, as_version=4)
    nbformat.validate(nb)
    flood = nb.cells[0]
    text = _stream_text(flood)
    assert text.startswith("line 000000\n")
    assert text.endswith("line 199999\n")  # the end is kept
    assert len(text) <= 64 * KiB + 100
    note = _stream_text(flood, "stderr")
    assert "characters of output were left out here" in note
    assert "The start is above, the end below" in note
    assert _stream_text(nb.cells[1]) == "next cell runs\n"
    summary = nb.metadata["nbjobs"]["output"]
    assert summary["cells_with_dropped_output"] == [0]
    # 200,000 lines of 12 characters, less what was kept
    assert summary["dropped_characters"] == 200_000 * 12 - len(text)
    assert summary["limits"]["cell"] == 64 * KiB
    # the log stops at its own limit and says so
    assert "the log reached its limit" in proc.stdout
    assert len(proc.stdout) < 8 * KiB + 500
    assert summary["log_dropped_characters"] > 2_000_000


def test_the_whole_notebook_has_a_limit_too(make_notebook, tmp_path):
    cells = [f"print('{c}' * 40_000)" for c in "abcdef"]
    source = make_notebook(*cells)
    output = tmp_path / "out.ipynb"

    proc = run_cli(source, output, "--max-cell-output", "64K", "--max-output", "100K")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr[-2000:]
    nb = nbformat.read(output, as_version=4)
    kept = [len(_stream_text(c)) for c in nb.cells]
    assert kept[0] == 40_001  # under both limits: whole
    assert sum(kept) <= 100 * KiB + 64 * KiB // 2 + 10
    assert kept[-1] == 0  # nothing left for the last cell's text, but its note
    assert "left out" in _stream_text(nb.cells[-1], "stderr")


def test_images_past_the_limit_are_dropped_and_counted(make_notebook, tmp_path):
    source = make_notebook(
        "from IPython.display import display, HTML\n"
        "for i in range(50):\n    display(HTML('<b>' + 'x' * 4000 + '</b>'))\n"
        "print('after')"
    )
    output = tmp_path / "out.ipynb"

    proc = run_cli(source, output, "--max-cell-output", "32K")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr[-2000:]
    nb = nbformat.read(output, as_version=4)
    rich = [o for o in nb.cells[0].outputs if o.output_type == "display_data"]
    assert 1 <= len(rich) < 10
    note = _stream_text(nb.cells[0], "stderr")
    assert "rich outputs such as images" in note
    assert _stream_text(nb.cells[0]).endswith("after\n")


def test_a_traceback_after_a_flood_is_kept(make_notebook, tmp_path):
    source = make_notebook("print('x' * 500_000)\nraise ValueError('the real problem')")
    output, status = tmp_path / "out.ipynb", tmp_path / "s.json"

    proc = run_cli(source, output, "--status-file", status, "--max-cell-output", "16K")

    assert proc.returncode == ExitCode.FAILED
    nb = nbformat.read(output, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    kinds = [o.output_type for o in code_cells[0].outputs]
    assert kinds[-1] == "error"  # after the head, the note and the tail
    assert code_cells[0].outputs[-1]["evalue"] == "the real problem"
    final = read_status(status)
    assert final is not None
    assert final.error is not None
    assert final.error.evalue == "the real problem"


def test_clear_output_gives_the_cell_its_budget_back(make_notebook, tmp_path):
    source = make_notebook(
        "from IPython.display import clear_output\n"
        "for i in range(30):\n    clear_output()\n    print(str(i) * 5000)\n"
    )
    output = tmp_path / "out.ipynb"

    proc = run_cli(source, output, "--max-cell-output", "16K")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr[-2000:]
    nb = nbformat.read(output, as_version=4)
    assert _stream_text(nb.cells[0]) == "29" * 5000 + "\n"  # what a user saw last, whole
    assert nb.metadata["nbjobs"]["output"]["dropped_characters"] == 0


def test_memory_stays_bounded_while_a_cell_prints_forever(make_notebook, tmp_path):
    """A teaching notebook's `while True: print(...)` under a time limit (the runner's
    process tree once grew to 1.4 GiB and wrote a 224 MB notebook)."""
    source = make_notebook("i = 0\nwhile True:\n    print('hello, world', i)\n    i += 1")
    output = tmp_path / "out.ipynb"
    peak = 0
    with subprocess.Popen(
        runner_command(source, output, "--timeout", "20"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        runner = psutil.Process(proc.pid)
        done = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not done.is_set():
                try:
                    peak = max(peak, runner.memory_info().rss)
                except psutil.Error:
                    return
                time.sleep(0.1)

        watcher = threading.Thread(target=watch)
        watcher.start()
        code = proc.wait(timeout=120)
        done.set()
        watcher.join()

    assert code == ExitCode.TIMED_OUT
    size = output.stat().st_size
    assert size < 20 * 1024 * KiB, size  # openable: the defaults keep it well under 20 MB
    nb = json.loads(output.read_text())
    assert nb["metadata"]["nbjobs"]["output"]["dropped_characters"] > 0
    assert peak < 300 * 1024 * KiB, f"the runner peaked at {peak / 2**20:.0f} MiB"


def test_the_tail_keeps_exactly_the_newest_text():
    tail = _Tail(10)
    dropped = sum(tail.add(part) for part in ["abc", "defgh", "ijklmn", "op"])
    assert tail.text() == "gh" + "ijklmn" + "op"
    assert dropped == len("abcdefghijklmnop") - 10
    assert tail.add("x" * 25) == 10 + 15
    assert tail.text() == "x" * 10


def test_budget_counts_what_it_leaves_out():
    budget = OutputBudget(OutputLimits(cell=100, notebook=1000, log=100))
    outs: list = []
    for i in range(10):
        msg = {"msg_type": "stream", "content": {"name": "stdout", "text": f"{i}" * 30}}
        if budget.admit(0, msg, outs):
            outs.append(nbformat.v4.new_output("stream", name="stdout", text=f"{i}" * 30))
    budget.finish_cell(0, outs)
    kept = "".join(o["text"] for o in outs if o["name"] == "stdout")
    # half the cell's room for the start, half for the end
    assert kept == "0" * 30 + "1" * 20 + "8" * 20 + "9" * 30
    assert budget.dropped == {0: 300 - 100}
    assert "200 characters of output were left out" in outs[-2]["text"]


def test_text_the_kernel_kept_back_becomes_the_tail_not_part_of_the_start():
    """A stream message that says the kernel left text out before it is the stream's
    newest text: it replaces the tail (whose text lies before the gap), never the head."""
    budget = OutputBudget(OutputLimits(cell=100, notebook=1000, log=100))
    outs: list = []
    passed = {"msg_type": "stream", "content": {"name": "stdout", "text": "a" * 80}}
    kept_back = {
        "msg_type": "stream",
        "content": {"name": "stdout", "text": "z" * 30},
        "metadata": {LEFT_OUT_KEY: 500},
    }
    assert not budget.admit(0, passed, outs)
    assert not budget.admit(0, kept_back, outs)
    budget.finish_cell(0, outs)
    texts = [o["text"] for o in outs]
    # the head, the note (30 of the passed text and the kernel's 500), the kept-back end
    assert texts[0] == "a" * 50
    assert "530 characters of output were left out here" in texts[1]
    assert texts[2] == "z" * 30
    assert budget.dropped == {0: 530}


def test_a_loud_cell_keeps_its_start_an_exact_note_and_its_whole_last_line(make_notebook, tmp_path):
    """200 lines of 101 characters under a 4 KiB cell: the kernel's kept-back end was
    once joined to what it had passed on, then cut again by the runner, so the start
    ended in the middle of the last lines and the end kept only their last 58 x's."""
    source = make_notebook(
        "for i in range(200):\n    print(f'line {i:03d} ' + 'x' * 92)", "print('the end')"
    )
    output = tmp_path / "out.ipynb"

    proc = run_cli(
        source, output, "--max-cell-output", "4K", "--max-output", "64K", "--max-log-output", "1K"
    )

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr[-2000:]
    nb = nbformat.read(output, as_version=4)
    printed = "".join(f"line {i:03d} " + "x" * 92 + "\n" for i in range(200))
    kinds = [(o["output_type"], o.get("name")) for o in nb.cells[0].outputs]
    assert kinds == [("stream", "stdout"), ("stream", "stderr"), ("stream", "stdout")]
    head, note, end = (o["text"] for o in nb.cells[0].outputs)
    assert head == printed[: 2 * KiB]  # the start, to half the cell's room
    assert end == printed[-2 * KiB :]  # the end, to the whole last line
    assert end.endswith("\nline 199 " + "x" * 92 + "\n")
    left_out = len(printed) - 4 * KiB
    assert note.startswith(f"[nbjobs] {left_out:,} characters of output were left out here")
    summary = nb.metadata["nbjobs"]["output"]
    assert summary["cells_with_dropped_output"] == [0]
    assert summary["dropped_characters"] == left_out
    assert _stream_text(nb.cells[1]) == "the end\n"


def test_one_huge_write_is_cut_in_the_kernel_before_it_is_sent(make_notebook, tmp_path):
    """`print('x' * 200_000_000)` went out as one 200 MB message: the kernel and the
    runner each held several copies (0.9 GiB). Now the kernel sends its start and end."""
    source = make_notebook("print('x' * 200_000_000)", "print('after')")
    output = tmp_path / "out.ipynb"
    peaks: dict[int, int] = {}
    with subprocess.Popen(
        runner_command(source, output),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        runner = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                for p in [runner, *runner.children(recursive=True)]:
                    peaks[p.pid] = max(peaks.get(p.pid, 0), p.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.02)
    assert proc.returncode == ExitCode.SUCCEEDED
    assert output.stat().st_size < 5 * 1024 * KiB
    nb = nbformat.read(output, as_version=4)
    assert "characters of one write left out" in _stream_text(nb.cells[0])
    assert _stream_text(nb.cells[1]) == "after\n"
    # the kernel holds the 200 MB string itself (the notebook made it), and no copies
    assert max(peaks.values()) < 400 * 1024 * KiB, {k: v >> 20 for k, v in peaks.items()}


def test_a_huge_display_or_result_is_dropped_in_the_kernel_before_it_is_sent(
    make_notebook, tmp_path
):
    """One display of 60 MB, or a cell's result of 60 MB, went out whole: the runner held
    it several times over (JSON, the decoded message, the notebook) before its budget
    dropped it. Now the kernel sends a line that says what was left out."""
    source = make_notebook(
        "from IPython.display import HTML, display\n"
        "display(HTML('<p>' + 'x' * 60_000_000 + '</p>'))",
        "'y' * 60_000_000",
        "print('after')",
    )
    output = tmp_path / "out.ipynb"
    runner_peak = 0
    with subprocess.Popen(
        runner_command(source, output), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as proc:
        runner = psutil.Process(proc.pid)
        while proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                runner_peak = max(runner_peak, runner.memory_info().rss)
            time.sleep(0.01)
    assert proc.returncode == ExitCode.SUCCEEDED
    nb = nbformat.read(output, as_version=4)
    shown, result = nb.cells[0].outputs[0], nb.cells[1].outputs[0]
    assert shown["output_type"] == "display_data"
    assert set(shown["data"]) == {"text/plain"}
    assert "60,000,007 characters (text/html) left out" in shown["data"]["text/plain"]
    assert result["output_type"] == "execute_result"
    assert "left out: more than a cell keeps" in result["data"]["text/plain"]
    assert _stream_text(nb.cells[2]) == "after\n"
    assert output.stat().st_size < 1024 * KiB
    # the runner never held one of them (60 MB each, several copies when received)
    assert runner_peak < 120 * 1024 * KiB, runner_peak >> 20


def test_writes_the_kernel_joins_into_one_message_are_cut_before_they_are_sent(
    make_notebook, tmp_path
):
    """200 writes of 1 MB: ipykernel joined them into one message of 200 MB, and the
    runner held it several times over (its peak was 480-640 MiB). Now no message the
    kernel sends is bigger than a cell keeps, and the kernel keeps back what the runner
    would drop, saying how much."""
    source = make_notebook(
        "import sys\n"
        "for _ in range(200):\n"
        "    sys.stdout.write('x' * (1 << 20) + '\\n')\n"
        "print('the last line')",
        "print('after')",
    )
    output = tmp_path / "out.ipynb"

    code, peak, log = _run_measuring_the_runner(source, output)

    assert code == ExitCode.SUCCEEDED, log[-2000:]
    assert output.stat().st_size < 20 * MiB
    nb = nbformat.read(output, as_version=4)
    nbformat.validate(nb)
    flood = nb.cells[0]
    text = _stream_text(flood)
    assert text.startswith("x" * 1000)
    assert text.endswith("x\nthe last line\n")  # the end is kept, to its last line
    printed = 200 * ((1 << 20) + 1) + len("the last line\n")
    left_out = printed - len(text)
    assert f"{left_out:,} characters of output were left out here" in _stream_text(flood, "stderr")
    summary = nb.metadata["nbjobs"]["output"]
    assert summary["dropped_characters"] == left_out
    assert summary["cells_with_dropped_output"] == [0]
    assert _stream_text(nb.cells[1]) == "after\n"
    assert peak < 150 * MiB, f"the runner peaked at {peak / MiB:.0f} MiB"


def test_a_huge_error_is_cut_in_the_kernel_before_it_is_sent(make_notebook, tmp_path):
    """An exception whose message is 50 MB went out whole, twice (the error and the
    reply): the runner held it several times over and kept it in the notebook."""
    source = make_notebook("raise ValueError('the problem: ' + 'x' * 50_000_000)")
    output, status = tmp_path / "out.ipynb", tmp_path / "s.json"

    code, peak, log = _run_measuring_the_runner(source, output, "--status-file", status)

    assert code == ExitCode.FAILED, log[-2000:]
    assert output.stat().st_size < 5 * MiB
    nb = nbformat.read(output, as_version=4)
    nbformat.validate(nb)
    error = nb.cells[-1].outputs[-1]
    assert error["output_type"] == "error"
    assert error["ename"] == "ValueError"
    assert error["evalue"].startswith("the problem: xxx")
    assert "characters left out]" in error["evalue"]
    final = read_status(status)
    assert final is not None
    assert final.error is not None
    assert final.error.evalue.startswith("the problem: xxx")
    assert peak < 150 * MiB, f"the runner peaked at {peak / MiB:.0f} MiB"
