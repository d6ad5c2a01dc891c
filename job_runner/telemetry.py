"""Telemetry: what a job's GPUs, CPU and memory do while its notebook runs.

The runner starts a :class:`Sampler` with the run (``--telemetry-interval``, default
10 s; 0 turns it off). A daemon thread wakes once an interval, reads every GPU the job
was given and the job's process tree (the runner, its kernel and whatever the kernel
started), and hands the sample to the runner's event loop, which rewrites the status
file with it. It never stands in the kernel's way and never fails a job: a GPU that
stops answering gets an ``error`` in its entry while the others go on; a GPU call that
hangs holds up only this thread (the end of the run waits :data:`STOP_WAIT` for it at
most); NVML that will not start means ``nvidia-smi``, and no GPU tool at all means CPU
and memory only.

GPUs are read as :mod:`.gpus` lists them: NVML (``pynvml``) when it starts, else
``nvidia-smi``; restricted by ``CUDA_VISIBLE_DEVICES`` (indexes or UUIDs) as CUDA reads
it, MIG slices included (NVML only: ``nvidia-smi --query-gpu`` lists whole GPUs). NVML
utilisation is the mean of the driver's own samples since the previous reading (it
samples several times a second), so a busy second between two readings is not missed;
where the driver keeps none, the instantaneous reading. NVML gives no utilisation for
a MIG slice: its ``utilization_percent`` stays null (memory is the slice's own;
temperature is its GPU's; power, shared by the slices, is null). CPU and memory come
from ``/proc`` on Linux (as cheap a read as psutil's, without its 20 ms import in every
job), else from psutil.

The status file's ``telemetry`` (the latest sample) and ``telemetry_summary`` (the run
so far), the contract with the job service (issue 17)::

    telemetry = {"at": ISO, "gpus": [{"index": "0",   # the job's CUDA device number
                 "uuid", "name", "utilization_percent", "memory_used_bytes",
                 "memory_total_bytes", "temperature_celsius", "power_watts",
                 "error": null | "why it gave no reading"}],
                 "cpu_percent": 100 = one core, "memory_bytes": RSS of the tree}
    telemetry_summary = {"samples", "interval_seconds", "since", "until",
                 "gpus": [{"index", "uuid", "name", "utilization_mean_percent",
                           "utilization_peak_percent", "memory_peak_bytes",
                           "memory_total_bytes", "busy_seconds", "allocated_seconds"}],
                 "cpu_mean_percent", "cpu_peak_percent", "memory_peak_bytes"}

Each sample covers the seconds since the one before (the first, since the sampler
started; the last is taken when the cells end, so a job shorter than the interval has
one): ``allocated_seconds`` adds them up, ``busy_seconds`` adds each one times its
utilisation. Means are weighted by those seconds. A sample without a utilisation
reading (an error, a MIG slice) adds allocated seconds and no busy ones: busy seconds
are what was measured busy.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .gpus import computing_devices, none_given, nvml_listing
from .status import utc_now

#: the runner's default seconds between samples (nbjobs.yaml ``telemetry.interval``)
DEFAULT_INTERVAL = 10.0
#: the shortest interval, 0 (off) aside: sampling more often costs the job time and
#: says little more (NVML's own utilisation samples are a sixth of a second to 1 s)
MIN_INTERVAL = 1.0
#: how long the end of a run waits for the last sample (a hung GPU must not hold it up)
STOP_WAIT = 2.0
#: how long one ``nvidia-smi`` query may take
SMI_TIMEOUT = 10.0
SMI_FIELDS = "index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"
MiB = 1024 * 1024

Sample = dict[str, Any]


def interval_problem(seconds: float) -> str | None:
    """Why ``seconds`` is no telemetry interval (a sentence), or None when it is one."""
    if not math.isfinite(seconds) or seconds < 0:
        return f"{seconds:g} is not an interval; give seconds (10), or 0 to turn telemetry off"
    if 0 < seconds < MIN_INTERVAL:
        return (
            f"{seconds:g} s is too short an interval: sampling more than once a second "
            "costs the job time and says little more; give at least 1, or 0 to turn "
            "telemetry off"
        )
    return None


class Sampler:
    """Samples a job's GPUs and processes in a daemon thread, every ``interval`` seconds.

    ``on_sample(sample, summary)`` and ``on_note(line)`` are called from the sampling
    thread (the runner passes them on to its event loop); an exception they raise is
    ignored. :meth:`stop` takes a last sample and returns the latest sample and the
    summary; :attr:`latest` and :attr:`summary` may be read at any time.
    """

    def __init__(
        self,
        interval: float,
        *,
        on_sample: Callable[[Sample, Sample], object] | None = None,
        on_note: Callable[[str], object] | None = None,
        environ: Mapping[str, str] | None = None,
        pid: int | None = None,
    ) -> None:
        problem = interval_problem(interval)
        if problem is not None or interval == 0:
            raise ValueError(problem or "a sampler needs an interval of at least 1 s")
        self.interval = float(interval)
        self._on_sample = on_sample
        self._on_note = on_note
        self._environ = dict(os.environ if environ is None else environ)
        self._pid = os.getpid() if pid is None else pid
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._latest: Sample | None = None
        self._summary: Sample | None = None
        self._thread: threading.Thread | None = None
        self._stop_by: float | None = None

    @property
    def latest(self) -> Sample | None:
        """The latest sample, or None before the first."""
        with self._lock:
            return self._latest

    @property
    def summary(self) -> Sample | None:
        """The summary of every sample so far, or None before the first."""
        with self._lock:
            return self._summary

    def start(self) -> None:
        """Start sampling (the first sample comes one interval from now)."""
        self._thread = threading.Thread(target=self._run, name="nbjobs-telemetry", daemon=True)
        self._thread.start()

    def stop(self, wait: float = STOP_WAIT) -> tuple[Sample | None, Sample | None]:
        """Take a last sample, waiting up to ``wait`` seconds for it, and stop; returns
        ``(latest, summary)`` (what there is when a GPU call hangs). Safe to call again:
        a later call waits only for what is left of the first one's ``wait``."""
        if self._stop_by is None:
            self._stop_by = time.monotonic() + wait
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(max(0.0, self._stop_by - time.monotonic()))
        return self.latest, self.summary

    # -- the sampling thread --------------------------------------------------

    def _run(self) -> None:
        try:
            self._sample_until_stopped()
        except Exception as exc:  # a bug here costs the telemetry, never the job
            self._note(f"warning: telemetry stopped: {type(exc).__name__}: {exc}; the job goes on")

    def _sample_until_stopped(self) -> None:
        started = time.monotonic()
        since = utc_now()
        processes = ProcessTree(self._pid)
        gpus = open_gpu_reader(self._environ)
        try:
            self._note(f"telemetry: every {self.interval:g} s, {gpus.describe()}")
            summary = Summary(self.interval, since)
            errors: dict[str, str | None] = {}
            last = started
            next_at = started + self.interval
            while True:
                stopping = self._stopping.wait(max(0.0, next_at - time.monotonic()))
                sample: Sample = {"at": utc_now(), "gpus": gpus.read()}
                sample.update(processes.read())
                now = time.monotonic()
                summary.add(sample, now - last)
                last = now
                totals = summary.as_dict()
                with self._lock:
                    self._latest, self._summary = sample, totals
                self._say_what_changed(sample["gpus"], errors)
                with contextlib.suppress(Exception):  # the loop may be gone already
                    if self._on_sample is not None:
                        self._on_sample(sample, totals)
                if stopping:
                    return
                # behind (a slow nvidia-smi): skip what was missed rather than burst
                next_at = max(next_at + self.interval, time.monotonic())
        finally:
            gpus.close()

    def _say_what_changed(
        self, entries: list[dict[str, Any]], errors: dict[str, str | None]
    ) -> None:
        """One log line when a GPU stops answering, and one when it answers again."""
        for entry in entries:
            before, now = errors.get(entry["index"]), entry["error"]
            errors[entry["index"]] = now
            label = f"GPU {entry['index']} ({entry['uuid'] or entry['name'] or 'unknown'})"
            if now is not None and before is None:
                self._note(
                    f"warning: telemetry: {label} gave no reading ({now}); it is recorded "
                    "as an error, the job goes on"
                )
            elif now is None and before is not None:
                self._note(f"telemetry: {label} answers again")

    def _note(self, line: str) -> None:
        with contextlib.suppress(Exception):
            if self._on_note is not None:
                self._on_note(line)


class Summary:
    """The running aggregate of a run's samples (``telemetry_summary``)."""

    def __init__(self, interval: float, since: str) -> None:
        self.interval = interval
        self.since = since
        self.until = since
        self.samples = 0
        self.gpus: dict[str, _GpuTotals] = {}
        self.cpu = _Series()
        self.memory_peak: int | None = None

    def add(self, sample: Sample, covered: float) -> None:
        """Count one sample, standing for the ``covered`` seconds before it."""
        covered = max(0.0, covered)
        self.samples += 1
        self.until = sample["at"]
        for entry in sample["gpus"]:
            self.gpus.setdefault(entry["index"], _GpuTotals()).add(entry, covered)
        self.cpu.add(sample.get("cpu_percent"), covered)
        memory = sample.get("memory_bytes")
        if memory is not None:
            self.memory_peak = max(memory, self.memory_peak or 0)

    def as_dict(self) -> Sample:
        """The JSON-ready summary."""
        return {
            "samples": self.samples,
            "interval_seconds": self.interval,
            "since": self.since,
            "until": self.until,
            "gpus": [totals.as_dict(index) for index, totals in self.gpus.items()],
            "cpu_mean_percent": self.cpu.mean(),
            "cpu_peak_percent": self.cpu.peak,
            "memory_peak_bytes": self.memory_peak,
        }


class _Series:
    """A time-weighted mean and a peak of readings that may be missing."""

    def __init__(self) -> None:
        self.weighted = 0.0  # sum of covered seconds * value
        self.seconds = 0.0  # Σ covered, over readings present
        self.values = 0.0  # Σ value: the mean when no reading covers any time
        self.count = 0
        self.peak: float | None = None

    def add(self, value: float | None, covered: float) -> None:
        if value is None:
            return
        self.weighted += covered * value
        self.seconds += covered
        self.values += value
        self.count += 1
        self.peak = value if self.peak is None else max(self.peak, value)

    def mean(self) -> float | None:
        if self.count == 0:
            return None
        return round(
            self.weighted / self.seconds if self.seconds > 0 else self.values / self.count, 1
        )


class _GpuTotals:
    def __init__(self) -> None:
        self.uuid: str | None = None
        self.name: str | None = None
        self.utilization = _Series()
        self.memory_peak: int | None = None
        self.memory_total: int | None = None
        self.allocated = 0.0

    def add(self, entry: dict[str, Any], covered: float) -> None:
        self.uuid = entry["uuid"] or self.uuid
        self.name = entry["name"] or self.name
        self.allocated += covered
        self.utilization.add(entry["utilization_percent"], covered)
        if entry["memory_used_bytes"] is not None:
            self.memory_peak = max(entry["memory_used_bytes"], self.memory_peak or 0)
        self.memory_total = entry["memory_total_bytes"] or self.memory_total

    def as_dict(self, index: str) -> dict[str, Any]:
        return {
            "index": index,
            "uuid": self.uuid,
            "name": self.name,
            "utilization_mean_percent": self.utilization.mean(),
            "utilization_peak_percent": self.utilization.peak,
            "memory_peak_bytes": self.memory_peak,
            "memory_total_bytes": self.memory_total,
            "busy_seconds": round(self.utilization.weighted / 100, 3),
            "allocated_seconds": round(self.allocated, 3),
        }


# -- GPUs ------------------------------------------------------------------------


class GpuReader:
    """Reads the GPUs the job was given; this base class stands for none at all."""

    source = "none"

    def __init__(self, devices: list[dict[str, Any]] | None = None) -> None:
        #: per GPU, in the job's CUDA order: {"index": "0", "uuid", "name", ...}
        self.devices = devices or []

    def describe(self) -> str:
        """The log's words for what is sampled."""
        what = "no GPU readings (NVML did not start, no nvidia-smi answered)"
        if self.source != "none":
            count = len(self.devices)
            what = f"{count} GPU{'' if count == 1 else 's'} from {self.source}"
            if count:
                names = [str(d["uuid"] or d["index"]) for d in self.devices]
                what += f" ({', '.join(names[:4])}{', …' if count > 4 else ''})"
        return f"{what}; CPU and memory of the job's processes"

    def read(self) -> list[dict[str, Any]]:
        """One entry per GPU (``error`` set, numbers null, for one that did not answer);
        never raises."""
        return []

    def close(self) -> None:
        """Release what reading needed."""


class NoGpuGiven(GpuReader):
    """A job given no GPU (``CUDA_VISIBLE_DEVICES`` empty): nothing asked of the driver."""

    def describe(self) -> str:
        return "no GPU given to this job; CPU and memory of the job's processes"


def open_gpu_reader(environ: Mapping[str, str]) -> GpuReader:
    """NVML's reader when NVML starts, else nvidia-smi's when it answers, else none."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if none_given(visible):
        return NoGpuGiven()
    reader: GpuReader | None = NvmlReader.open(visible)
    if reader is None:
        reader = SmiReader.open(visible, environ.get("PATH"))
    return reader or GpuReader()


def _entry(device: dict[str, Any], **readings: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": device["index"],
        "uuid": device["uuid"],
        "name": device["name"],
        "utilization_percent": None,
        "memory_used_bytes": None,
        "memory_total_bytes": None,
        "temperature_celsius": None,
        "power_watts": None,
        "error": None,
    }
    entry.update(readings)
    return entry


class NvmlReader(GpuReader):
    """The job's GPUs through NVML, initialised once for the run."""

    source = "NVML"

    def __init__(self, pynvml: Any, chosen: list[tuple[dict[str, Any], Any, Any]]) -> None:
        super().__init__(
            [
                {"index": str(i), "uuid": d["uuid"], "name": d["name"]}
                for i, (d, _h, _p) in enumerate(chosen)
            ]
        )
        self._nvml = pynvml
        self._handles = [(handle, parent) for _d, handle, parent in chosen]
        # the newest driver sample seen, per GPU: the next reading averages what is newer
        self._seen = [self._newest_sample(handle) for handle, _parent in self._handles]

    @classmethod
    def open(cls, visible: str | None) -> NvmlReader | None:
        """The reader, or None when NVML is missing or will not start."""
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except Exception:  # no driver, no device: NVML raises its own error types
            return None
        try:
            listing = nvml_listing(pynvml)
            chosen_devices = computing_devices([d for d, _h, _p in listing], visible)
            chosen = [next(item for item in listing if item[0] is d) for d in chosen_devices]
            return cls(pynvml, chosen)
        except Exception:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
            return None

    def read(self) -> list[dict[str, Any]]:
        entries = []
        for position, device in enumerate(self.devices):
            handle, parent = self._handles[position]
            try:
                entries.append(_entry(device, **self._readings(position, handle, parent)))
            except Exception as exc:  # lost, fallen off the bus, reset: recorded, not fatal
                entries.append(_entry(device, error=f"NVML: {_nvml_error(exc)}"))
        return entries

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()

    def _readings(self, position: int, handle: Any, parent: Any) -> dict[str, Any]:
        nvml = self._nvml
        readings: dict[str, Any] = {"utilization_percent": self._utilization(position, handle)}
        memory = self._optional(nvml.nvmlDeviceGetMemoryInfo, handle)
        if memory is not None:
            readings["memory_used_bytes"] = int(memory.used)
            readings["memory_total_bytes"] = int(memory.total)
        sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        temperature = self._optional(nvml.nvmlDeviceGetTemperature, handle, sensor)
        if temperature is None and parent is not None:  # a MIG slice: its GPU's
            temperature = self._optional(nvml.nvmlDeviceGetTemperature, parent, sensor)
        if temperature is not None:
            readings["temperature_celsius"] = float(temperature)
        milliwatts = self._optional(nvml.nvmlDeviceGetPowerUsage, handle)
        if milliwatts is not None:
            readings["power_watts"] = round(milliwatts / 1000, 1)
        return readings

    def _utilization(self, position: int, handle: Any) -> float | None:
        """The mean of the driver's samples since the last reading, else the current one."""
        nvml = self._nvml
        try:
            kind, samples = nvml.nvmlDeviceGetSamples(
                handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, self._seen[position]
            )
            fresh = [s for s in samples if s.timeStamp > self._seen[position]]
            if fresh:
                self._seen[position] = max(s.timeStamp for s in fresh)
                return round(sum(_sample_value(s, kind) for s in fresh) / len(fresh), 1)
        except Exception:  # none newer (NOT_FOUND), not supported: the plain reading
            pass
        rates = self._optional(nvml.nvmlDeviceGetUtilizationRates, handle)
        return None if rates is None else float(rates.gpu)

    def _newest_sample(self, handle: Any) -> int:
        try:
            _kind, samples = self._nvml.nvmlDeviceGetSamples(
                handle, self._nvml.NVML_GPU_UTILIZATION_SAMPLES, 0
            )
            return max((int(s.timeStamp) for s in samples), default=0)
        except Exception:
            return 0

    def _optional(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)``, or None where NVML says the device does not support it."""
        try:
            return call(*args)
        except Exception as exc:
            if _not_supported(self._nvml, exc):
                return None
            raise


def _not_supported(pynvml: Any, exc: Exception) -> bool:
    names = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")
    classes = tuple(c for c in (getattr(pynvml, n, None) for n in names) if isinstance(c, type))
    return bool(classes) and isinstance(exc, classes)


def _nvml_error(exc: Exception) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


def _sample_value(sample: Any, kind: int) -> float:
    """A driver sample's value by its NVML value type (utilisation is an unsigned int)."""
    field = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal"}.get(kind, "uiVal")
    return float(getattr(sample.sampleValue, field))


class SmiReader(GpuReader):
    """The job's GPUs through ``nvidia-smi --query-gpu``, one query a sample."""

    source = "nvidia-smi"

    def __init__(self, exe: str, chosen: list[dict[str, Any]]) -> None:
        super().__init__(
            [{"index": str(i), "uuid": d["uuid"], "name": d["name"]} for i, d in enumerate(chosen)]
        )
        self._exe = exe

    @classmethod
    def open(cls, visible: str | None, path: str | None) -> SmiReader | None:
        """The reader, or None when nvidia-smi is not on PATH or does not answer."""
        exe = shutil.which("nvidia-smi", path=path)
        if exe is None:
            return None
        rows, _problem = _smi_query(exe)
        if not rows:
            return None
        listing = [
            {"index": int(r[0]) if r[0].isdigit() else r[0], "uuid": r[1], "name": r[2]}
            for r in rows
        ]
        return cls(exe, computing_devices(listing, visible))

    def read(self) -> list[dict[str, Any]]:
        if not self.devices:
            return []
        rows, problem = _smi_query(self._exe)
        by_uuid = {r[1]: r for r in rows}
        entries = []
        for device in self.devices:
            row = by_uuid.get(device["uuid"])
            if row is None:
                why = problem or "nvidia-smi no longer lists it"
                entries.append(_entry(device, error=f"nvidia-smi: {why}"))
                continue
            try:
                entries.append(_entry(device, **_smi_readings(row)))
            except ValueError as exc:  # "[GPU requires reset]", "[Unknown Error]"
                entries.append(_entry(device, error=f"nvidia-smi: {exc}"))
        return entries


def _smi_query(exe: str) -> tuple[list[list[str]], str | None]:
    """The rows ``nvidia-smi`` gives for :data:`SMI_FIELDS` and, when it said something
    else too (a GPU it cannot reach) or failed, its first such line."""
    try:
        done = subprocess.run(
            [exe, f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return [], f"no answer within {SMI_TIMEOUT:g} s"
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"could not run: {exc}"
    rows, other = [], []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == len(SMI_FIELDS.split(",")):
            rows.append(parts)
        elif line.strip():
            other.append(line.strip())
    other += [line.strip() for line in done.stderr.splitlines() if line.strip()]
    if not other and done.returncode != 0:
        other.append(f"exited with status {done.returncode}")
    return rows, other[0] if other else None


def _smi_readings(row: list[str]) -> dict[str, Any]:
    utilization, used, total, temperature, power = (_smi_number(v) for v in row[3:8])
    return {
        "utilization_percent": utilization,
        "memory_used_bytes": None if used is None else int(used * MiB),
        "memory_total_bytes": None if total is None else int(total * MiB),
        "temperature_celsius": temperature,
        "power_watts": power,
    }


def _smi_number(text: str) -> float | None:
    """A number of nvidia-smi's csv; None for ``[N/A]``, ``[Not Supported]``; ValueError
    with nvidia-smi's words for any other bracketed answer (the GPU has a problem)."""
    value = text.strip()
    if value.strip("[]").lower() in ("n/a", "not supported", "not available", ""):
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(value.strip("[]")) from None


# -- the job's processes ---------------------------------------------------------


class ProcessTree:
    """CPU and memory of a process and all its descendants (the runner and its kernel).

    CPU is what the processes alive at a sample used since the one before (a process
    that started and ended between two samples is not seen); memory is the sum of their
    resident sets. ``/proc`` where there is one, else psutil; neither: null readings.
    """

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._used: dict[tuple[int, float], float] = {}
        self._read_members: Callable[[], list[tuple[tuple[int, float], float, int]]] | None
        self._read_members = self._proc_reader() or self._psutil_reader()
        self._last = time.monotonic()
        self.read()  # the baseline: the first sample counts CPU used from here

    def read(self) -> dict[str, Any]:
        """``{"cpu_percent", "memory_bytes"}`` since the previous read; never raises."""
        now = time.monotonic()
        members = None
        if self._read_members is not None:
            with contextlib.suppress(Exception):
                members = self._read_members()
        if members is None:
            return {"cpu_percent": None, "memory_bytes": None}
        used_now = {key: used for key, used, _rss in members}
        spent = sum(max(0.0, used - self._used.get(key, 0.0)) for key, used in used_now.items())
        elapsed, self._last, self._used = now - self._last, now, used_now
        return {
            "cpu_percent": round(100 * spent / elapsed, 1) if elapsed > 0 else None,
            "memory_bytes": sum(rss for _key, _used, rss in members),
        }

    def _psutil_reader(self) -> Callable[[], list[tuple[tuple[int, float], float, int]]] | None:
        try:
            import psutil
        except ImportError:
            return None
        try:
            root = psutil.Process(self._pid)
        except Exception:
            return None

        def members() -> list[tuple[tuple[int, float], float, int]]:
            found = []
            for process in [root, *root.children(recursive=True)]:
                try:
                    with process.oneshot():
                        times = process.cpu_times()
                        key = (process.pid, process.create_time())
                        found.append((key, times.user + times.system, process.memory_info().rss))
                except psutil.Error:  # ended since it was listed
                    continue
            return found

        return members

    def _proc_reader(self) -> Callable[[], list[tuple[tuple[int, float], float, int]]] | None:
        if not os.path.exists(f"/proc/{self._pid}/stat"):
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        page = os.sysconf("SC_PAGE_SIZE")

        def members() -> list[tuple[tuple[int, float], float, int]]:
            stats: dict[int, tuple[int, tuple[int, float], float, int]] = {}
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/stat", "rb") as f:
                        data = f.read()
                except OSError:  # ended, or not ours to read
                    continue
                # after the command's closing parenthesis: state ppid ... (proc(5))
                fields = data[data.rindex(b")") + 2 :].split()
                pid, ppid = int(name), int(fields[1])
                used = (int(fields[11]) + int(fields[12])) / ticks
                stats[pid] = (ppid, (pid, float(fields[19])), used, int(fields[21]) * page)
            children: dict[int, list[int]] = {}
            for pid, (ppid, *_rest) in stats.items():
                children.setdefault(ppid, []).append(pid)
            found, todo = [], [self._pid]
            while todo:
                pid = todo.pop()
                if pid in stats:
                    _ppid, key, used, rss = stats[pid]
                    found.append((key, used, rss))
                    todo.extend(children.get(pid, []))
            return found

        return members
