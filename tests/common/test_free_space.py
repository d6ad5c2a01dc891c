"""The room left where a user's results go (``nbjobs.storage.free_space``): read from the
user's folder itself, never through a link a user put in its place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nbjobs.storage import free_space


def room(path: Path) -> tuple[int, int]:
    """(filesystem id, bytes free) of the filesystem holding ``path``."""
    found = os.statvfs(path)
    return found.f_fsid, found.f_bavail * found.f_frsize


def test_the_folders_own_filesystem_is_read(tmp_path: Path):
    folder = tmp_path / "ada"
    folder.mkdir()
    # bytes free change as the machine works: compare within 64 MiB
    assert abs(free_space(folder) - room(folder)[1]) < 64 * 1024**2
    # a folder not made yet: the filesystem it will be made on
    assert abs(free_space(tmp_path / "bob") - room(tmp_path)[1]) < 64 * 1024**2


def test_a_link_in_the_folders_place_is_not_followed(tmp_path: Path):
    with tempfile.TemporaryDirectory(dir="/dev/shm") as elsewhere:
        # another filesystem (tmpfs), so which one was read shows in the figures
        assert room(Path(elsewhere))[0] != room(tmp_path)[0]
        (Path(elsewhere) / "big").write_bytes(b"x" * (8 * 1024**2))
        folder = tmp_path / "ada"
        folder.symlink_to(elsewhere)
        found = free_space(folder)
        # the parent's filesystem, not the link target's
        assert abs(found - room(tmp_path)[1]) < 64 * 1024**2
        assert found != room(Path(elsewhere))[1]
