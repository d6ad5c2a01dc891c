"""What ``nbjobs install`` writes, as pure functions: the nbjobs.yaml of a server from its
GPUs and login, and the commands that start the services (with no secret in them)."""

from __future__ import annotations

from pathlib import Path

import yaml
from nbjobs.programs.install import commands, server_config, shell_line

from nbjobs.config import parse_config


def test_a_server_with_two_gpus_gets_a_flavor_for_one_and_for_both():
    settings = server_config(
        Path("/srv/nbjobs"),
        Path("/var/lib/nbjobs"),
        [(0, "A100"), (1, "A100")],
        admins=["alice"],
        pam=False,
    )
    config = parse_config(yaml.safe_dump(settings))  # what the service will read
    assert [(f.name, f.gpus, f.gpu_type) for f in config.flavors] == [
        ("cpu", 0, None),
        ("gpu", 1, "A100"),
        ("gpu-2", 2, "A100"),
    ]
    assert config.backend.local.gpus == [0, 1]
    assert config.backend.local.accounts.mode == "create"
    assert config.backend.local.jobs_run_as == "user"
    assert config.admin.users == ["alice"]


def test_pam_logins_use_the_machines_own_accounts_and_no_gpu_means_cpu_only():
    settings = server_config(Path("/srv"), Path("/var/lib/nbjobs"), [], admins=[], pam=True)
    config = parse_config(yaml.safe_dump(settings))
    assert (config.backend.local.accounts.mode, config.backend.local.accounts.prefix) == (
        "existing",
        "",
    )
    assert [f.name for f in config.flavors] == ["cpu"]
    simulated = server_config(Path("/srv"), Path("/v"), [], admins=[], pam=False, simulated=2)
    assert parse_config(yaml.safe_dump(simulated)).backend.local.simulated_gpus == 2


def test_the_start_commands_read_their_secrets_from_files():
    hub, jobs = commands(Path("/etc/nbjobs"), Path("/opt/nbjobs/bin"))
    assert hub == [
        "/opt/nbjobs/bin/python",
        "-m",
        "nbjobs.hub_config.run",
        "-f",
        "/etc/nbjobs/jupyterhub_config.py",
    ]
    line = shell_line(Path("/etc/nbjobs/service.env"), jobs, Path("/var/lib/nbjobs"))
    assert line == (
        "sh -c 'set -a; . /etc/nbjobs/service.env; set +a; umask 077; cd /var/lib/nbjobs; "
        "exec /opt/nbjobs/bin/nbjobs service --config /etc/nbjobs/nbjobs.yaml' &"
    )
