"""What admins and teachers edit: a jupyterhub_config.py that reads one nbjobs.yaml.

``jupyterhub -f $(python -c 'import nbjobs.hub_config as h; print(h.CONFIG_FILE)')``
with ``NBJOBS_CONFIG=/path/to/nbjobs.yaml``, or call :func:`configure` from your
own ``jupyterhub_config.py``.
"""

from __future__ import annotations

from pathlib import Path

from .setup import configure, grant_every_user, local_hub_lines

CONFIG_FILE = Path(__file__).with_name("jupyterhub_config.py")

__all__ = ["CONFIG_FILE", "configure", "grant_every_user", "local_hub_lines"]
