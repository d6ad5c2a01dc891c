"""Storage-path rules shared by the service, the spawner and the backends.

Every user has one folder on the shared storage, ``root / user_dir``. A
notebook path a user sends is relative to that folder (as JupyterLab shows
it); it must stay inside it after every symlink is resolved. Job files (the
snapshot, the status file, the log) live in the user's ``.nbjobs/jobs/<id>/``;
the executed notebook is written next to the source under a new name.
"""

from __future__ import annotations

import os
import re
import string
from datetime import datetime
from pathlib import Path, PurePosixPath

from .config import StorageConfig

_SAFE = frozenset(string.ascii_lowercase + string.digits)
JOBS_DIR = PurePosixPath(".nbjobs") / "jobs"


class PathRefused(ValueError):
    """A path the user may not use; the message says why and what to do."""


def escape_username(name: str) -> str:
    """A user name as a folder name: lowercase letters and digits kept, the rest ``-xx``.

    Reversible and collision-free (``-`` itself is escaped), like kubespawner's
    escaping of names for pods and volumes.
    """
    out = []
    for char in name:
        if char in _SAFE:
            out.append(char)
        else:
            out.append("".join(f"-{byte:02x}" for byte in char.encode("utf-8")))
    return "".join(out)


def user_subpath(storage: StorageConfig, username: str) -> str:
    """The user's folder relative to the storage root: the one place the name is escaped.

    The service's folder, the notebook pod's ``subPath`` and the job pod's
    ``subPath`` are all built from it, so they always agree.
    """
    return storage.user_dir.format(username=escape_username(username))


def user_folder(storage: StorageConfig, username: str) -> Path:
    """The user's folder on this machine (the service's view of the shared storage)."""
    return Path(storage.root) / user_subpath(storage, username)


def resolve_notebook_path(folder: Path, path: str) -> Path:
    """The absolute path of a notebook the user named, refused unless inside ``folder``.

    ``path`` is relative to the user's folder, as JupyterLab shows it; a
    leading ``/`` is allowed (Lab's root). ``..`` and symlinks that lead
    out of the folder are refused, and so is anything but an existing ``.ipynb``.
    """
    if not path or "\x00" in path:
        raise PathRefused("give the notebook's path, relative to your home folder")
    relative = PurePosixPath(path.lstrip("/"))
    if ".." in relative.parts:
        raise PathRefused(
            f"{path!r} leaves your folder ('..' is not allowed); give a path inside it"
        )
    base = folder.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base):
        raise PathRefused(
            f"{path!r} leads outside your folder (through a link); "
            "copy the notebook into your folder and submit that copy"
        )
    if target.suffix != ".ipynb":
        raise PathRefused(f"{path!r} is not a notebook (.ipynb)")
    if not target.is_file():
        raise PathRefused(f"{path!r} does not exist in your folder; save it first")
    if target.relative_to(base).parts[:1] == (".nbjobs",):
        raise PathRefused("notebooks inside .nbjobs/ are nbjobs' own copies; submit the original")
    return target


def job_folder(folder: Path, job_id: str) -> Path:
    """Where a job's snapshot, status file and log live."""
    return folder / JOBS_DIR / job_id


_STEM = re.compile(r"[^\w.-]+")


def output_path_for(source: Path, job_id: str, when: datetime) -> Path:
    """A new, readable name next to the source: ``train.2026-11-23T0930.<id>.ipynb``.

    It sorts by time in a file browser, says which job wrote it, and never
    equals the source or another job's output.
    """
    stamp = when.strftime("%Y-%m-%dT%H%M")
    stem = _STEM.sub("_", source.stem)
    return source.with_name(f"{stem}.{stamp}.{job_id[:8]}.ipynb")


def relative_to_user(folder: Path, path: Path) -> str:
    """A path as the user sees it (relative to their folder, POSIX separators)."""
    return PurePosixPath(os.path.relpath(path, folder)).as_posix()
