"""The local twin of the Kubernetes spawner: notebook servers as processes on one machine.

Same contract: CPU-only (no GPU visible to CUDA), the user's folder under the
local shared root as the server's root (created on first spawn), and the
environment that points the server extension at the job service.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from jupyterhub.spawner import SimpleLocalProcessSpawner
from traitlets import Unicode

from nbjobs.config import load_config
from nbjobs.storage import user_folder

from .common import SERVER_TOKEN_SCOPES, cpu_only_env, service_url_for

#: read by the bash of the server's terminals, so `nbjobs` is on their PATH
TERMINAL_RC = Path(__file__).resolve().parent / "terminal_rc.sh"


class LocalCPUSpawner(SimpleLocalProcessSpawner):
    """Runs each user's notebook server as a local process, CPU-only."""

    nbjobs_config_file = Unicode(
        os.environ.get("NBJOBS_CONFIG", ""), help="nbjobs.yaml (storage root, service)"
    ).tag(config=True)
    nbjobs_service_url = Unicode(
        os.environ.get("NBJOBS_URL", ""),
        help="the job service's API root for the server; '{base_url}' becomes the hub's base URL",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.server_token_scopes:  # type: ignore[has-type]
            self.server_token_scopes = list(SERVER_TOKEN_SCOPES)

    def user_folder(self) -> str:
        config = load_config(self.nbjobs_config_file or None)
        return str(user_folder(config.storage, self.user.name))

    def get_env(self) -> dict[str, str]:
        env = super().get_env()
        folder = self.user_folder()
        url = service_url_for(self.nbjobs_service_url, env.get("JUPYTERHUB_BASE_URL", "/"))
        env.update(cpu_only_env(url or None, folder))
        env["HOME"] = folder
        # the `nbjobs` command sits beside the Python that runs the hub and the servers
        env["NBJOBS_BIN"] = str(Path(sys.executable).parent)
        return env

    def get_args(self) -> list[str]:
        """The server's arguments; its terminals run bash with nbjobs' start-up file (a
        login shell would lose the `nbjobs` command from PATH)."""
        args: list[str] = list(super().get_args())
        bash = shutil.which("bash")
        if bash and not any("terminado_settings" in a for a in args):
            shell = {"shell_command": [bash, "--rcfile", str(TERMINAL_RC), "-i"]}
            args.append(f"--ServerApp.terminado_settings={json.dumps(shell)}")
        return args

    async def start(self) -> Any:
        folder = self.user_folder()
        os.makedirs(folder, exist_ok=True)
        self.home_dir_template = folder
        self.notebook_dir = folder
        return await super().start()
