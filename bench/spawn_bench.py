"""Spawn benchmark: nbjobs' CPU-only local spawner against JupyterHub's SimpleLocalProcessSpawner,
and (as root) nbjobs' spawner giving each user an OS account of their own.

    python bench/spawn_bench.py [--rounds N]

Real hubs run side by side, identical but for the spawner; each round spawns on
every hub, and the order turns from round to round (so machine noise and warm caches
favour none). Each round starts a user's server through the hub API and waits until
the hub says it is ready, then stops it. Printed: the median spawn-to-ready of each,
and its ratio to SimpleLocalProcessSpawner and to nbjobs' spawner without accounts.
The accounts hub makes a new OS account per round (first login), as a class's first
day does; they are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

HUB = """
import os
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{work}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{work}/cookie_secret"
c.ConfigurableHTTPProxy.pid_file = "{work}/proxy.pid"
# two hubs run side by side: each proxy needs its own API port
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.services.append({{"name": "bench", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "bench", "services": ["bench"], "scopes": ["admin:users", "admin:servers"]}}
)
c.JupyterHub.spawner_class = {spawner!r}
if os.geteuid() == 0:
    c.Spawner.args = ["--allow-root"]
"""

SPAWNERS = {
    "SimpleLocalProcessSpawner": "jupyterhub.spawner.SimpleLocalProcessSpawner",
    "nbjobs LocalCPUSpawner": "nbjobs.spawner.local.LocalCPUSpawner",
}
#: as root: the same spawner, each user their own OS account (made at their first spawn)
ACCOUNTS = "nbjobs, own accounts"
ACCOUNT_PREFIX = f"bench{secrets.token_hex(2)}-"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Hub:
    def __init__(self, work: Path, spawner: str, accounts: bool = False) -> None:
        work.mkdir(parents=True)
        work.chmod(0o755)  # users' accounts pass through to their folders
        settings: dict = {
            "storage": {"root": str(work / "home")},
            "database": {"url": "sqlite:///jobs.sqlite"},
        }
        if accounts:
            mode = {"mode": "create", "prefix": ACCOUNT_PREFIX}
            settings["backend"] = {"kind": "local", "local": {"accounts": mode}}
        (work / "nbjobs.yaml").write_text(yaml.safe_dump(settings))
        self.token = secrets.token_hex(16)
        port = free_port()
        (work / "hub.py").write_text(
            HUB.format(
                config=str(work / "nbjobs.yaml"),
                service_port=free_port(),
                port=port,
                hub_port=free_port(),
                proxy_api_port=free_port(),
                work=work,
                token=self.token,
                spawner=spawner,
            )
        )
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        self.log = (work / "hub.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(work / "hub.py")],
            cwd=work,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.api = f"http://127.0.0.1:{port}/hub/api/"
        self.headers = {"Authorization": f"token {self.token}"}
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(self.api, timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (work / "hub.log").read_text()[-3000:]
                raise SystemExit(f"hub with {spawner} did not start; its log ends:\n{tail}")
            time.sleep(0.3)

    def spawn_to_ready(self, user: str) -> float:
        requests.post(self.api + f"users/{user}", headers=self.headers, timeout=30)
        t0 = time.perf_counter()
        r = requests.post(self.api + f"users/{user}/server", headers=self.headers, timeout=120)
        r.raise_for_status()
        while True:
            model = requests.get(
                self.api + f"users/{user}", headers=self.headers, timeout=30
            ).json()
            if model["servers"].get("", {}).get("ready"):
                break
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
        requests.delete(self.api + f"users/{user}/server", headers=self.headers, timeout=120)
        while requests.get(self.api + f"users/{user}", headers=self.headers, timeout=30).json()[
            "servers"
        ]:
            time.sleep(0.05)
        return elapsed

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("configurable-http-proxy", path=str(Path(sys.executable).parent)) is None:
        raise SystemExit("configurable-http-proxy is missing: run scripts/install.sh")
    hubs_wanted = [(name, cls, False) for name, cls in SPAWNERS.items()]
    if os.geteuid() == 0:
        hubs_wanted.append((ACCOUNTS, SPAWNERS["nbjobs LocalCPUSpawner"], True))
    times: dict[str, list[float]] = {name: [] for name, _, _ in hubs_wanted}
    with tempfile.TemporaryDirectory(prefix="nbjobs-spawn-") as tmp:
        Path(tmp).chmod(0o755)
        hubs: dict[str, Hub] = {}
        try:
            # the hubs started are stopped (finally) if a later one does not start
            for i, (name, cls, accounts) in enumerate(hubs_wanted):
                hubs[name] = (
                    Hub(Path(tmp) / str(i), cls, accounts)
                    if accounts
                    else Hub(Path(tmp) / str(i), cls)
                )
            for round_ in range(args.rounds):
                order = list(hubs)
                if round_ % 2:  # alternate who goes first: warm caches favour none
                    order.reverse()
                for name in order:
                    times[name].append(hubs[name].spawn_to_ready(f"user{round_}"))
        finally:
            for hub in hubs.values():
                hub.stop()
            _remove_bench_accounts()
    base = statistics.median(times["SimpleLocalProcessSpawner"])
    ours = statistics.median(times["nbjobs LocalCPUSpawner"])
    print(f"spawn to ready, median of {args.rounds} rounds:")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(
            f"  {name:<27}{median:6.2f} s   ÷ SimpleLocalProcessSpawner {median / base:.2f}"
            f"   ÷ nbjobs LocalCPUSpawner {median / ours:.2f}"
        )
    return 0


def _remove_bench_accounts() -> None:
    if os.geteuid() != 0:
        return
    from nbjobs.accounts import accounts_made, remove_account

    for name in accounts_made():
        if name.startswith(ACCOUNT_PREFIX):
            remove_account(name)


if __name__ == "__main__":
    sys.exit(main())
