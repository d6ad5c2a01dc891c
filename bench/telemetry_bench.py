"""Telemetry benchmark: what sampling GPUs, CPU and memory costs a job.

    python bench/telemetry_bench.py [--repeat N] [--work SECONDS] [--gpus host|nvml|smi]

Two measures, both against the same thing without telemetry, in the same run:

1. End to end: the runner (``python -m nbjobs.job_runner``, as a job runs it) on the
   same notebooks with ``--telemetry-interval 0`` (off), ``10`` (the default) and ``1``
   (the shortest allowed: the worst case), in rounds that rotate the order so a noisy
   neighbour slows all alike. Printed: median wall seconds, CPU seconds of the job (the
   runner, its kernel and their children) and of the runner's own process (where the
   sampler runs), each ÷ off; and the runner's extra CPU as a share of the job's.
     start    3 tiny cells: what starting and stopping the sampler adds to every job
     compute  one cell of pure-Python work (``--work`` seconds on this machine): the
              sampler's thread competing with the kernel, a sample every interval
2. One sample, in this process: the CPU time a sample takes (the sampler's own and,
   for nvidia-smi, its child's), over a process tree like a job's (this process and
   a child), and that as a share of one core at 10 s and 1 s. Its precision does not
   depend on a quiet machine, unlike 1.

``--gpus``: ``host`` samples this machine's GPUs (NVML or nvidia-smi, or none);
``nvml`` and ``smi`` use the test stand-ins (``tests/job_runner/stand_ins``) with 8 GPUs,
so a machine without one still pays for reading eight. No absolute time is a result;
the ratios are. Goal: < 1 % at 10 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.job_runner.helpers import gpu_env  # noqa: E402

INTERVALS = {"off": "0", "every 10 s": "10", "every 1 s": "1"}
#: runs the runner as ``python -m nbjobs.job_runner`` does, then writes its own CPU
#: seconds (all its threads, the sampler's included) to the file named first
RUNNER_CPU = """
import atexit, resource, runpy, sys
out = sys.argv.pop(1)
def write_cpu():
    used = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as f:
        f.write(repr(used.ru_utime + used.ru_stime))
atexit.register(write_cpu)
sys.argv[0] = "nbjobs.job_runner"
runpy.run_module("nbjobs.job_runner", run_name="__main__", alter_sys=True)
"""


def notebook(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


WORK = "n = 0\nfor _ in range({iterations}):\n    n += 1"


def calibrate(seconds: float) -> int:
    """Iterations of :data:`WORK` that take about ``seconds`` of one core here (run at
    module level, as a cell's code runs)."""
    iterations = 1_000_000
    code = compile(WORK.format(iterations=iterations), "<calibration>", "exec")
    started = time.process_time()
    exec(code, {})
    return int(iterations * seconds / (time.process_time() - started))


def cases(work: float) -> dict[str, Callable[[], nbformat.NotebookNode]]:
    iterations = calibrate(work)
    return {
        "start": lambda: notebook(["x = 1", "y = x + 1", "print(y)"]),
        "compute": lambda: notebook([WORK.format(iterations=iterations)]),
    }


def stand_in_gpus(count: int = 8) -> list[dict[str, object]]:
    return [
        {
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": f"GPU-{i:08x}-1111-2222-3333-444444444444",
            "memory_mib": 81559,
            "readings": [{"utilization": 40 + i, "memory_used_mib": 1000 * i}],
        }
        for i in range(count)
    ]


def environment(kind: str, folder: Path) -> dict[str, str]:
    if kind == "nvml":
        return gpu_env(folder, nvml_devices=stand_in_gpus())
    if kind == "smi":
        return gpu_env(folder, smi_devices=stand_in_gpus())
    return dict(os.environ)


def run_once(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds of the whole job (the runner reaps its kernel) and of
    the runner's own process."""
    own = cwd / "runner-cpu.txt"
    command = [command[0], "-c", RUNNER_CPU, str(own), *command[3:]]  # for "-m nbjobs..."
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"benchmark run failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, float(own.read_text())


def end_to_end(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    print(f"calibrating {args.work:g} s of work ...", flush=True)
    results: dict[str, dict[str, tuple[float, float, float]]] = {}
    for case, make in cases(args.work).items():
        source = work / f"{case}.ipynb"
        nbformat.write(make(), source)
        modes = list(INTERVALS)
        samples: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
        print(f"{case}: {args.repeat} rounds of {', '.join(modes)}", flush=True)
        for round_ in range(args.repeat):
            for mode in modes[round_ % len(modes) :] + modes[: round_ % len(modes)]:
                command = [sys.executable, "-m", "nbjobs.job_runner", str(source)]
                command += [str(work / "out.ipynb"), "--status-file", str(work / "status.json")]
                command += ["--telemetry-interval", INTERVALS[mode]]
                samples[mode].append(run_once(command, work, env))
        results[case] = {
            m: (
                statistics.median(r[0] for r in s),
                statistics.median(r[1] for r in s),
                statistics.median(r[2] for r in s),
            )
            for m, s in samples.items()
        }

    print()
    for case, by_mode in results.items():
        print(f"== {case}")
        header = f"  {'telemetry':<14}{'wall s':>9}{'÷ off':>8}{'job CPU s':>11}{'÷ off':>8}"
        print(header + f"{'runner CPU s':>14}{'÷ off':>8}")
        off = by_mode["off"]
        for mode, (wall, cpu, own) in by_mode.items():
            print(
                f"  {mode:<14}{wall:>9.3f}{wall / off[0]:>8.3f}{cpu:>11.3f}{cpu / off[1]:>8.3f}"
                f"{own:>14.3f}{own / off[2]:>8.3f}"
            )
    for case, by_mode in results.items():
        for mode in ("every 10 s", "every 1 s"):
            wall = by_mode[mode][0] / by_mode["off"][0] - 1
            extra = (by_mode[mode][2] - by_mode["off"][2]) / by_mode["off"][1]
            print(
                f"{case}, {mode}: the runner's extra CPU is {extra:+.2%} of the job's; "
                f"wall {wall:+.2%}"
            )
    print("  (differences of medians; the job's CPU and wall time vary by a few % run to run")
    print("  on a shared machine: read them with the per-sample cost below)")


def per_sample(args: argparse.Namespace, env: dict[str, str], rounds: int = 200) -> None:
    from nbjobs.job_runner.telemetry import ProcessTree, open_gpu_reader

    saved = {k: os.environ.get(k) for k in ("PATH", "PYTHONPATH")}
    os.environ["PATH"] = env.get("PATH", "")
    sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        # once a job: opening (imports, NVML's start or nvidia-smi's listing), a sample
        cpu, children = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        tree, gpus = ProcessTree(os.getpid()), open_gpu_reader(env)
        tree.read()
        gpus.read()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        once = time.process_time() - cpu
        once += (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
        cpu = time.process_time()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        for _ in range(rounds):
            tree.read()
            gpus.read()
        wall = (time.perf_counter() - wall) / rounds
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = time.process_time() - cpu
        spent += (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
        spent /= rounds
        what = gpus.describe()
        gpus.close()
    finally:
        child.kill()
        child.wait()
        for key, value in saved.items():
            if value is not None:
                os.environ[key] = value
    print(f"\n== one sample ({rounds} in a row): {what}")
    print(f"  CPU {spent * 1000:.2f} ms a sample, wall {wall * 1000:.2f} ms")
    print(f"  once a job (open and a first sample): CPU {once * 1000:.1f} ms")
    for interval in (10.0, 1.0):
        print(f"  every {interval:g} s: {spent / interval:.3%} of one core (goal at 10 s: < 1 %)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds per case (default 5)")
    parser.add_argument(
        "--work", type=float, default=10.0, help="seconds of the compute case (default 10)"
    )
    parser.add_argument(
        "--gpus",
        choices=["host", "nvml", "smi"],
        default="host",
        help="this machine's GPUs, or 8 stand-in GPUs through NVML or nvidia-smi",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nbjobs-telemetry-bench-") as tmp:
        work = Path(tmp)
        env = environment(args.gpus, work / "gpus")
        end_to_end(args, work, env)
        per_sample(args, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
