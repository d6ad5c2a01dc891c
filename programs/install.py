"""``nbjobs install`` and ``nbjobs uninstall``: a class on one GPU server, in one command.

Run as root on a fresh Debian or Ubuntu server, from the Python environment nbjobs is
installed in (``scripts/install-server.sh`` makes one in ``/opt/nbjobs`` and runs
this). It sets up:

- ``/etc/nbjobs/nbjobs.yaml`` (root's alone, ``0600``): the machine's GPUs as flavors
  (NVML, else ``nvidia-smi -L``), an OS account per hub user, the first admin. Kept
  as the admin edited it when the installer runs again.
- ``/etc/nbjobs/jupyterhub_config.py`` and the two services' environment files with
  the job service's token (``0600``), made anew at each run (edit nbjobs.yaml instead).
- ``/var/lib/nbjobs`` (``0700``): the hub's database and secret, the job records.
- ``/srv/nbjobs`` (``0711``): every user's folder (``0700``, their own account's).
- systemd units for the hub and the job service, enabled and started where systemd
  runs; elsewhere the commands that start them are printed.

It runs again without harm (what exists is kept, said so), upgrades in place (run it
after ``pip install -U nbjobs``), and writes down what it made in
``/var/lib/nbjobs/installed.json``: ``nbjobs uninstall`` removes exactly that, and the
OS accounts nbjobs made, keeping users' folders unless told otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from nbjobs.hub_config import local_hub_lines
from nbjobs.hub_config.invitations import hub_login_lines, invite_without_password

from nbjobs.instances import (
    Settings,
    accounts_of,
    instance_for,
    prefix_argument,
    prefix_taken,
    read_settings,
    remove_control_groups,
)

#: the two services' systemd units (of the first install: another's are named after its
#: instance, see :func:`unit_names`)
HUB_UNIT, JOBS_UNIT = "nbjobs-hub.service", "nbjobs-jobs.service"
MANIFEST = "installed.json"
#: account names of the hub's users: jupyter-ada, as The Littlest JupyterHub names them
ACCOUNT_PREFIX = "jupyter-"


def install_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs install``."""
    parser = argparse.ArgumentParser(
        prog="nbjobs install",
        description="Set up nbjobs on this machine as root: a JupyterHub and the job service "
        "under systemd, an OS account per user, the GPUs as flavors. Run it again to upgrade.",
    )
    _paths(parser)
    parser.add_argument(
        "--admin", action="append", default=[], help="a hub user who administers (repeatable)"
    )
    parser.add_argument(
        "--authenticator",
        choices=["firstuse", "pam"],
        default="firstuse",
        help="firstuse: users the admin (or a teacher's roster) added choose their password "
        "with a one-time invitation, and get an OS account jupyter-NAME; pam: the machine's "
        "own accounts and passwords",
    )
    parser.add_argument(
        "--open-first-login",
        action="store_true",
        help="firstuse without invitations: the first login with a name an admin or a "
        "roster added chooses its password, so whoever knows the name first (a classmate) "
        "can take it; only where every user is trusted",
    )
    parser.add_argument(
        "--prefix",
        type=prefix_argument,
        default=ACCOUNT_PREFIX,
        help="what the users' OS account names start with (firstuse): jupyter-ada; a second "
        "install on this machine needs a prefix of its own",
    )
    parser.add_argument("--ip", default="", help="the address the hub listens on (all: '')")
    parser.add_argument("--port", type=int, default=80, help="the hub's public port")
    parser.add_argument("--hub-port", type=int, default=8081, help="the hub's API port (local)")
    parser.add_argument(
        "--service-port", type=int, default=8787, help="the job service's port (local)"
    )
    parser.add_argument(
        "--proxy-api-port", type=int, default=8001, help="the proxy's API port (local)"
    )
    parser.add_argument(
        "--simulated-gpus",
        type=int,
        default=0,
        help="on a machine without a GPU, make up this many (for trying nbjobs; every job "
        "and dialog says so)",
    )
    parser.add_argument("--no-start", action="store_true", help="write everything, start nothing")
    return parser


def uninstall_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs uninstall``."""
    parser = argparse.ArgumentParser(
        prog="nbjobs uninstall",
        description="Stop nbjobs and remove what nbjobs install made: its units, settings, "
        "state and the OS accounts nbjobs made. Users' folders stay unless asked.",
    )
    _paths(parser)
    parser.add_argument(
        "--remove-user-files",
        action="store_true",
        help="also delete every user's folder (their notebooks and results)",
    )
    return parser


def _paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-dir", default="/etc/nbjobs", help="nbjobs.yaml and secrets")
    parser.add_argument(
        "--state-dir", default="/var/lib/nbjobs", help="databases and the hub's secret"
    )
    parser.add_argument("--storage", default="/srv/nbjobs", help="users' folders")
    parser.add_argument("--units-dir", default="/etc/systemd/system", help="where systemd units go")


# -- install ---------------------------------------------------------------------


class Installer:
    """One run of ``nbjobs install``: every step says what it did, in order."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.config_dir = Path(args.config_dir)
        self.state_dir = Path(args.state_dir)
        self.storage = Path(args.storage)
        self.units_dir = Path(args.units_dir)
        self.bin = Path(sys.executable).parent
        self.made: dict[str, list[str]] = {"folders": [], "files": [], "units": []}
        # this install's name on the machine, and its accounts' prefix (None: PAM's own
        # accounts): from the nbjobs.yaml kept from an earlier run, else new
        kept = read_settings(self.config_dir / "nbjobs.yaml")
        self.kept = kept is not None and (self.config_dir / "nbjobs.yaml").exists()
        self.instance = kept.instance if kept else instance_for(self.state_dir)
        fresh_prefix = None if args.authenticator == "pam" else args.prefix
        self.prefix = kept.prefix if kept else fresh_prefix

    def say(self, text: str) -> None:
        print(f"nbjobs install: {text}", flush=True)

    def run(self) -> int:
        problem = self.preflight() or self.neighbours()
        if problem:
            print(f"nbjobs install: {problem}", file=sys.stderr)
            return 2
        self.load_manifest()
        self.folder(self.config_dir, 0o755)
        self.folder(self.state_dir, 0o700)
        self.folder(self.storage, 0o711)
        proxy = self.proxy()
        if proxy is None:
            return 2
        self.nbjobs_yaml()
        self.secrets()
        self.hub_config()
        self.units()
        self.save_manifest()
        check = self.check_config()
        if check:
            print(f"nbjobs install: {check}", file=sys.stderr)
            return 2
        self.start()
        host = self.args.ip or socket.gethostname()
        port = "" if self.args.port == 80 else f":{self.args.port}"
        admins = ", ".join(self.args.admin) or "(none: name one with --admin)"
        self.say(f"done. Open http://{host}{port}/ ; admins: {admins}")
        if self.args.authenticator == "firstuse":
            self.first_logins(f"http://{host}{port}")
        return 0

    def first_logins(self, hub_url: str) -> None:
        """Say how the admins choose their passwords: an invitation each (or, with
        --open-first-login, their first login, with a warning)."""
        if self.args.open_first_login:
            self.say(
                "WARNING: --open-first-login: the first login with a name chooses its "
                "password, so anyone who knows a name added before its owner logs in (a "
                "classmate who saw the roster) can take it. Run nbjobs install again without "
                "it to give new names one-time invitations instead"
            )
        for invitation in invite_without_password(self.state_dir, list(self.args.admin)):
            self.say(
                f"{invitation.user} chooses their password at {hub_url}/hub/invite/"
                f"{invitation.code} (once, until {invitation.expires[:16].replace('T', ' ')} "
                "UTC)"
            )
        self.say(
            "add users in the hub's admin page, then make each an invitation (nbjobs invite "
            "NAME, or the dashboard); a teacher's roster shows one per new student"
        )

    def preflight(self) -> str | None:
        """Why this machine cannot be set up; None when it can."""
        if os.geteuid() != 0:
            return "run it as root (sudo nbjobs install): it makes accounts, folders and units"
        from nbjobs.accounts import closed_to_others

        for path in (Path(sys.executable).resolve(), Path(__file__).resolve()):
            closed = closed_to_others(path)
            if closed is not None:
                return (
                    f"{path} lies under {closed}, which users' accounts cannot enter, and "
                    "their servers and jobs run this Python; install nbjobs into a venv of "
                    "its own (scripts/install-server.sh makes /opt/nbjobs)"
                )
        for tool in ("useradd", "userdel"):
            if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
                return f"{tool} is missing; install the passwd package"
        return None

    def neighbours(self) -> str | None:
        """Why this install would share OS accounts with another nbjobs on the machine
        (the same account prefix); None when it keeps to its own."""
        if self.prefix is None:
            return None
        why = prefix_taken(self.prefix, self.instance, self.storage)
        if why is None:
            return None
        if self.kept:
            return (
                f"{why}; set backend.local.accounts.prefix in {self.config_dir / 'nbjobs.yaml'} "
                "to one no other nbjobs here uses, then run nbjobs install again"
            )
        return (
            f"{why}; run nbjobs install again with --prefix naming accounts of this install's "
            "own (a prefix no other nbjobs here uses, like --prefix class2-)"
        )

    # -- what it makes ---------------------------------------------------------

    def folder(self, path: Path, mode: int) -> None:
        if path.is_dir():
            path.chmod(mode)
            self.say(f"kept {path}")
            return
        path.mkdir(parents=True)
        path.chmod(mode)
        self.made["folders"].append(str(path))
        self.say(f"made {path} (mode {mode:o})")

    def write(self, path: Path, text: str, mode: int = 0o600) -> None:
        """Write a file of ours, readable as ``mode`` says (root's alone by default)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
        if str(path) not in self.made["files"]:
            self.made["files"].append(str(path))

    def proxy(self) -> str | None:
        """configurable-http-proxy, which the hub needs: found, or installed with npm."""
        path = f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"
        found = shutil.which("configurable-http-proxy", path=path)
        if found:
            self.say(f"kept configurable-http-proxy ({found})")
            return found
        npm = shutil.which("npm")
        if npm is None:
            print(
                "nbjobs install: JupyterHub needs configurable-http-proxy, a Node.js program, "
                "and npm is missing: apt-get install -y nodejs npm, then run this again",
                file=sys.stderr,
            )
            return None
        prefix = Path(sys.prefix) / "node"
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(prefix),
                "configurable-http-proxy",
            ],
            check=True,
            capture_output=True,
        )
        link = self.bin / "configurable-http-proxy"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(prefix / "node_modules" / ".bin" / "configurable-http-proxy")
        self.made["files"].append(str(link))
        self.made["folders"].append(str(prefix))
        self.say(f"installed configurable-http-proxy into {prefix}")
        return str(link)

    def nbjobs_yaml(self) -> None:
        path = self.config_dir / "nbjobs.yaml"
        if path.exists():
            path.chmod(0o600)
            self.say(f"kept {path} (yours to edit; check it with `nbjobs check-config {path}`)")
            return
        gpus = detect_gpus()
        settings = server_config(
            self.storage,
            self.state_dir,
            gpus,
            admins=self.args.admin,
            pam=self.args.authenticator == "pam",
            simulated=self.args.simulated_gpus,
            prefix=self.prefix or ACCOUNT_PREFIX,
            instance=self.instance,
        )
        header = (
            "# nbjobs on this machine: written by `nbjobs install`, yours to edit now\n"
            "# (the installer keeps it). Every key: https://nbjobs.readthedocs.io/ or\n"
            f"# docs/reference/config.md; check it with `nbjobs check-config {path}`.\n"
        )
        self.write(path, header + yaml.safe_dump(settings, sort_keys=False))
        found = ", ".join(f"{i}: {name}" for i, name in gpus) or "none"
        self.say(f"wrote {path} (GPUs found: {found})")
        if not gpus and not self.args.simulated_gpus:
            self.say(
                "no NVIDIA GPU was found (is its driver installed? nvidia-smi -L lists them), "
                "so only the cpu flavor is there; once the driver works, run nbjobs install "
                "again after moving nbjobs.yaml aside, or add the GPUs to it "
                "(backend.local.gpus, flavors)"
            )

    def secrets(self) -> None:
        """The job service's token, made once and kept; the two environment files."""
        token = _read_env(self.config_dir / "service.env").get("JUPYTERHUB_API_TOKEN")
        if not token:
            token = secrets.token_hex(32)
        a = self.args
        service = {
            "JUPYTERHUB_API_TOKEN": token,
            "JUPYTERHUB_API_URL": f"http://127.0.0.1:{a.hub_port}/hub/api",
            "JUPYTERHUB_SERVICE_NAME": "nbjobs",
            "JUPYTERHUB_SERVICE_PREFIX": "/services/nbjobs/",
            "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{a.service_port}",
            "JUPYTERHUB_CLIENT_ID": "service-nbjobs",
            "JUPYTERHUB_OAUTH_CALLBACK_URL": "/services/nbjobs/oauth_callback",
            "JUPYTERHUB_OAUTH_ACCESS_SCOPES": '["access:services!service=nbjobs"]',
            "JUPYTERHUB_BASE_URL": "/",
            "NBJOBS_CONFIG": str(self.config_dir / "nbjobs.yaml"),
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
        }
        hub = {
            "NBJOBS_SERVICE_URL_EXTERNAL": f"http://127.0.0.1:{a.service_port}",
            "NBJOBS_SERVICE_API_TOKEN": token,
            "NBJOBS_CONFIG": str(self.config_dir / "nbjobs.yaml"),
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
        }
        for name, values in (("service.env", service), ("hub.env", hub)):
            self.write(self.config_dir / name, _env_text(values))
        self.say(f"wrote the services' settings and token ({self.config_dir}/*.env, 0600)")

    def hub_config(self) -> None:
        a = self.args
        auth = (
            'c.JupyterHub.authenticator_class = "pam"\n'
            "c.Authenticator.allow_all = True  # every account of this machine may log in\n"
            if a.authenticator == "pam"
            else hub_login_lines(self.state_dir, open_first_use=a.open_first_login)
        )
        text = (
            HUB_CONFIG.format(
                config=str(self.config_dir / "nbjobs.yaml"),
                service_port=a.service_port,
                placement=local_hub_lines(
                    self.state_dir,
                    ip=a.ip,
                    port=a.port,
                    hub_port=a.hub_port,
                    proxy_api_port=a.proxy_api_port,
                ),
                admins=sorted(a.admin),
                extra=self.config_dir / "jupyterhub_config.d",
            )
            + auth
        )
        self.write(self.config_dir / "jupyterhub_config.py", text)
        self.say(f"wrote {self.config_dir / 'jupyterhub_config.py'}")

    def units(self) -> None:
        for name, text in self.unit_texts().items():
            path = self.units_dir / name
            self.units_dir.mkdir(parents=True, exist_ok=True)
            self.write(path, text, 0o644)
            if name not in self.made["units"]:
                self.made["units"].append(name)
            self.say(f"wrote {path}")

    def unit_texts(self) -> dict[str, str]:
        """The two systemd units, from the commands :func:`commands` gives."""
        hub, jobs = commands(self.config_dir, self.bin)
        common = UNIT_COMMON.format(state=self.state_dir)
        hub_unit, jobs_unit = unit_names(self.instance)
        return {
            jobs_unit: UNIT.format(
                what="nbjobs job service (jobs run under their owners' accounts)",
                env=self.config_dir / "service.env",
                command=" ".join(jobs),
                after="network.target",
                common=common,
                # a restart of the service must not stop the jobs: the next one adopts them
                kill="KillMode=process",
            ),
            hub_unit: UNIT.format(
                what="JupyterHub of nbjobs (notebook servers under users' own accounts)",
                env=self.config_dir / "hub.env",
                command=" ".join(hub),
                after=f"network.target {jobs_unit}",
                common=common,
                kill="KillMode=control-group",
            ),
        }

    def check_config(self) -> str | None:
        from nbjobs.config import ConfigError, load_config

        try:
            load_config(self.config_dir / "nbjobs.yaml")
        except ConfigError as exc:
            return f"{exc}; fix it and run nbjobs install again"
        return None

    def start(self) -> None:
        if self.args.no_start:
            self.say("started nothing (--no-start)")
            return
        if systemd_runs():
            subprocess.run(["systemctl", "daemon-reload"], check=True)
            hub_unit, jobs_unit = unit_names(self.instance)
            for unit in (jobs_unit, hub_unit):
                subprocess.run(["systemctl", "enable", unit], check=True, capture_output=True)
                subprocess.run(["systemctl", "restart", unit], check=True)
            self.say(
                f"started {jobs_unit} and {hub_unit} (`systemctl status {jobs_unit} {hub_unit}`)"
            )
            return
        hub, jobs = commands(self.config_dir, self.bin)
        self.say(
            "systemd is not running here (PID 1 is "
            f"{_pid1()}), so nothing was started; start the two as root, the job service "
            "first:"
        )
        for name, command in (("service.env", jobs), ("hub.env", hub)):
            print(f"  {shell_line(self.config_dir / name, command, self.state_dir)}")

    # -- what it made ----------------------------------------------------------

    def load_manifest(self) -> None:
        path = self.state_dir / MANIFEST
        with contextlib.suppress(OSError, ValueError):
            before = json.loads(path.read_text())
            for key in self.made:
                self.made[key] = list(before.get(key, []))

    def save_manifest(self) -> None:
        path = self.state_dir / MANIFEST
        self.made["files"] = [f for f in self.made["files"] if f != str(path)]
        record = {
            **self.made,
            "config_dir": str(self.config_dir),
            "storage": str(self.storage),
            "instance": self.instance,
        }
        self.write(path, json.dumps(record, indent=1) + "\n")


HUB_CONFIG = """\
# Written by `nbjobs install` at each run: change nbjobs.yaml instead (or add a file to
# {extra}/, read last).
import glob
from nbjobs.hub_config import configure

configure(c, {config!r}, service_port={service_port})
{placement}c.Spawner.default_url = "/lab"
c.Authenticator.admin_users = set({admins!r})
for extra in sorted(glob.glob("{extra}/*.py")):
    load_subconfig(extra)  # noqa: F821 (JupyterHub's config loader provides it)
"""

UNIT_COMMON = """WorkingDirectory={state}
UMask=0077
Restart=always
RestartSec=5"""

UNIT = """\
# Written by `nbjobs install`; removed by `nbjobs uninstall`.
[Unit]
Description={what}
After={after}

[Service]
User=root
EnvironmentFile={env}
ExecStart={command}
{kill}
{common}

[Install]
WantedBy=multi-user.target
"""


def unit_names(instance: str) -> tuple[str, str]:
    """The hub's and the job service's systemd units of an install: ``nbjobs-hub.service``
    for the first, ``<instance>-hub.service`` for another, whose units never replace the
    first's."""
    if instance == "nbjobs":
        return HUB_UNIT, JOBS_UNIT
    return f"{instance}-hub.service", f"{instance}-jobs.service"


def commands(config_dir: Path, bindir: Path) -> tuple[list[str], list[str]]:
    """The hub's and the job service's command lines (no secret on either: they come
    from the environment files)."""
    hub = [str(bindir / "python"), "-m", "nbjobs.hub_config.run"]
    hub += ["-f", str(config_dir / "jupyterhub_config.py")]
    jobs = [str(bindir / "nbjobs"), "service", "--config", str(config_dir / "nbjobs.yaml")]
    return hub, jobs


def shell_line(env_file: Path, command: list[str], state_dir: Path) -> str:
    """What starts one of the two without systemd: its environment read from the file,
    never put on a command line (every account can read those)."""
    inner = f"set -a; . {env_file}; set +a; umask 077; cd {state_dir}; exec {' '.join(command)}"
    return f"sh -c '{inner}' &"


def server_config(
    storage: Path,
    state_dir: Path,
    gpus: list[tuple[int, str]],
    *,
    admins: Sequence[str],
    pam: bool,
    simulated: int = 0,
    prefix: str = ACCOUNT_PREFIX,
    instance: str = "nbjobs",
) -> dict[str, Any]:
    """nbjobs.yaml for a class on this server: CPU and GPU flavors from its GPUs; its OS
    accounts named with ``prefix``, its control groups and accounts marked ``instance``."""
    local: dict[str, Any] = {
        # the GPUs found now, by index: nvidia-smi may have found them where NVML is absent
        "gpus": [index for index, _ in gpus],
        "cpu_slots": 2,
        "accounts": {"mode": "existing", "prefix": ""}
        if pam
        else {"mode": "create", "prefix": prefix},
        "instance": instance,
    }
    flavors: list[dict[str, Any]] = [
        {"name": "cpu", "display_name": "CPU only", "gpus": 0, "time_limit": "1h"}
    ]
    names = sorted({name for _, name in gpus})
    gpu_type = names[0] if len(names) == 1 else None
    count = len(gpus)
    if not gpus and simulated:
        local = {**local, "simulated_gpus": simulated}
        local.pop("gpus")
        gpu_type, count = "simulated", simulated
    if count:
        label = f"1 {gpu_type}" if gpu_type else "1 GPU"
        flavors.append(
            {"name": "gpu", "display_name": label, "gpus": 1, "time_limit": "4h"}
            | ({"gpu_type": gpu_type} if gpu_type else {})
        )
    if count >= 2:
        flavors.append(
            {"name": f"gpu-{count}", "display_name": f"{count} GPUs", "gpus": count}
            | {"time_limit": "4h"}
            | ({"gpu_type": gpu_type} if gpu_type else {})
        )
    return {
        "storage": {"root": str(storage), "user_dir": "{username}"},
        "database": {"url": f"sqlite:///{state_dir}/jobs.sqlite"},
        "backend": {"kind": "local", "local": local},
        "flavors": flavors,
        "quotas": {"default": {"max_running_gpus": 1, "max_queued_jobs": 20}},
        "admin": {"users": list(admins)},
    }


_SMI_LINE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: [^)]*\))?$")


def detect_gpus() -> list[tuple[int, str]]:
    """This machine's NVIDIA GPUs, ``(index, name)``: from NVML, else ``nvidia-smi -L``."""
    with contextlib.suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        try:
            found = []
            for i in range(int(pynvml.nvmlDeviceGetCount())):
                name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                found.append((i, name.decode() if isinstance(name, bytes) else str(name)))
            return found
        finally:
            pynvml.nvmlShutdown()
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in listed.stdout.splitlines():
        match = _SMI_LINE.match(line.strip())
        if match:
            gpus.append((int(match.group(1)), match.group(2).removeprefix("NVIDIA ")))
    return gpus


def systemd_runs() -> bool:
    """systemd is PID 1 here (not in most containers)."""
    return Path("/run/systemd/system").is_dir()


def _pid1() -> str:
    try:
        return Path("/proc/1/comm").read_text().strip()
    except OSError:
        return "unknown"


def _env_text(values: dict[str, str]) -> str:
    lines = ["# Written by `nbjobs install`: root's alone (it holds a token)."]
    for key, value in values.items():
        assert "'" not in value
        lines.append(f"{key}='{value}'")
    return "\n".join(lines) + "\n"


def _read_env(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            found[key.strip()] = value.strip().strip("'")
    return found


def install(argv: Sequence[str] | None = None) -> int:
    """``nbjobs install``."""
    return Installer(install_parser().parse_args(argv)).run()


# -- uninstall -------------------------------------------------------------------


def uninstall(argv: Sequence[str] | None = None) -> int:
    """``nbjobs uninstall``: stop the services, then remove what the installer made."""
    args = uninstall_parser().parse_args(argv)
    if os.geteuid() != 0:
        print("nbjobs uninstall: run it as root (sudo nbjobs uninstall)", file=sys.stderr)
        return 2
    state_dir, config_dir = Path(args.state_dir), Path(args.config_dir)
    try:
        made = json.loads((state_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        print(
            f"nbjobs uninstall: {state_dir / MANIFEST} is missing, so nothing here was made "
            "by nbjobs install (or --state-dir names another folder)",
            file=sys.stderr,
        )
        return 2

    def say(text: str) -> None:
        print(f"nbjobs uninstall: {text}", flush=True)

    settings = read_settings(config_dir / "nbjobs.yaml") or Settings(
        # the file is gone: what the installer wrote down (the prefix: none removed
        # unless marked with the instance)
        instance=made.get("instance", instance_for(state_dir)),
        prefix=None,
        storage=made.get("storage", args.storage),
    )
    if systemd_runs():
        for unit in made.get("units", []):
            subprocess.run(["systemctl", "disable", "--now", unit], capture_output=True)
    stopped = _stop_processes(config_dir)
    if stopped:
        say(f"stopped {stopped} process(es) of the hub and the job service")
    from nbjobs.accounts import remove_account

    # this install's own accounts only: another nbjobs's here (its mark, its homes) stay
    for name in accounts_of(settings):
        if remove_account(name, settings.instance):
            say(f"removed the OS account {name}")
    for unit in made.get("units", []):
        with contextlib.suppress(FileNotFoundError):
            (Path(args.units_dir) / unit).unlink()
            say(f"removed {Path(args.units_dir) / unit}")
    if systemd_runs():
        subprocess.run(["systemctl", "daemon-reload"], capture_output=True)
    for file in made.get("files", []):
        with contextlib.suppress(FileNotFoundError):
            Path(file).unlink()
    remove_control_groups(settings.instance)
    storage = Path(made.get("storage", args.storage))
    for folder in sorted(made.get("folders", []), key=len, reverse=True):
        path = Path(folder)
        if path == storage and not args.remove_user_files:
            say(f"kept {path} (users' folders; --remove-user-files deletes them)")
            continue
        shutil.rmtree(path, ignore_errors=True)
        say(f"removed {path}")
    with contextlib.suppress(FileNotFoundError):
        (state_dir / MANIFEST).unlink()
    for folder in (config_dir / "jupyterhub_config.d", config_dir, state_dir):
        with contextlib.suppress(OSError):
            folder.rmdir()
    say("done")
    return 0


def _stop_processes(config_dir: Path) -> int:
    """Stop the hub and the job service started from this install (without systemd), and
    what they started."""
    import psutil

    from nbjobs.processes import stop_processes

    marks = (str(config_dir / "jupyterhub_config.py"), str(config_dir / "nbjobs.yaml"))
    ours = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if any(mark in line for mark in marks) and process.pid != os.getpid():
            ours.append(process)
    family = set(ours)
    for process in ours:
        with contextlib.suppress(psutil.Error):
            family.update(process.children(recursive=True))
    for process in ours:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGTERM)
    psutil.wait_procs(ours, timeout=30)  # the hub stops its proxy and servers itself
    stop_processes(family, grace=0)  # what it could not
    return len(ours)
