"""nbjobs.yaml: examples load, the published JSON Schema is the loader's, errors name the line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
import yaml

from nbjobs.config import ConfigError, NbjobsConfig, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "hub_config" / "examples").glob("*.yaml"))
SCHEMA_FILE = ROOT / "hub_config" / "nbjobs.schema.json"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_every_example_loads_and_matches_the_schema(example):
    config = load_config(example)
    jsonschema.validate(yaml.safe_load(example.read_text()), json.loads(SCHEMA_FILE.read_text()))
    assert config.flavors


def test_the_published_schema_is_generated_from_the_loader():
    schema = NbjobsConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "nbjobs.yaml"
    assert json.loads(SCHEMA_FILE.read_text()) == schema, (
        "hub_config/nbjobs.schema.json is stale: regenerate it from NbjobsConfig"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("flavors: [", "line 1: not valid YAML"),
        ("- just\n- a list\n", "line 1: the file must be a mapping of sections"),
        ("storage:\n  rooot: /x\n", "line 2: storage.rooot: unknown setting"),
        ("flavors:\n  - name: A100\n", "line 2: flavors.0.name: flavor name 'A100' must be"),
        (
            "flavors:\n  - name: g\n    gpus: two\n",
            "line 3: flavors.0.gpus: Input should be a valid integer",
        ),
        (
            "flavors:\n  - name: g\n    time_limit: forever\n",
            "line 3: flavors.0.time_limit: 'forever' is not a duration",
        ),
        ("flavors:\n  - name: g\n    memory: 16GB\n", "is not a Kubernetes quantity"),
        (
            "flavors:\n  - name: s\n    gpus: 2\n    shared: true\n",
            "a shared (fractional) flavor takes a slot of one GPU",
        ),
        ("flavors:\n  - {name: a}\n  - {name: a}\n", "flavor names must be unique; repeated: a"),
        ("classes:\n  - {name: c, flavors: [nope]}\n", "class 'c' lists unknown flavor(s) nope"),
        ("storage:\n  user_dir: home\n", "user_dir must contain {username}"),
        ("quotas:\n  default:\n    gpu_hours: -1\n", "line 3: quotas.default.gpu_hours"),
        ("profiles:\n  - {display_name: X}\n", "a profile needs a name (or, in profile_list"),
        ("profiles:\n  - {name: a, slug: b}\n", "a profile has one name: give name or slug"),
        (
            "profiles:\n  - slug: a\n    cpu: 2\n    kubespawner_override: {cpu_limit: 4}\n",
            "profile 'a' sets both cpu and kubespawner_override.cpu_limit; keep one",
        ),
        (
            "profiles:\n  - slug: a\n    kubespawner_override:\n      privileged: true\n",
            "line 4: profiles.0.kubespawner_override: kubespawner_override may not set "
            "privileged in nbjobs",
        ),
        (
            "profiles:\n  - slug: a\n    kubespawner_override:\n      mem_limit: 16GB\n",
            "line 4: profiles.0.kubespawner_override.mem_limit: '16GB' is not a Kubernetes",
        ),
        (
            "profiles:\n  - slug: a\n    profile_options: {}\n",
            "profile_options is not supported in nbjobs; list each choice as a profile",
        ),
        (
            "limits:\n  cell_output: 100\n",
            "line 2: limits.cell_output: 100 bytes is too little output to keep; give at least "
            "1KiB (e.g. 512KiB, 2MiB)",
        ),
        ("limits:\n  log_output: lots\n", "line 2: limits.log_output: 'lots' is not a size"),
        ("limits:\n  notebook_output: 0\n", "limits.notebook_output: a size must be at least"),
        (
            "telemetry:\n  interval: 500ms\n",
            "line 2: telemetry.interval: '500ms' is not a duration",
        ),
        (
            "telemetry:\n  interval: 0.5s\n",
            "line 2: telemetry.interval: '0.5s' is too short an interval: sampling more than "
            "once a second costs jobs time and says little more; give at least 1s, or 0 to "
            "turn telemetry off",
        ),
        ("telemetry:\n  interval: -10\n", "telemetry.interval: -10 is not an interval"),
        (
            "flavors:\n  - name: c\n    tasks: 10\n",
            "line 3: flavors.0.tasks: tasks: 10 is too few: a job's runner and kernel alone "
            "hold about 20 processes and threads",
        ),
        ("profiles:\n  - {name: a, tasks: 8}\n", "profiles.0.tasks: tasks: 8 is too few"),
        (
            "backend:\n  local:\n    tasks: many\n",
            "line 3: backend.local.tasks: Input should be a valid integer",
        ),
        ("telemetry:\n  every: 10s\n", "line 2: telemetry.every"),
        (
            "flavors:\n  - name: g\n    gpus: 1\n    idle_gpu: {after: 10s}\n",
            "line 4: flavors.0.idle_gpu.after: give at least a minute (60s, 5m), so that a "
            "pause is not idling",
        ),
        (
            "flavors:\n  - name: g\n    gpus: 1\n    idle_gpu: {action: kill}\n",
            "line 4: flavors.0.idle_gpu.action: Input should be 'warn' or 'cancel'",
        ),
        (
            "flavors:\n  - name: c\n    idle_gpu: {}\n",
            "idle_gpu is for flavors with GPUs; this one has none",
        ),
        (
            "backend:\n  kubernetes:\n    deadline_grace_seconds: 60\n",
            "deadline_grace_seconds is now limits.time_limit_grace (one grace for every "
            "backend): move it there",
        ),
        (
            "storage:\n  uid: 0\n",
            "line 2: storage.uid: 0 is root: notebook servers and jobs would run as root",
        ),
    ],
)
def test_bad_files_name_the_line_and_the_reason(text, expected):
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="nbjobs.yaml")
    assert expected in str(info.value)


def test_relative_paths_are_relative_to_the_file(tmp_path):
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "nbjobs.yaml"
    path.write_text("storage: {root: home}\ndatabase: {url: 'sqlite:///jobs.sqlite'}\n")

    config = load_config(path)

    assert config.storage.root == tmp_path / "conf" / "home"
    assert config.database.url == f"sqlite:///{tmp_path / 'conf' / 'jobs.sqlite'}"


def test_a_database_url_in_the_environment_replaces_the_files(tmp_path, monkeypatch):
    """On a cluster the file is a ConfigMap: the URL with its password comes from a Secret
    through NBJOBS_DATABASE_URL (the Helm chart's database.existingSecret)."""
    path = tmp_path / "nbjobs.yaml"
    path.write_text("database: {url: 'sqlite:///jobs.sqlite'}\n")
    assert load_config(path).database.url == f"sqlite:///{tmp_path}/jobs.sqlite"

    monkeypatch.setenv("NBJOBS_DATABASE_URL", "postgresql+psycopg2://nbjobs:s3cret@db/nbjobs")
    assert load_config(path).database.url == "postgresql+psycopg2://nbjobs:s3cret@db/nbjobs"


def test_durations():
    config = parse_config(
        "flavors:\n  - {name: a, time_limit: 1h30m}\n  - {name: b, time_limit: 90}\n"
    )
    assert [f.time_limit for f in config.flavors] == [5400, 90]


CPU_ONLY = "notebook servers are CPU-only in nbjobs, so a profile cannot ask for a GPU"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("profiles:\n  - name: big\n    gpus: 1\n", "line 2: profiles.0: "),
        (
            "profiles:\n  - {name: big, gpu_resource: nvidia.com/mig-1g.10gb}\n",
            "line 2: profiles.0: ",
        ),
        (
            "profiles:\n  - name: big\n    extra_resource_limits: {nvidia.com/gpu: 1}\n",
            "line 2: profiles.0: ",
        ),
        (
            "profiles:\n  - slug: big\n    kubespawner_override:\n"
            "      extra_resource_limits: {nvidia.com/gpu: 1}\n",
            "line 4: profiles.0.kubespawner_override: ",
        ),
        (
            "profiles:\n  - slug: big\n    kubespawner_override:\n"
            "      extra_resource_guarantees: {amd.com/gpu: 1}\n",
            "line 4: profiles.0.kubespawner_override: ",
        ),
        (
            "profiles:\n  - slug: big\n    kubespawner_override:\n"
            "      environment: {NVIDIA_VISIBLE_DEVICES: all}\n",
            "line 4: profiles.0.kubespawner_override: ",
        ),
    ],
)
def test_a_profile_asking_for_gpus_says_profiles_are_cpu_only(text, where):
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="nbjobs.yaml")

    message = str(info.value)
    assert f"nbjobs.yaml, {where}{CPU_ONLY}" in message
    assert "give GPUs to a flavor instead" in message
    assert "unknown setting" not in message


def test_profiles_in_kubespawner_profile_list_form():
    text = """
profiles:
  - display_name: "Small (1 CPU, 2 GiB)"
    slug: small
    description: For most work
    default: true
    kubespawner_override: {cpu_limit: 1, mem_limit: 2Gi}
  - display_name: Data science
    slug: datascience
    groups: [staff]
    kubespawner_override:
      image: quay.io/jupyter/scipy-notebook:2025-01-06
      cpu_limit: 8
      cpu_guarantee: 2
      mem_limit: 32Gi
      environment: {STACK: scipy}
  - {name: tiny, cpu: 500m, memory: 1Gi}
"""
    data = yaml.safe_load(text)
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text()))

    config = parse_config(text)

    assert [p.name for p in config.profiles] == ["small", "datascience", "tiny"]
    science = config.profiles[1]
    assert science.display_name == "Data science"
    assert science.groups == ["staff"]
    assert science.kubespawner_override is not None
    assert science.kubespawner_override.cpu_limit == 8
    assert science.kubespawner_override.mem_limit == "32Gi"
    assert config.profiles[0].default


def test_output_limits_default_to_the_runners_and_become_its_options():
    from nbjobs.job_runner.output_limits import OutputLimits

    runner = OutputLimits()
    limits = parse_config("").limits
    assert (limits.cell_output, limits.notebook_output, limits.log_output) == (
        runner.cell,
        runner.notebook,
        runner.log,
    )
    limits = parse_config("limits: {cell_output: 512KiB, notebook_output: 8MB}").limits
    assert limits.runner_args() == [
        *("--max-cell-output", "524288"),
        *("--max-output", "8000000"),
        *("--max-log-output", str(32 * 1024**2)),
    ]


def test_telemetry_interval_defaults_to_the_runners_and_becomes_its_option():
    from nbjobs.job_runner.telemetry import DEFAULT_INTERVAL

    assert parse_config("").telemetry.interval == DEFAULT_INTERVAL
    assert parse_config("").telemetry.runner_args() == ["--telemetry-interval", "10"]
    for written, seconds in [("30s", 30.0), ("2m", 120.0), (15, 15.0), (1, 1.0), ("1.5s", 1.5)]:
        config = parse_config(yaml.safe_dump({"telemetry": {"interval": written}}))
        assert config.telemetry.interval == seconds
        assert config.telemetry.runner_args() == ["--telemetry-interval", f"{seconds:g}"]
    for off in (0, "0s", "0"):
        config = parse_config(yaml.safe_dump({"telemetry": {"interval": off}}))
        assert config.telemetry.runner_args() == ["--telemetry-interval", "0"]


def test_an_approval_flavor_reads_its_groups_and_expiry_and_refuses_a_short_one():
    text = "flavors:\n  - name: big\n    gpus: 8\n"
    text += "    approval: {groups: [students], expires_after: 3d}\n"
    policy = parse_config(text).flavors[0].approval
    assert policy is not None
    assert (policy.groups, policy.expires_after) == (["students"], 3 * 86400.0)
    default = parse_config("flavors:\n  - {name: big, gpus: 8, approval: {}}\n").flavors[0]
    assert default.approval is not None
    assert default.approval.expires_after == 3 * 86400.0
    with pytest.raises(ConfigError) as info:
        parse_config(
            "flavors:\n  - name: big\n    approval: {expires_after: 10s}\n", source="nbjobs.yaml"
        )
    assert "nbjobs.yaml, line 3" in str(info.value)
    assert "expires_after needs to be a minute or more, like 3d or 12h" in str(info.value)


def test_simulated_gpus_are_for_machines_without_real_ones():
    config = parse_config("backend: {kind: local, local: {simulated_gpus: 2}}\n")
    assert config.backend.local.simulated_gpus == 2
    with pytest.raises(ConfigError) as info:
        parse_config(
            "backend: {kind: local, local: {gpus: [0], simulated_gpus: 2}}\n",
            source="nbjobs.yaml",
        )
    assert "give either gpus (real ones) or simulated_gpus" in str(info.value)


def test_check_config_says_valid_or_names_the_line(tmp_path):
    """`nbjobs check-config` reads a file as the hub and the service do, before a restart."""
    import subprocess
    import sys

    good = tmp_path / "nbjobs.yaml"
    good.write_text("flavors:\n  - name: cpu\n    gpus: 0\n")
    bad = tmp_path / "draft.yaml"
    bad.write_text("flavors:\n  - name: gpu\n    gpus: 1\n    time_limt: 2h\n")

    def check(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "nbjobs.cli", "check-config", *args]
        environment = {k: v for k, v in os.environ.items() if k != "NBJOBS_CONFIG"} | env
        return subprocess.run(
            command, cwd=tmp_path, capture_output=True, text=True, env=environment, timeout=60
        )

    in_folder, named, by_env = check(), check(str(bad)), check(NBJOBS_CONFIG=str(bad))

    assert in_folder.returncode == 0
    assert in_folder.stdout.splitlines()[:2] == ["nbjobs.yaml: valid", "backend:  local"]
    assert "flavors:  cpu" in in_folder.stdout
    for refused in (named, by_env):
        assert refused.returncode == 2
        assert refused.stderr.strip() == (
            f"nbjobs check-config: {bad}, line 4: flavors.0.time_limt: unknown setting "
            "(check its spelling and indentation)"
        )
