"""What the job service counts as it goes (queue waits, dispatch latency, failed starts,
failed notifications), and the list of every metric it exports: the low part of
:mod:`.metrics`, which the service's context holds."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client import Counter as PromCounter
from prometheus_client import Histogram as PromHistogram

#: per-job series at most, by default (``c.JobServiceApp.metrics_max_jobs``)
DEFAULT_MAX_JOBS = 500
#: seconds a queued job waited, as buckets: a second to a day
QUEUE_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
#: seconds from a job's claim to its start being recorded (a backend create, mostly)
DISPATCH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: every metric the service exports, as its family is named, and what it is
METRICS: dict[str, str] = {
    "nbjobs_jobs": "Jobs in the job database, by state and flavor",
    "nbjobs_queue_length": "Jobs waiting to start, by flavor",
    "nbjobs_queue_oldest_wait_seconds": "How long the longest-waiting queued job has waited",
    "nbjobs_queue_wait_seconds": "Seconds from submission until the job was handed to the "
    "backend (observed as jobs start)",
    "nbjobs_dispatch_latency_seconds": "Seconds from a job's claim by the dispatcher until "
    "its start was recorded (mostly the backend's create)",
    "nbjobs_gpus_total": "GPUs of the kind a flavor uses (the backend's view; flavors of one "
    "kind share them: do not sum over flavors)",
    "nbjobs_gpus_free": "GPUs of the kind a flavor uses that are free now",
    "nbjobs_gpus_allocated": "GPUs held by started jobs (a 0.25 share counts 0.25), by flavor "
    "and node",
    "nbjobs_gpus_busy": "GPUs' worth of utilisation of started jobs (held GPUs x their "
    "latest sampled utilisation), by flavor and node",
    "nbjobs_job_gpu_utilization_ratio": "A running job's GPU utilisation (0-1, mean over its "
    "GPUs, latest sample)",
    "nbjobs_job_gpu_memory_used_bytes": "A running job's GPU memory in use (over its GPUs)",
    "nbjobs_job_gpu_memory_total_bytes": "A running job's GPU memory (over its GPUs)",
    "nbjobs_jobs_unlisted": "Running jobs with samples beyond metrics_max_jobs, not listed "
    "one by one",
    "nbjobs_backend_start_failures": "Jobs the backend could not start, by flavor",
    "nbjobs_notification_errors": "Attempts to send a notification (mail, webhook) that "
    "failed; each retry counts",
    "nbjobs_gpu_allocated_seconds": "GPU-seconds held by jobs that ended (GPUs x their run), "
    "by user, flavor and node; counted when a job ends",
    "nbjobs_gpu_busy_seconds": "GPU-seconds busy of jobs that ended (their telemetry: seconds "
    "sampled x utilisation), by user, flavor and node; counted when a job ends",
    "nbjobs_user_class_info": "1 for each student of each class (to sum usage by class: "
    "multiply on user)",
    "nbjobs_user_group_info": "1 for each group a user's jobs were submitted in (to sum usage "
    "by group: multiply on user)",
}


class ServiceMetrics:
    """What the service observes as it goes (histograms, counters), in a registry of its own
    (several services in one process, as in tests, do not mix).

    Thread-safe: the dispatcher observes from the event loop and the database threads.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.queue_wait = PromHistogram(
            "nbjobs_queue_wait_seconds",
            METRICS["nbjobs_queue_wait_seconds"],
            ["flavor"],
            buckets=QUEUE_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.dispatch_latency = PromHistogram(
            "nbjobs_dispatch_latency_seconds",
            METRICS["nbjobs_dispatch_latency_seconds"],
            ["flavor"],
            buckets=DISPATCH_BUCKETS,
            registry=self.registry,
        )
        self.start_failures = PromCounter(
            "nbjobs_backend_start_failures",
            METRICS["nbjobs_backend_start_failures"],
            ["flavor"],
            registry=self.registry,
        )
        self.notification_errors = PromCounter(
            "nbjobs_notification_errors",
            METRICS["nbjobs_notification_errors"],
            registry=self.registry,
        )
        #: per-job series at most (``c.JobServiceApp.metrics_max_jobs``)
        self.max_jobs = DEFAULT_MAX_JOBS

    def job_started(self, flavor: str, waited: float) -> None:
        """A queued job was handed to the backend after ``waited`` seconds."""
        self.queue_wait.labels(flavor).observe(max(0.0, waited))

    def job_dispatched(self, flavor: str, seconds: float) -> None:
        """A claimed job's start was recorded ``seconds`` after its claim."""
        self.dispatch_latency.labels(flavor).observe(max(0.0, seconds))

    def start_failed(self, flavor: str) -> None:
        """The backend could not start a job."""
        self.start_failures.labels(flavor).inc()

    def notification_failed(self) -> None:
        """An attempt to send a notification failed."""
        self.notification_errors.inc()
