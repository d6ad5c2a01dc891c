"""A job's telemetry in the Jobs panel, in a real browser: live sparklines while it
runs, its summary and the service's hint once it ended.

Everything is real (hub, job service, runner, kernel, the runner's sampling every
second: nbjobs.yaml `telemetry: {interval: 1s}`) but the GPU: a job on the `t4`
flavor finds the stand-in NVML module of the runner's own tests
(tests/job_runner/stand_ins/fake_pynvml.py) first on its PYTHONPATH (the flavor's
`env`), which reports 15 GiB T4s busy a few percent, as the script below says. The
service speaks its hint only for a job whose samples cover `telemetry.hint_after`
(five minutes by default; 15 s here), so the GPU job runs a little longer than that.
"""

from __future__ import annotations

import re
import sqlite3

import nbformat
import pytest
from playwright.sync_api import Locator, Page, Request, expect

from ..conftest import Hub, api_json, notebook, shot
from ..steps import API, job_row, jobs_panel, submit_by_api
from .conftest import GPU_JOB_SECONDS

#: kernel start, cells, output, on two busy cores
JOB_TIMEOUT = (GPU_JOB_SECONDS + 150) * 1000


@pytest.fixture
def train(hub: Hub) -> None:
    """Ada's train.ipynb: a stand-in GPU job of GPU_JOB_SECONDS whose memory grows
    (written for this test: the schedules' pictures show her files without it)."""
    step = "ballast.append(bytes([1]) * 40_000_000)  # memory that grows\n"
    # CPU busy a tenth of it: readings that are not zero, without taking a core from
    # the tests beside it for ten seconds
    step += "t = time.time()\nwhile time.time() - t < pause / 10:\n"
    step += "    pass\ntime.sleep(pause * 9 / 10)"
    nbformat.write(
        notebook(
            "import time\nballast = []\npause = seconds / 10",
            *[step] * 10,
            parameters=f"seconds = {GPU_JOB_SECONDS}",
        ),
        hub.home("ada") / "train.ipynb",
    )


def warn(hub: Hub, job_id: str, text: str) -> None:
    """Give a job the warning the idle-GPU reclaimer gives, in the service's database."""
    with sqlite3.connect(hub.workdir / "jobs.sqlite") as db:
        db.execute("UPDATE nbjobs_jobs SET warning = ? WHERE id = ?", (text, job_id))


def words(pattern: str) -> re.Pattern[str]:
    """A pattern for the view's text, whose numbers and units are held together by
    no-break spaces: a space in the pattern matches either."""
    return re.compile(pattern.replace(" ", r"\s"))


def usage(row: Locator) -> Locator:
    return row.locator(".nbjobs-Telemetry")


def spark(row: Locator, series: str) -> Locator:
    return usage(row).locator(f".nbjobs-Spark[data-series='{series}']")


def fact(row: Locator, key: str) -> Locator:
    return usage(row).locator(f".nbjobs-Telemetry-facts dd[data-fact='{key}']")


@pytest.mark.timeout(600)  # a GPU job of 40 s, on two busy cores
@pytest.mark.usefixtures("train")
def test_a_running_job_shows_live_readings_and_an_ended_one_its_summary_and_hint(
    lab: Page, hub: Hub
):
    gpu_job = submit_by_api(lab, "train.ipynb", "t4", "train on t4")
    submit_by_api(lab, "slow.ipynb", "cpu", "cpu only", seconds=10)
    panel = jobs_panel(lab)
    gpu_row, cpu_row = job_row(lab, "train on t4"), job_row(lab, "cpu only")
    expect(gpu_row.locator(".nbjobs-Job-state")).to_have_text("Running", timeout=JOB_TIMEOUT)

    # A running job's readings open on their own: four sparklines with numbers.
    expect(usage(gpu_row)).to_be_visible()
    expect(usage(gpu_row).locator(".nbjobs-Spark")).to_have_count(4)
    gpu = spark(gpu_row, "gpu")
    expect(gpu.locator(".nbjobs-Spark-label")).to_have_text("GPU")
    expect(gpu.locator(".nbjobs-Spark-value")).to_have_text(words(r"^(\d+|< 1) %$"))
    expect(spark(gpu_row, "gpuMemory").locator(".nbjobs-Spark-value")).to_have_text(
        words(r"^\d(\.\d)? / 15 GiB$")  # the stand-in T4's own figures
    )
    expect(spark(gpu_row, "cpu").locator(".nbjobs-Spark-value")).to_have_text(
        words(r"^(\d+|< 1) %$")
    )
    expect(spark(gpu_row, "memory").locator(".nbjobs-Spark-value")).to_have_text(
        words(r"^\d+(\.\d)? (MiB|GiB)$")
    )
    # The CPU-only job: CPU and memory, no GPU.
    expect(usage(cpu_row).locator(".nbjobs-Spark")).to_have_count(2)
    assert usage(cpu_row).locator(".nbjobs-Spark").evaluate_all(
        "items => items.map(i => i.dataset.series)"
    ) == ["cpu", "memory"]

    # The lines grow with the samples (one a second, asked for every 5 s).
    chart = gpu.locator("svg")
    expect(chart).to_have_attribute(
        "aria-label",
        words(r"^GPU utilisation: \d+ % now, peak \d+ % over the last (1[5-9]|[2-9]\d)s"),
        timeout=60_000,
    )
    assert chart.get_attribute("role") == "img"
    assert chart.locator("title").text_content() == chart.get_attribute("aria-label")
    line = chart.locator(".nbjobs-Spark-line").get_attribute("d") or ""
    assert line.startswith("M0,"), line
    assert line.count("L") >= 3, line
    # The stand-in's readings, not zeros: up to 12 % busy, about 3 of 15 GiB.
    label = chart.get_attribute("aria-label") or ""
    peak = int(words(r"peak (\d+) %").search(label).group(1))  # type: ignore[union-attr]
    assert 4 <= peak <= 12, label

    asked: list[str] = []

    def count(request: Request) -> None:
        if "/metrics" in request.url:
            asked.append(request.url)

    # The service warns about its idle GPUs (the reclaimer's words, written as it writes
    # them): the row says so while the job runs.
    idle = "its GPUs have been idle (below 5 %) for 30 min; if it does not need them, cancel it"
    warn(hub, gpu_job["id"], idle)
    warning = gpu_row.locator(".nbjobs-Job-warning")
    expect(warning).to_have_text(idle)
    assert warning.get_attribute("role") == "status"

    lab.on("request", count)
    lab.wait_for_timeout(2_000)
    shot(lab, "18-job-telemetry-running")
    lab.wait_for_timeout(10_000)
    lab.remove_listener("request", count)
    # Every 5 s at most per job (its samples come every second), newer samples only.
    gpu_asks = [u for u in asked if gpu_job["id"] in u]
    assert 1 <= len(gpu_asks) <= 3, gpu_asks
    assert all("since=" in u for u in gpu_asks), gpu_asks

    # The CPU job ends first: its summary has CPU and memory only.
    expect(cpu_row.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    expect(usage(cpu_row)).to_have_attribute("data-kind", "summary")
    facts = usage(cpu_row).locator("dd").evaluate_all("items => items.map(i => i.dataset.fact)")
    assert facts == ["cpu", "memory"]
    expect(fact(cpu_row, "cpu")).to_have_text(words(r"^(\d+|< 1) % on average, peak \d+ %$"))
    expect(usage(cpu_row).locator(".nbjobs-Telemetry-hint")).to_have_count(0)
    # Its readings can be closed and opened again.
    toggle = cpu_row.locator("button[aria-label='GPU and CPU use']")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    toggle.click()
    expect(usage(cpu_row)).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(usage(cpu_row)).to_be_visible()

    # The GPU job ends: the summary of its whole run, and the service's hint.
    state = gpu_row.locator(".nbjobs-Job-state")
    expect(state).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    expect(gpu_row.locator(".nbjobs-Job-warning")).to_be_hidden()  # an ended job has none
    expect(usage(gpu_row)).to_have_attribute("data-kind", "summary")
    expect(usage(gpu_row).locator(".nbjobs-Spark")).to_have_count(0)
    metrics = api_json(lab, API + f"jobs/{gpu_job['id']}/metrics")
    assert isinstance(metrics, dict)
    summary = metrics["summary"]
    mean, top = summary["gpu_utilization_mean_percent"], summary["gpu_utilization_peak_percent"]
    assert 3 <= mean <= 9, summary
    expect(fact(gpu_row, "gpu")).to_have_text(
        words(f"^{round(mean)} % on average, peak {round(top)} %$")
    )
    expect(fact(gpu_row, "gpuMemory")).to_have_text(words(r"^peak 3(\.\d)? GiB of 15 GiB$"))
    # about 40 s held (0.011 GPU-hours), a few percent of it busy
    expect(fact(gpu_row, "gpuHours")).to_have_text(
        words(r"^(< 0\.001|0\.00\d+) busy of 0\.01\d*$")  # held: what usage counts
    )
    expect(fact(gpu_row, "cpu")).to_have_text(words(r"% on average, peak \d+ %$"))
    expect(fact(gpu_row, "memory")).to_have_text(words(r"^peak \d+(\.\d)? (MiB|GiB)$"))
    hint = usage(gpu_row).locator(".nbjobs-Telemetry-hint")
    expect(hint).to_be_visible()
    expect(hint).to_have_text(metrics["hint"])
    assert metrics["hint"].startswith(
        f"GPU busy {round(mean)} % on average: a CPU or a smaller GPU flavor would do"
    ), metrics["hint"]
    assert (fact(gpu_row, "gpu").get_attribute("title") or "").startswith("GPU utilisation: ")
    lab.locator(".jp-Notification-Toast-Close").evaluate_all("bs => bs.forEach(b => b.click())")
    lab.mouse.move(900, 600)
    shot(lab, "19-job-telemetry-summary")

    # An ended job's readings are closed until asked for (a new page, the same jobs).
    lab.reload()
    lab.wait_for_selector(".jp-LabShell", timeout=60_000)
    gpu_row = job_row(lab, "train on t4")
    expect(gpu_row.locator(".nbjobs-Job-state")).to_have_text("Succeeded")
    expect(usage(gpu_row)).to_be_hidden()
    gpu_row.locator("button[aria-label='GPU and CPU use']").click()
    expect(usage(gpu_row).locator(".nbjobs-Telemetry-hint")).to_have_text(metrics["hint"])
    assert panel.locator(".nbjobs-JobsPanel-notice[data-kind='error']").count() == 0
