"""The runner's checks of the paths it is given (INPUT, OUTPUT, the status and log
files): light, so that the runner's start can check them before the heavy imports."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import BadInput


def make_folder(folder: Path, what: str) -> None:
    """Make ``folder`` (one level: its own folder must exist) unless it is there."""
    try:
        folder.mkdir(mode=0o777, exist_ok=True)  # the umask decides, as for any new folder
    except FileNotFoundError:
        raise BadInput(f"{what} folder {folder.parent} does not exist") from None
    except OSError as exc:
        raise BadInput(f"cannot make {what} folder {folder}: {exc.strerror}") from None


def check_writable_folder(target: Path, what: str) -> None:
    """Raise :class:`BadInput` unless a new file can be created beside ``target``."""
    folder = target.parent
    if target.is_dir():
        raise BadInput(f"{what} {target} is a folder; give a file path")
    if not folder.exists():
        raise BadInput(f"{what} folder {folder} does not exist")
    if not folder.is_dir():
        raise BadInput(f"{what} folder {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".nbjobs-probe-")
    except OSError as exc:
        raise BadInput(f"cannot write to {what} folder {folder}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(probe)


def status_file_conflict(
    status_path: str | os.PathLike[str],
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
) -> str | None:
    """Why ``status_path`` must not be written (it is INPUT or OUTPUT, maybe through a
    link), or ``None`` when it may."""
    status, source, output = Path(status_path), Path(input_path), Path(output_path)
    if same_file(source, status):
        return (
            f"--status-file {status.absolute()} is the INPUT notebook, which the runner "
            "never overwrites; choose another path for the status file"
        )
    if same_file(output, status):
        return (
            f"--status-file {status.absolute()} is the OUTPUT notebook; the status would "
            "replace the executed notebook: choose another path for the status file"
        )
    return None


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name the same file (through links too)."""
    try:
        return a.resolve() == b.resolve() or (b.exists() and os.path.samefile(a, b))
    except OSError:
        return False
