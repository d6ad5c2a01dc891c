"""The local twin of the Kubernetes spawner: notebook servers as processes on one machine.

Same contract as a notebook pod: CPU-only, the user's folder under the local
shared root as the server's root and home (created on first spawn), and the
environment that points the server extension at the job service.

With ``backend.local.accounts`` (``create`` or ``existing``) each server, with
its kernels and terminals, runs as the hub user's own OS account
(:mod:`nbjobs.accounts`; ``jupyter-ada``), whose home is that folder, mode
``0700``: no one else's process can read it. Without, it runs as the hub's own
account, which keeps nobody apart (one trusted person, or a try-out).

Where the kernel offers control groups (:mod:`nbjobs.cgroups`), each server runs
in one of its own: no GPU device may be opened from it (a pod on a cluster gets
none either), and the profile's memory, CPU and tasks are limits. A server whose
process the kernel killed for memory is logged with its limit, and so is one
whose new process or thread the kernel refused for passing its task limit.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from jupyterhub.spawner import LocalProcessSpawner
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from traitlets import Unicode, default

from nbjobs.accounts import Account, AccountRefused, account_for, drop_privileges, prepare_home
from nbjobs.cgroups import CgroupError, Cgroups, Group, Limits, human_bytes
from nbjobs.config import NbjobsConfig, load_config
from nbjobs.sandbox import (
    IPC_KERNELS,
    SandboxUnavailable,
    remove_server_runtime,
    server_runtime_folder,
)
from nbjobs.storage import escape_username, user_folder

from .common import SERVER_TOKEN_SCOPES, cpu_only_env, profile_list, service_url_for

#: how long a spawn waits for the job service to know the user (seconds)
INTRODUCTION_TIMEOUT = 10.0
#: read by the bash of the server's terminals, so `nbjobs` is on their PATH
TERMINAL_RC = Path(__file__).resolve().parent / "terminal_rc.sh"


class LocalCPUSpawner(LocalProcessSpawner):
    """Runs each user's notebook server as a local process, CPU-only, under the user's own
    OS account when ``backend.local.accounts`` is on."""

    nbjobs_config_file = Unicode(
        os.environ.get("NBJOBS_CONFIG", ""), help="nbjobs.yaml (storage root, service)"
    ).tag(config=True)
    nbjobs_service_url = Unicode(
        os.environ.get("NBJOBS_URL", ""),
        help="the job service's API root for the server; '{base_url}' becomes the hub's base URL",
    ).tag(config=True)

    #: said once per hub process: what control groups enforce here
    _cgroups_said = False

    @default("cmd")
    def _default_cmd(self) -> list[str]:
        # jupyterhub-singleuser without jsonschema's IRI grammar: 1.4 s of CPU less per start
        return [sys.executable, "-m", "nbjobs.spawner.singleuser"]

    @default("http_timeout")
    def _default_http_timeout(self) -> int:
        """Two minutes for a started server to answer (JupyterHub's own default, 30 s, is
        for a quiet machine): a class that logs in at once shares this machine's cores,
        each server's start is 2-3 s of CPU (its imports) under its CPU limit, and one
        that answers late was failed as "took too long to respond" (seen at load 15)."""
        return 120

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.server_token_scopes:  # type: ignore[has-type]
            self.server_token_scopes = list(SERVER_TOKEN_SCOPES)
        self.account: Account | None = None
        self.group: Group | None = None
        self._oom_said = 0
        self._task_limit_said = 0
        self._systemd_prefix: list[str] = []
        self._nbjobs_settings: NbjobsConfig | None = None
        #: the server's own runtime folder (kernels' sockets), under an OS account
        self.runtime_folder: str = ""

    # -- what the server is ----------------------------------------------------

    def nbjobs_config(self) -> NbjobsConfig:
        """nbjobs.yaml, as this hub reads it: once per spawn (a change applies to the
        servers started after it), not again for each of the spawn's steps."""
        if self._nbjobs_settings is None:
            self._nbjobs_settings = load_config(self.nbjobs_config_file or None)
        return self._nbjobs_settings

    def user_folder(self) -> str:
        return str(user_folder(self.nbjobs_config().storage, self.user.name))

    def get_env(self) -> dict[str, str]:
        env = super().get_env()
        folder = self.user_folder()
        url = service_url_for(self.nbjobs_service_url, env.get("JUPYTERHUB_BASE_URL", "/"))
        env.update(cpu_only_env(url or None, folder))
        env["HOME"] = folder
        if self.runtime_folder:
            env["JUPYTER_RUNTIME_DIR"] = self.runtime_folder
        # the `nbjobs` command sits beside the Python that runs the hub and the servers
        env["NBJOBS_BIN"] = str(Path(sys.executable).parent)
        return env

    def user_env(self, env: dict[str, str]) -> dict[str, str]:
        """USER, HOME and SHELL of the account the server runs as."""
        account = self.account
        env["USER"] = account.name if account is not None else self.user.name
        env["HOME"] = self.user_folder()
        env["SHELL"] = (account.shell if account is not None else "") or "/bin/bash"
        return env

    def get_args(self) -> list[str]:
        """The server's arguments; its terminals run bash with nbjobs' start-up file (a
        login shell would lose the `nbjobs` command from PATH)."""
        args: list[str] = list(super().get_args())
        bash = shutil.which("bash")
        if bash and not any("terminado_settings" in a for a in args):
            shell = {"shell_command": [bash, "--rcfile", str(TERMINAL_RC), "-i"]}
            args.append(f"--ServerApp.terminado_settings={json.dumps(shell)}")
        if self.runtime_folder:
            # kernels on Unix sockets in the server's own folder: another account can
            # connect to none of them (on loopback TCP anyone could read their output)
            args += IPC_KERNELS
        return args

    def make_preexec_fn(self, name: str) -> Any:
        """In the child, before exec: into the server's control group (still root), into
        the user's folder, then the user's account for good."""
        folder, group, account = self.user_folder(), self.group, self.account
        if self._systemd_prefix:
            account = None  # systemd-run becomes the account

        def preexec() -> None:
            if group is not None:
                group.join()
            os.chdir(folder)
            if account is not None:
                drop_privileges(account)

        return preexec

    def get_state(self) -> dict[str, Any]:
        """JupyterHub's state of the process, and the server's runtime folder (removed when
        a restarted hub stops the server)."""
        state: dict[str, Any] = super().get_state()
        if self.runtime_folder:
            state["nbjobs_runtime_folder"] = self.runtime_folder
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.runtime_folder = state.get("nbjobs_runtime_folder", "")

    def clear_state(self) -> None:
        """The server is gone (stopped, or found dead by a poll): its runtime folder goes
        with it. JupyterHub's poll clears the state as soon as it sees the process end,
        before :meth:`stop` returns, so the folder is removed here, not after the stop
        (it was forgotten there: one folder left under /run for every server stopped)."""
        super().clear_state()
        remove_server_runtime(self.runtime_folder)
        self.runtime_folder = ""

    async def move_certs(self, paths: dict[str, str]) -> dict[str, str]:
        """Internal TLS certificates are not used by nbjobs' local hubs."""
        return paths

    def server_limits(self, config: NbjobsConfig) -> Limits:
        """No GPU device, and the memory and CPU of the admin's settings or of the profile
        this user gets (the default one they may use); its tasks, else the machine's."""
        memory, cpus = self.mem_limit, self.cpu_limit
        tasks = config.backend.local.tasks
        groups = {g.name for g in getattr(self.user, "groups", [])}
        offered = profile_list(config, groups, bool(getattr(self.user, "admin", False)))
        chosen = next((p for p in offered if p["default"]), offered[0] if offered else None)
        if chosen is not None:
            override = chosen["kubespawner_override"]
            memory = memory or override.get("mem_limit")
            cpus = cpus or override.get("cpu_limit")
            profile = next(p for p in config.profiles if p.name == chosen["slug"])
            tasks = profile.tasks if profile.tasks is not None else tasks
        return Limits(memory=memory or None, cpus=cpus or None, gpu_minors=(), tasks=tasks)

    # -- its life --------------------------------------------------------------

    async def start(self) -> Any:
        self._nbjobs_settings = None  # read afresh for each spawn
        config = self.nbjobs_config()
        await self._introduce_to_the_service()
        folder = Path(self.user_folder())
        try:
            local = config.backend.local
            self.account = account_for(
                self.user.name, local.accounts, folder, instance=local.instance
            )
        except AccountRefused as exc:
            raise RuntimeError(str(exc)) from None
        if self.account is not None:
            prepare_home(self.account, folder)
            remove_server_runtime(self.runtime_folder)  # a crashed server's
            try:
                self.runtime_folder = str(server_runtime_folder(self.account))
            except (OSError, SandboxUnavailable) as exc:
                raise RuntimeError(
                    f"the notebook server's private runtime folder could not be made: {exc}"
                ) from None
        else:
            os.makedirs(folder, exist_ok=True)
        self.notebook_dir = str(folder)
        self._systemd_prefix = []
        self._oom_said = 0
        self._task_limit_said = 0
        self.group = self._make_group(config)
        command: list[str] = list(self.cmd)  # type: ignore[has-type]
        if self._systemd_prefix:
            self.cmd = [*self._systemd_prefix, *command]
        try:
            return await super().start()
        finally:
            self.cmd = command

    async def _introduce_to_the_service(self) -> None:
        """Call the job service as this user before their account and folder are chosen:
        a user deleted and made again under the same name has the earlier person retired
        first (their account, their folder moved aside), so the server never starts in
        what was theirs. A service that does not answer delays the spawn by
        :data:`INTRODUCTION_TIMEOUT` at most; it retires the earlier person at this
        user's first call to nbjobs instead."""
        base = self.hub.base_url
        base = base[: -len("hub/")] if base.endswith("hub/") else base
        url = service_url_for(self.nbjobs_service_url, base)
        if not url or not self.api_token:
            return
        request = HTTPRequest(
            url.rstrip("/") + "/api/health",
            headers={"Authorization": f"token {self.api_token}"},
            request_timeout=INTRODUCTION_TIMEOUT,
        )
        try:
            await AsyncHTTPClient().fetch(request)
        except Exception as exc:  # any answer or none: the spawn goes on
            self.log.warning(
                "nbjobs: the job service did not answer for %s before their server started "
                "(%s); a user made again under an earlier one's name is noticed at their "
                "first call to nbjobs",
                self.user.name,
                exc,
            )

    def _make_group(self, config: NbjobsConfig) -> Group | None:
        try:
            local = config.backend.local
            cgroups = Cgroups(mode=local.cgroups, parent=local.instance)
        except CgroupError as exc:
            raise RuntimeError(str(exc)) from None
        if not LocalCPUSpawner._cgroups_said:
            LocalCPUSpawner._cgroups_said = True
            level = self.log.warning if cgroups.unenforced() else self.log.info
            level("nbjobs: notebook servers' %s", cgroups.summary())
        if not cgroups.enforced:
            return None
        group = cgroups.group(self._group_name())
        limits = self.server_limits(config)
        group.kill_all()  # what a crashed server of theirs left behind
        group.remove()
        try:
            group.create(limits)
        except CgroupError as exc:
            raise RuntimeError(str(exc)) from None
        account = self.account
        # under systemd (cgroup v2) the server starts in a scope that carries the limits,
        # and systemd-run becomes the account itself
        self._systemd_prefix = group.command_prefix(
            limits, account.uid if account else None, account.gid if account else None
        )
        self.log.info("nbjobs: %s's server runs with %s", self.user.name, limits.describe())
        return group

    def _group_name(self) -> str:
        """``server-<hub>-<user>[--<name>]``: ``<hub>`` tells this hub's servers from
        another's on the same machine (its storage root), so that starting ada's server
        here never stops ada's server of another hub (a second class's, the demo's)."""
        server = escape_username(self.user.name)
        if self.name:
            server += "--" + escape_username(self.name)
        root = os.path.realpath(self.nbjobs_config().storage.root)
        hub = hashlib.sha256(root.encode()).hexdigest()[:8]
        return f"server-{hub}-{server}"

    async def poll(self) -> int | None:
        status = await super().poll()
        group = self.group
        if group is not None and status is None:
            kills = group.oom_kills()
            if kills > self._oom_said:
                self._oom_said = kills
                self._say_out_of_memory(group, "a process of")
            self._say_task_limit(group)
        elif group is not None:
            await asyncio.to_thread(self._say_why_it_stopped, group)
        return status

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        # the runtime folder goes in clear_state, which JupyterHub calls after every stop
        group = self.group or self._existing_group()
        if group is not None:
            # a kernel's grace and the group's removal wait: not on the hub's event loop
            await asyncio.to_thread(self._say_why_it_stopped, group)

    def _say_out_of_memory(self, group: Group, what: str) -> None:
        limit = group.memory_limit()
        self.log.warning(
            "nbjobs: %s's notebook server ran out of memory (limit %s): the kernel killed %s "
            "it (a notebook's kernel, usually; JupyterLab says it died). A larger profile, "
            "or a job, has more",
            self.user.name,
            human_bytes(limit) if limit is not None else "none",
            what,
        )

    def _say_task_limit(self, group: Group) -> None:
        """Log, once per new refusal seen, that the server's group reached its task limit
        (a kernel's fork or thread failed; one that loops on it is a fork bomb held in)."""
        hits = group.task_limit_hits()
        if hits <= self._task_limit_said:
            return
        self._task_limit_said = hits
        self.log.warning(
            "nbjobs: %s's notebook server reached its task limit (limit %s; %d new "
            "processes or threads refused): a notebook or terminal started too many; its "
            "profile's tasks (or backend.local.tasks) in nbjobs.yaml allows more",
            self.user.name,
            group.task_limit() or "none",
            hits,
        )

    def _existing_group(self) -> Group | None:
        """The server's group after a hub restart (it is named, not remembered)."""
        try:
            local = self.nbjobs_config().backend.local
            cgroups = Cgroups(mode=local.cgroups, parent=local.instance)
        except CgroupError:
            return None
        if not cgroups.enforced:
            return None
        return cgroups.group(self._group_name())

    def _say_why_it_stopped(self, group: Group) -> None:
        """Log a kill for memory with the limit, then stop what is left (kernels,
        terminals) and remove the group."""
        if group.oom_kills() > self._oom_said:
            self._say_out_of_memory(group, "the last process of")
        self._say_task_limit(group)
        group.kill_all(grace=2.0)
        group.remove()
        if group is self.group:
            self.group = None
