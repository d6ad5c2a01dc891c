"""The runner's command line, as every backend builds it, read by the runner's own parser.

The job service writes the command (``LaunchSpec.runner_command``, local and Kubernetes
alike) and ``python -m nbjobs.job_runner`` parses it: an option renamed or a value
written in a form the parser reads differently would only show when a job ran. Here
every choice a submit and nbjobs.yaml can make goes through both, and comes out as it
went in; the status file, by which the local backend finds a runner's process again,
is read back from the same command line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from nbjobs.job_runner.__main__ import build_parser
from nbjobs.job_service.backends.base import JobFilesRoom, LaunchSpec, status_file_in
from nbjobs.job_service.backends.kubernetes_objects import (
    pod_path,
    runner_command,
)

from nbjobs.config import (
    Flavor,
    LimitsConfig,
    TelemetryConfig,
)
from nbjobs.storage import user_folder
from tests.kubernetes.test_manifests import SETTINGS, STORAGE

LIMITS = LimitsConfig(cell_output="3MiB", notebook_output="40MiB", log_output="5MiB")
TELEMETRY = TelemetryConfig(interval="15s")


def every_choice(script: bool) -> LaunchSpec:
    """A job with every option the runner can be given set, none to its default."""
    home = user_folder(STORAGE, "ada")
    job_dir = home / ".nbjobs" / "jobs" / "0123456789ab"
    return LaunchSpec(
        job_id="0123456789ab",
        user="ada",
        flavor=Flavor(name="gpu", gpus=1),
        snapshot_file=job_dir / ("input.py" if script else "input.ipynb"),
        output_file=home / "work" / "out" / ("train.log" if script else "train.ipynb"),
        status_file=job_dir / "status.json",
        log_file=job_dir / "log.txt",
        cwd=home / "work",
        parameters={"lr": 0.1},
        time_limit=5400.0,
        source_name="--odd name.py" if script else "--odd name.ipynb",
        kernel="julia-1.10",
        html_file=None if script else home / "work" / "out" / "train.html",
        output_in_folder=True,
        script=script,
        job_files=JobFilesRoom(limit=5 * 1024**3, used=123_456, folder=home / ".nbjobs"),
    )


def local(spec: LaunchSpec) -> tuple[list[str], Callable[[Path], str]]:
    """As the local backend builds it: paths as they are, the log its stdout."""
    return spec.runner_command("/usr/bin/python3", str, LIMITS, TELEMETRY), str


def kubernetes(spec: LaunchSpec) -> tuple[list[str], Callable[[Path], str]]:
    """As a Kubernetes Job's container runs it: paths under the pod's mount, its own log."""
    command = runner_command(spec, STORAGE, SETTINGS, LIMITS, 0o640, TELEMETRY)
    return command, lambda path: pod_path(STORAGE, spec.user, path)


@pytest.mark.parametrize("script", [False, True], ids=["notebook", "script"])
@pytest.mark.parametrize("build", [local, kubernetes])
def test_every_choice_reaches_the_runner_as_it_was_made(build, script):
    spec = every_choice(script)
    command, where = build(spec)

    assert command[1:3] == ["-m", "nbjobs.job_runner"]
    args = build_parser().parse_args(command[3:])

    assert (args.input, args.output) == (where(spec.snapshot_file), where(spec.output_file))
    assert args.status_file == where(spec.status_file)
    assert args.cwd == where(spec.cwd)
    assert args.parameters == where(spec.parameters_file)  # a file, never JSON in argv
    assert args.parameter == []
    assert args.timeout == 5400.0
    assert args.source_name == spec.source_name  # a name starting with dashes stays a name
    assert args.kernel == "julia-1.10"
    assert args.html == (None if script else where(spec.html_file))
    assert args.make_output_folder is True
    assert args.script is script
    assert (args.folder_limit, args.folder_used) == (5 * 1024**3, 123_456)
    assert args.folder == where(spec.job_files.folder)
    assert (args.max_cell_output, args.max_output, args.max_log_output) == (
        3 * 1024**2,
        40 * 1024**2,
        5 * 1024**2,
    )
    assert args.telemetry_interval == 15.0
    if build is kubernetes:  # a pod writes its log into the job's folder itself
        assert (args.log_file, args.log_file_mode) == (where(spec.log_file), 0o640)
    else:  # the runner's stdout and stderr are the log already
        assert args.log_file is None
    assert status_file_in(command) == where(spec.status_file)


def test_a_plain_job_gives_the_runner_its_defaults():
    home = user_folder(STORAGE, "bob")
    spec = LaunchSpec(
        job_id="abcdefabcdef",
        user="bob",
        flavor=Flavor(name="cpu", gpus=0),
        snapshot_file=home / ".nbjobs/jobs/abcdefabcdef/input.ipynb",
        output_file=home / "nb.out.ipynb",
        status_file=home / ".nbjobs/jobs/abcdefabcdef/status.json",
        log_file=home / ".nbjobs/jobs/abcdefabcdef/log.txt",
        cwd=home,
    )
    command = spec.runner_command("python3", str, LimitsConfig(), TelemetryConfig())
    args = build_parser().parse_args(command[3:])
    defaults = build_parser().parse_args(["in.ipynb", "out.ipynb"])

    for unset in ("parameters", "timeout", "source_name", "kernel", "html", "folder_limit"):
        assert getattr(args, unset) is None, unset
    assert (args.make_output_folder, args.script) == (False, False)
    # nbjobs.yaml's defaults and the runner's own agree
    for same in ("max_cell_output", "max_output", "max_log_output", "telemetry_interval"):
        assert getattr(args, same) == getattr(defaults, same), same


def test_a_command_line_that_names_no_status_file_is_no_runners():
    assert status_file_in(["python3", "-m", "nbjobs.job_runner", "a.ipynb", "b.ipynb"]) is None
    assert status_file_in(["bash", "-c", "echo --status-file"]) is None
    assert status_file_in(["x", "--status-file"]) is None  # the option with no value
