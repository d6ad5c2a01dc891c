"""``nbjobs demo``: the whole platform on this machine, in one command.

Starts a real JupyterHub on localhost (configurable-http-proxy, the local
CPU-only spawner) with the nbjobs job service on the local backend, a demo
class (students ada and bob, teacher tess) and an admin, each with the example
notebook in their folder. Prints the URL and the logins; Ctrl-C stops it all.
Everything lives in ``--workdir`` (default ``.nbjobs-demo``).

Every role's flow can be tried: the class is one tess manages (roster, flavors, a
GPU-hour budget; made once, then hers to change), a flavor needs a teacher's or an
admin's approval, and the job service's mail and webhooks land in the demo's inbox
(:mod:`nbjobs.programs.demo_inbox`, the hub's *Services* menu), where each user reads their own.

Started as root, it keeps the users apart as a real one-machine install does:
each demo user gets an OS account of their own (``demo-ada``, ...) that their
notebook server, terminals and jobs run as, with their folder as its home
(``0700``); the hub's and the service's files are root's alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import yaml
from nbjobs.programs import demo_inbox

from nbjobs.storage import escape_username

# In the wheel the examples sit inside the package; in a checkout, beside it.
_HERE = Path(__file__).resolve().parent
EXAMPLES = _HERE / "examples" if (_HERE / "examples").is_dir() else _HERE.parent / "examples"
PASSWORD = "nbjobs"
STUDENTS, TEACHERS, ADMINS = ["ada", "bob"], ["tess"], ["admin"]
#: what the demo's OS accounts are called: ``demo-ada``
ACCOUNT_PREFIX = "demo-"


def demo_instance(prefix: str = ACCOUNT_PREFIX) -> str:
    """The demo's name among the nbjobs on this machine (``backend.local.instance``):
    ``nbjobs-demo``, or after another account prefix ``nbjobs-<prefix>``. Its control
    groups and OS accounts are its own; an install's uninstall leaves them be."""
    return "nbjobs-" + (prefix.strip("-_") or "demo")


HUB_CONFIG = """\
# Written by `nbjobs demo`; rewritten at every start.
import os
from nbjobs.hub_config import configure

configure(c, {config!r}, service_port={service_port})
{placement}c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allowed_users = {users!r}
c.Authenticator.admin_users = {admins!r}
c.Spawner.default_url = "/lab"
if os.geteuid() == 0:  # servers run as the hub's user: let jupyter-server run as root
    c.Spawner.args = ["--allow-root"]
{showcase}"""

#: the demo's own additions to the hub: its inbox, and (first start only) its class
SHOWCASE = """from nbjobs.programs.demo_inbox import add_to_hub
add_to_hub(c, {workdir!r}, http_port={inbox_port}, smtp_port={smtp_port})
"""
SEED_CLASS = (
    "# the demo's class, made at its first start; then the teacher's to change\n"
    "# (JupyterHub would reset a group's properties at every start)\n"
    "c.JupyterHub.load_groups = {{**c.JupyterHub.load_groups, {name!r}: {group!r}}}\n"
)
#: written once the hub has made the demo's class
SEEDED = "class-made"
CLASS = "demo-class"


@dataclasses.dataclass(frozen=True)
class Ports:
    """Where the demo's parts listen (all on 127.0.0.1 but the hub's public port)."""

    port: int = 8000
    hub: int = 8081
    service: int = 8787
    proxy_api: int = 8001
    inbox: int = 8788
    smtp: int = 8025


#: with ``nbjobs demo --credits``: the GPU flavors' price (credits a GPU-hour), the
#: standing credits of every user's own account and of the demo's class
CREDITS = {"price": 1, "each_user": 10, "class": 100}

#: GPUs the demo simulates on a machine without one, so GPU flavors and queueing can be tried
SIMULATED_GPUS = 2


def demo_config(
    gpus: bool,
    accounts: bool = False,
    notifications: dict | None = None,
    prefix: str = ACCOUNT_PREFIX,
    credits: bool = False,
) -> dict:
    """The demo's nbjobs.yaml: its real GPUs, or (without one) simulated ones that say so;
    with ``accounts``, an OS account per user named with ``prefix``; ``notifications`` as
    given; with ``credits``, GPU flavors priced and paid from accounts (:data:`CREDITS`)."""
    local: dict = {"gpus": "auto", "cpu_slots": 2}
    label = "1 GPU"
    if not gpus:
        local = {"simulated_gpus": SIMULATED_GPUS, "cpu_slots": 2}
        label = "1 GPU (simulated)"
    local["instance"] = demo_instance(prefix)
    if accounts:
        local["accounts"] = {"mode": "create", "prefix": prefix}
    flavors = [
        {"name": "cpu", "display_name": "CPU only", "gpus": 0, "time_limit": "30m"},
        {"name": "gpu", "display_name": label, "gpus": 1, "time_limit": "1h"},
        {
            "name": "gpu-long",
            "display_name": f"{label}, 4 h (needs approval)",
            "gpus": 1,
            "time_limit": "4h",
            # everyone's but the admins' jobs wait for tess or the admin to say yes
            "approval": {"expires_after": "1d"},
        },
    ]
    settings = {
        "storage": {"root": "home"},
        "database": {"url": "sqlite:///jobs.sqlite"},
        "backend": {"kind": "local", "local": local},
        "flavors": flavors,
        "quotas": {"default": {"max_running_gpus": 1, "max_queued_jobs": 20, "gpu_hours": 10}},
        "teachers": {"users": TEACHERS},
        "admin": {"users": ADMINS},
    }
    if notifications:
        settings["notifications"] = notifications
    if credits:
        for flavor in flavors:
            if flavor["gpus"]:
                flavor["cost_per_gpu_hour"] = CREDITS["price"]
        settings["credits"] = {
            "enabled": True,
            "classes": {CLASS: CREDITS["class"]},
            "each_user": CREDITS["each_user"],
        }
    return settings


def credits_line(workdir: Path) -> str:
    """Whether the demo's GPU flavors cost credits, in words (and how to change it)."""
    settings = yaml.safe_load((workdir / "nbjobs.yaml").read_text())
    if not settings.get("credits", {}).get("enabled"):
        return (
            "credits: off (GPU time is free; the dashboard has no Credits tab): "
            "nbjobs demo --credits turns them on"
        )
    return (
        f"credits: on: a GPU-hour costs {CREDITS['price']:g}; every user's own account "
        f"starts with {CREDITS['each_user']:g}, class {CLASS}'s with {CREDITS['class']:g} "
        "(the dashboard's Credits tab)"
    )


def class_group(flavors: Sequence[str]) -> dict:
    """The demo's class as the hub group the dashboard makes (its students are the
    group's members; the rest is the group's ``nbjobs_class`` property)."""
    from nbjobs.job_service.classes import PROPERTY

    settings = {"teachers": TEACHERS, "flavors": list(flavors), "gpu_hours": 2, "period": "week"}
    return {"users": STUDENTS, "properties": {PROPERTY: settings}}


def gpus_line(workdir: Path) -> str:
    """What the demo's GPU flavor runs on, in words (simulated GPUs say so)."""
    local = yaml.safe_load((workdir / "nbjobs.yaml").read_text())["backend"]["local"]
    if local.get("simulated_gpus"):
        return (
            f"GPUs: {local['simulated_gpus']} SIMULATED (this machine has none): the 1 GPU "
            "flavor queues and runs as on a GPU server, and nothing computes on a GPU"
        )
    return "GPUs: this machine's (the 1 GPU flavor gets one of them)"


def prepare(
    workdir: Path,
    ip: str,
    ports: Ports = Ports(),
    accounts: bool | None = None,
    showcase: bool = True,
    prefix: str = ACCOUNT_PREFIX,
    credits: bool = False,
) -> Path:
    """Write the demo's nbjobs.yaml, hub config and users' folders; return the hub config.

    ``accounts``: give the users OS accounts (demo-ada, ...: ``prefix`` and the name);
    None: where the machine allows it (as root). The accounts are the machine's, shared
    by every demo on it with the same prefix.
    ``showcase``: the demo's class, inbox and notifications (a test hub that writes an
    nbjobs.yaml of its own goes without). ``credits``: GPU flavors cost credits.
    """
    from nbjobs.hub_config import local_hub_lines
    from nbjobs.job_service.backends.local import discover_gpus

    workdir.mkdir(parents=True, exist_ok=True)
    if accounts is None:
        accounts = accounts_possible(workdir) is None
    if accounts:
        # the users reach their folders through workdir, and nothing else in it
        workdir.chmod(0o711)
        _private(workdir)
    config = workdir / "nbjobs.yaml"
    notifications = None
    if showcase:
        demo_inbox.write_secrets(workdir)
        notifications = demo_inbox.notifications_config(
            workdir, ports.inbox, ports.smtp, f"http://{ip}:{ports.port}"
        )
    settings = demo_config(bool(discover_gpus()), accounts, notifications, prefix, credits)
    _write_private(config, yaml.safe_dump(settings, sort_keys=False))
    homes = workdir / "home"
    homes.mkdir(exist_ok=True)
    if accounts:
        homes.chmod(0o711)
    for user in STUDENTS + TEACHERS + ADMINS:
        home = homes / escape_username(user)
        home.mkdir(parents=True, exist_ok=True)
        if not (home / "hello.ipynb").exists():
            _write_example(home / "hello.ipynb")
        if accounts:
            _give_home(user, home, settings)
    extra = ""
    if showcase:
        extra = SHOWCASE.format(workdir=str(workdir), inbox_port=ports.inbox, smtp_port=ports.smtp)
        if not (workdir / SEEDED).exists():
            group = class_group([f["name"] for f in settings["flavors"]])
            extra += SEED_CLASS.format(name=CLASS, group=group)
    hub_config = workdir / "jupyterhub_config.py"
    _write_private(
        hub_config,
        HUB_CONFIG.format(
            config=str(config),
            service_port=ports.service,
            placement=local_hub_lines(
                workdir, ip=ip, port=ports.port, hub_port=ports.hub, proxy_api_port=ports.proxy_api
            ),
            password=PASSWORD,
            users=set(STUDENTS + TEACHERS + ADMINS),
            admins=set(ADMINS),
            showcase=extra,
        ),
    )
    return hub_config


def _write_example(path: Path) -> None:
    """The example notebook, with the kernel metadata JupyterLab would write into it:
    without them, opening it marks it modified (Lab fills them in from the kernel) and a
    Submit saves it first."""
    import nbformat
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    notebook = nbformat.read(EXAMPLES / "hello.ipynb", as_version=4)
    spec = KernelSpecManager().get_kernel_spec("python3")
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": spec.display_name,
        "language": spec.language,
    }
    notebook.metadata["language_info"] = dict(IPythonKernel.language_info)
    nbformat.write(notebook, path)


def accounts_possible(workdir: Path) -> str | None:
    """Why the demo cannot give its users OS accounts here; None when it can.

    It can as root, when every account may start this Python and reach the demo's
    folder (a Python or a clone under ``/root``, mode ``0700``, is closed to them).
    """
    if os.geteuid() != 0:
        return "it does not run as root"
    import sysconfig

    import nbjobs
    from nbjobs.accounts import closed_to_others

    needed = [Path(sys.executable).resolve(), Path(nbjobs.__file__).resolve().parent, workdir]
    needed.append(Path(sysconfig.get_paths()["purelib"]).resolve())
    for path in needed:
        closed = closed_to_others(path)
        if closed is not None:
            return (
                f"{closed} is closed to other accounts (mode {closed.stat().st_mode & 0o777:o}), "
                f"and {path} lies under it; clone nbjobs and make its .venv outside it "
                "(scripts/install.sh picks /usr/bin/python3 as root) to try accounts"
            )
    return None


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner (root, for the demo as root) can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


def _private(workdir: Path) -> None:
    """The demo's own files (databases, logs, secrets) closed to everyone but root,
    also when an earlier demo left them readable."""
    for entry in workdir.iterdir():
        if entry.name == "home" or entry.is_symlink():
            continue
        entry.chmod(0o700 if entry.is_dir() else 0o600)


def _give_home(user: str, home: Path, settings: dict) -> None:
    """Make ``user``'s OS account and hand it their folder, with what the demo put there."""
    from nbjobs.accounts import account_for, prepare_home
    from nbjobs.config import AccountsConfig

    local = settings["backend"]["local"]
    account = account_for(
        user, AccountsConfig(**local["accounts"]), home, instance=local["instance"]
    )
    assert account is not None
    owned_before = home.stat().st_uid
    prepare_home(account, home)
    if owned_before != account.uid:
        # the demo made these files (as root, or for an account of an earlier demo)
        for folder, dirs, files in os.walk(home):
            for name in dirs + files:
                os.lchown(os.path.join(folder, name), account.uid, account.gid)


def account_names(prefix: str = ACCOUNT_PREFIX) -> list[str]:
    """The demo users' OS account names, as the demo's nbjobs.yaml makes them."""
    from nbjobs.accounts import account_name

    return [account_name(u, prefix) for u in STUDENTS + TEACHERS + ADMINS]


def accounts_line(workdir: Path) -> str:
    """Who the users' servers and jobs run as, in words."""
    local = yaml.safe_load((workdir / "nbjobs.yaml").read_text())["backend"]["local"]
    accounts = local.get("accounts", {})
    if accounts.get("mode") == "create":
        prefix = accounts.get("prefix", ACCOUNT_PREFIX)
        remove = "nbjobs demo --remove-accounts" + (
            f" --prefix {prefix}" if prefix != ACCOUNT_PREFIX else ""
        )
        return (
            f"users: each their own OS account ({', '.join(account_names(prefix))}); nobody "
            f"reads another's folder ({remove} removes them)"
        )
    why = accounts_possible(workdir)
    return f"users: NOT kept apart (everyone runs as this account: {why})"


def demo_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs demo``."""
    from nbjobs.instances import prefix_argument

    parser = argparse.ArgumentParser(prog="nbjobs demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default=".nbjobs-demo", help="where the demo keeps its files")
    parser.add_argument("--ip", default="127.0.0.1", help="the address the hub listens on")
    parser.add_argument("--port", type=int, default=8000, help="the hub's public port")
    parser.add_argument(
        "--hub-port", type=int, default=8081, help="the hub's internal port (its API)"
    )
    parser.add_argument(
        "--service-port", type=int, default=8787, help="the job service's port (on localhost)"
    )
    parser.add_argument("--proxy-api-port", type=int, default=8001, help="the proxy's API port")
    parser.add_argument(
        "--inbox-port", type=int, default=8788, help="the demo inbox's port (pages, webhooks)"
    )
    parser.add_argument(
        "--smtp-port", type=int, default=8025, help="the demo inbox's mail port (on localhost)"
    )
    parser.add_argument(
        "--credits",
        action="store_true",
        help="GPU flavors cost credits, paid from accounts every user and the class have "
        "(the dashboard's Credits tab); off by default: GPU time is free",
    )
    parser.add_argument(
        "--remove-accounts",
        action="store_true",
        help="remove the OS accounts an earlier demo as root made (demo-ada, ...) and stop; "
        "their folders stay",
    )
    parser.add_argument(
        "--prefix",
        type=prefix_argument,
        default=ACCOUNT_PREFIX,
        help="what the users' OS account names start with, as root (demo-ada); a demo with "
        "another prefix has accounts and control groups of its own",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Start the demo hub and wait for Ctrl-C."""
    parser = demo_parser()
    args = parser.parse_args(argv)

    workdir = Path(args.workdir).absolute()
    if args.remove_accounts:
        from nbjobs.accounts import remove_account

        instance = demo_instance(args.prefix)
        removed = [n for n in account_names(args.prefix) if remove_account(n, instance)]
        print(f"nbjobs demo: removed {', '.join(removed) or 'no accounts'}")
        return 0
    # the hub, the service, the servers and the jobs make private files: the hub's
    # database and secrets, the job records, each user's results
    os.umask(0o077)
    from nbjobs.accounts import AccountRefused

    try:
        ports = Ports(
            args.port,
            args.hub_port,
            args.service_port,
            args.proxy_api_port,
            args.inbox_port,
            args.smtp_port,
        )
        hub_config = prepare(workdir, args.ip, ports, prefix=args.prefix, credits=args.credits)
    except AccountRefused as exc:
        print(f"nbjobs demo: {exc}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    if shutil.which("configurable-http-proxy", path=env["PATH"]) is None:
        print(
            "nbjobs demo: configurable-http-proxy is not installed; run scripts/install.sh "
            "(or: npm install -g configurable-http-proxy)",
            file=sys.stderr,
        )
        return 2
    log_path = workdir / "jupyterhub.log"
    url = f"http://{args.ip}:{args.port}"
    # Until the hub is up, Ctrl-C (or a TERM) interrupts wherever it lands; the
    # finally below stops whatever the hub has started by then. Both are set here,
    # not inherited: started in the background by a shell, a process begins with
    # SIGINT ignored, and an INT sent to stop the demo would be lost.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    hub: subprocess.Popen[bytes] | None = None
    try:
        with open(log_path, "ab") as log:
            hub = subprocess.Popen(
                [sys.executable, "-m", "nbjobs.hub_config.run", "-f", str(hub_config)],
                cwd=workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return _serve(hub, url, workdir, log_path)
    except KeyboardInterrupt:
        print("\nnbjobs demo: interrupted while starting; stopping ...", flush=True)
        return 130
    finally:
        if hub is not None:
            # a second Ctrl-C must not cut the clean-up short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            _stop(hub)
            from nbjobs.instances import remove_control_groups

            # the demo's servers' and ended jobs' groups, and their parent: no trace left
            remove_control_groups(demo_instance(args.prefix))
            print("nbjobs demo: stopped", flush=True)


def _serve(hub: subprocess.Popen[bytes], url: str, workdir: Path, log_path: Path) -> int:
    """Wait for the hub, say where it is, and run until Ctrl-C; the caller stops the hub."""
    print(f"nbjobs demo: starting JupyterHub (log: {log_path}) ...", flush=True)
    if not _wait_up(f"{url}/hub/api/", hub):
        print(f"nbjobs demo: the hub did not start; see {log_path}", file=sys.stderr)
        return 1
    if "load_groups" in (workdir / "jupyterhub_config.py").read_text():
        (workdir / SEEDED).touch()  # the hub made the class: from now on it is tess's
    stop = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(
        f"\nnbjobs demo is running at {url}\n\n"
        f"  log in as ada or bob (students), tess (teacher) or admin; password: {PASSWORD}\n"
        "  open hello.ipynb and submit it as a job; results appear next to it\n"
        f"  dashboard (queue, usage; tess manages class {CLASS}: 2 GPU-hours per student "
        "in the last 7 days): "
        f"{url}/services/nbjobs/\n"
        "  the flavor '4 h (needs approval)' waits for tess or admin to approve each job\n"
        f"  mail and webhooks: {url}/services/{demo_inbox.SERVICE_NAME}/ (each user reads "
        "their own; ask for them in the Jobs panel's Notifications)\n"
        f"  {gpus_line(workdir)}\n"
        f"  {accounts_line(workdir)}\n"
        f"  {credits_line(workdir)}\n"
        f"  files: {workdir}\n\nCtrl-C stops the demo.",
        flush=True,
    )
    while not stop and hub.poll() is None:
        time.sleep(0.2)
    if hub.poll() is not None and not stop:
        print(f"nbjobs demo: the hub exited ({hub.returncode}); see {log_path}", file=sys.stderr)
        return 1
    print("\nnbjobs demo: stopping ...", flush=True)
    return 0


def _interrupt(_sig: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _wait_up(url: str, hub: subprocess.Popen[bytes], timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and hub.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(0.3)
    return False


def _stop(hub: subprocess.Popen[bytes]) -> None:
    """Stop the hub and everything it started, even if it was still starting.

    The hub stops its proxy, services and servers itself, but only once its
    own signal handlers are installed (at the end of its start-up), and it
    starts each of them in a session of its own. So the hub is frozen, its
    descendants noted, and whatever of them outlives it is stopped here.
    """
    import psutil  # ipykernel's dependency; only the demo needs it

    from nbjobs.processes import stop_processes

    family: list[psutil.Process] = []
    if hub.poll() is None:
        try:
            os.kill(hub.pid, signal.SIGSTOP)  # no new children while we look
            family = psutil.Process(hub.pid).children(recursive=True)
            hub.send_signal(signal.SIGTERM)
            os.kill(hub.pid, signal.SIGCONT)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
        try:
            hub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
            hub.wait()
    stop_processes(family, grace=10)
