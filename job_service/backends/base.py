"""The interface every backend implements: start, cancel, follow, logs, capacity.

The service decides *who* runs *what* and *when*; a backend only places a job
that the service hands it and reports what became of it. The local backend
runs jobs as processes here; the Kubernetes backend as ``batch/v1`` Jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traitlets.config import LoggingConfigurable

from nbjobs.config import Flavor, NbjobsConfig


@dataclass
class LaunchSpec:
    """Everything a backend needs to start one job."""

    job_id: str
    user: str
    flavor: Flavor
    snapshot_file: Path
    output_file: Path
    status_file: Path
    log_file: Path
    #: the folder the notebook runs in (the source's folder)
    cwd: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    time_limit: float | None = None


@dataclass
class Launched:
    """What a backend started: its handle, and the GPUs it gave the job."""

    ref: str
    gpus: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    """How a job ended, as far as the backend can tell."""

    #: the runner's exit code, or None if the backend could not learn it
    exit_code: int | None
    #: a sentence when the backend itself knows more (killed by a signal, evicted)
    message: str | None = None


class Backend(LoggingConfigurable):
    """Base class of job backends (configurable: ``JobService.backend_class``)."""

    def __init__(self, config_file: NbjobsConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nbjobs = config_file

    def can_ever_fit(self, flavor: Flavor) -> str | None:
        """None if this backend could run the flavor at all; else why not, for a person."""
        raise NotImplementedError

    def free_for(self, flavor: Flavor) -> int:
        """How many more jobs of this flavor could start right now."""
        raise NotImplementedError

    async def start(self, spec: LaunchSpec) -> Launched:
        """Start the job; return at once with its handle."""
        raise NotImplementedError

    async def wait(self, ref: str) -> Outcome:
        """Wait until the job's runner has ended."""
        raise NotImplementedError

    async def cancel(self, ref: str) -> None:
        """Ask the runner to stop (it keeps the partial output); force it after a grace."""
        raise NotImplementedError

    def adopt(self, ref: str, gpus: list[str], flavor: Flavor) -> bool:
        """After a service restart: take back a job still running; False if it is gone."""
        raise NotImplementedError

    def release(self, ref: str) -> None:
        """Forget a finished job (free its GPUs)."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """The service is stopping; jobs keep running (they are adopted on restart)."""
