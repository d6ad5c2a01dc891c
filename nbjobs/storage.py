"""Storage-path rules shared by the service, the spawner and the backends.

Every user has one folder on the shared storage, ``root / user_dir``. A
notebook path a user sends is relative to that folder (as JupyterLab shows
it); it must stay inside it after every symlink is resolved. Job files (the
snapshot, the status file, the log) live in the user's ``.nbjobs/jobs/<id>/``;
the executed notebook is written next to the source under a new name.

The user owns their folder and may put a link anywhere in it, at any moment. So
the service never opens anything there by path: it opens the user's folder once
and walks down from that descriptor one name at a time, with ``O_NOFOLLOW``
(:func:`make_job_dir`, :func:`open_job_dir`, :func:`open_file_at`,
:func:`read_file_at`, :func:`read_notebook`). A link where nbjobs keeps its own
files is :class:`FilesChanged`, never followed; what is checked is what is read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from .config import StorageConfig
from .job_runner.folder_room import size_beneath

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


def shown_folder(storage: StorageConfig, username: str, folder: Path) -> str:
    """The user's folder as people know it: the NFS export and path on a cluster
    (``nfs.example.org:/export/home/ada``), else ``folder`` itself on this machine."""
    nfs = (storage.volume or {}).get("nfs")
    if isinstance(nfs, dict) and nfs.get("server") and nfs.get("path"):
        export = str(nfs["path"]).rstrip("/")
        return f"{nfs['server']}:{export}/{user_subpath(storage, username)}"
    return str(folder.absolute())


def free_space(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem that holds
    ``folder`` (its parent while it does not exist yet); None when neither can be read.
    The folder is opened without following a link in its place."""
    for candidate in (folder, folder.parent):
        try:
            fd = os.open(candidate, _DIR_FLAGS)
        except OSError:
            continue
        with _opened(fd):
            found = os.fstatvfs(fd)
        return found.f_bavail * found.f_frsize
    return None


def job_folder(folder: Path, job_id: str) -> Path:
    """Where a job's snapshot, status file and log live."""
    return folder / JOBS_DIR / job_id


_STEM = re.compile(r"[^\w.-]+")


def output_path_for(
    source: Path, job_id: str, when: datetime, folder: str | None = None, suffix: str = ".ipynb"
) -> Path:
    """A new, readable name next to the source: ``train.2026-11-23T0930.<id>.ipynb``
    (or in ``folder``, one name made in the source's folder: ``nbjobs-outputs/train...``).

    It sorts by time in a file browser, says which job wrote it, and never
    equals the source or another job's output.
    """
    stamp = when.strftime("%Y-%m-%dT%H%M")
    stem = _STEM.sub("_", source.stem)
    name = f"{stem}.{stamp}.{job_id[:8]}{suffix}"
    return source.parent / folder / name if folder else source.with_name(name)


def relative_to_user(folder: Path, path: Path) -> str:
    """A path as the user sees it (relative to their folder, POSIX separators)."""
    return PurePosixPath(os.path.relpath(path, folder)).as_posix()


# -- opening files in a user's folder without following links ------------------------------

#: the mode of every folder nbjobs makes in a user's folder (.nbjobs, .nbjobs/jobs, a job's)
FOLDER_MODE = 0o700
#: the mode of every file nbjobs makes there (the snapshot, logs)
FILE_MODE = 0o600
#: the most links one notebook path may go through (the kernel's own limit is 40)
MAX_LINKS = 40
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW


class FilesChanged(OSError):
    """What nbjobs keeps in a user's folder is not what it made: a link where a folder or
    file belongs, or a file where a folder belongs (or a pipe where a file belongs).

    Nothing was read or written through it. ``filename`` is the path relative to the
    user's folder (``.nbjobs/jobs``) or the job's folder (``log.txt``); ``str()`` is a
    sentence a message can embed: ``.nbjobs/jobs is a link, not a folder``.
    """

    def __init__(self, relative: str, what: str) -> None:
        code = errno.ELOOP if what.startswith("a link") else errno.ENOTDIR
        super().__init__(code, what, relative)

    def __str__(self) -> str:
        return f"{self.filename} is {self.strerror}"


class NotebookTooLarge(PathRefused):
    """The notebook has more bytes than the service takes (``size`` > ``limit``)."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"{path!r} has {size} bytes, more than the {limit} allowed")
        self.path, self.size, self.limit = path, size, limit


@dataclass(frozen=True)
class NotebookFile:
    """A notebook as :func:`read_notebook` found it."""

    #: where it really is: the user's folder joined with the names walked, links resolved
    path: Path
    #: every byte of it, read from the one descriptor that was checked
    data: bytes


#: what runs as a job: notebooks, and scripts (Python, shell)
JOB_SUFFIXES = (".ipynb", ".py", ".sh")


def read_notebook(
    folder: Path, path: str, *, limit: int, suffixes: tuple[str, ...] = (".ipynb",)
) -> NotebookFile:
    """Read the notebook ``path`` (relative to the user's ``folder``) once, safely: see
    :func:`open_notebook`, whose file this reads at once."""
    with open_notebook(folder, path, limit=limit, suffixes=suffixes) as opened:
        return opened.read()


class OpenNotebook:
    """A notebook opened by :func:`open_notebook`, not read yet: its ``size`` is known,
    so a caller can wait for room before it takes that many bytes into memory. Read it
    with :meth:`read`; close it (or use it in a ``with`` block)."""

    def __init__(self, fd: int, path: Path, size: int, shown: str, limit: int) -> None:
        self._fd: int | None = fd
        #: where it really is: the user's folder joined with the names walked
        self.path = path
        #: its size in bytes when it was opened
        self.size = size
        self._shown, self._limit = shown, limit

    def read(self) -> NotebookFile:
        """Every byte of it, from the descriptor that was checked, at most ``limit``
        (:class:`NotebookTooLarge` when it grew past them since it was opened)."""
        if self._fd is None:
            raise ValueError("the notebook was closed before it was read")
        data = _read_all(self._fd, self._limit + 1)
        if len(data) > self._limit:  # it grew since fstat
            raise NotebookTooLarge(self._shown, len(data), self._limit)
        return NotebookFile(self.path, data)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> OpenNotebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_notebook(
    folder: Path, path: str, *, limit: int, suffixes: tuple[str, ...] = (".ipynb",)
) -> OpenNotebook:
    """Open the notebook ``path`` (relative to the user's ``folder``) safely.

    The path is walked one name at a time from a descriptor of ``folder``, each name
    opened with ``O_NOFOLLOW``. A link on the way is resolved here, by reading it and
    walking its target from the descriptors already held, and only as long as it
    stays inside the folder: a link that leads out, ``..`` in the path the user gave,
    or a loop of links is :class:`PathRefused`. So a link swapped while this runs
    either leads to something of the user's or is refused; it can never make the
    service read another folder. The final name must be a regular file (a pipe, a
    folder or a device is refused without blocking on it); it is checked here and
    read later from the same descriptor, at most ``limit`` bytes
    (:class:`NotebookTooLarge` beyond them). Notebooks under ``.nbjobs/`` (nbjobs'
    own copies) are refused. Hard links are not links: a hard link to a file the user
    can open is theirs. ``suffixes`` are the kinds of file it may be (a script as
    well: :data:`JOB_SUFFIXES`).
    """
    if not path or "\x00" in path:
        raise PathRefused("give the notebook's path, relative to your home folder")
    relative = PurePosixPath(path.lstrip("/"))
    if ".." in relative.parts:
        raise PathRefused(
            f"{path!r} leaves your folder ('..' is not allowed); give a path inside it"
        )
    if relative.suffix not in suffixes:
        if suffixes == (".ipynb",):
            raise PathRefused(f"{path!r} is not a notebook (.ipynb)")
        raise PathRefused(
            f"{path!r} is not a notebook (.ipynb) or a script (.py, .sh); to run anything "
            "else, give a command (nbjobs submit --command '...')"
        )
    try:
        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:  # a new user's folder, not made yet
        raise PathRefused(f"{path!r} does not exist in your folder; save it first") from None
    with _opened(root):
        roots = (os.path.realpath(folder), os.path.abspath(folder))
        fd, names = _walk_beneath(root, roots, path, list(relative.parts))
    try:
        if names[:1] == [".nbjobs"]:
            raise PathRefused(
                "notebooks inside .nbjobs/ are nbjobs' own copies; submit the original"
            )
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{path!r} is not a file; give the path of a notebook")
        if info.st_size > limit:
            raise NotebookTooLarge(path, info.st_size, limit)
    except BaseException:
        os.close(fd)
        raise
    return OpenNotebook(fd, folder.joinpath(*names), info.st_size, path, limit)


def resolve_folder(folder: Path, path: str) -> Path:
    """The folder ``path`` names in the user's ``folder`` (``.`` is the folder itself),
    walked as :func:`read_notebook` walks: links only while they stay inside."""
    relative = PurePosixPath((path or ".").lstrip("/"))
    if "\x00" in path or ".." in relative.parts:
        raise PathRefused(f"{path!r} leaves your folder ('..' is not allowed)")
    parts = [p for p in relative.parts if p not in ("", ".")]
    if not parts:
        return folder
    try:
        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PathRefused(f"{path!r} does not exist in your folder") from None
    with _opened(root):
        roots = (os.path.realpath(folder), os.path.abspath(folder))
        fd, names = _walk_beneath(root, roots, path, parts)
        with _opened(fd):
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise PathRefused(f"{path!r} is not a folder; a command runs in a folder")
            if names[:1] == [".nbjobs"]:
                raise PathRefused("commands do not run inside .nbjobs/ (nbjobs' own files)")
    return folder.joinpath(*names)


def make_job_dir(job_dir: Path, files: Mapping[str, bytes]) -> None:
    """Make a new job folder with ``files`` (name: content) in it, or nothing at all.

    ``job_dir`` is ``<user's folder>/.nbjobs/jobs/<id>`` (:func:`job_folder`).
    ``.nbjobs`` and ``.nbjobs/jobs`` are made when missing; each is walked without
    following links, and a link or a file there is :class:`FilesChanged`. The job's
    folder must be new (:class:`FileExistsError` otherwise). Folders get
    :data:`FOLDER_MODE`, files :data:`FILE_MODE`, whatever the umask. A service
    running as root gives what it makes to the owner of the folder it is made in (the
    user's folder's owner, in the end), so that a job running as that user (a local
    job with ``run_as: user``, a job pod with the storage's uid) can use them.

    On any error (a full disk, a read-only folder) what was made of the job's folder
    is removed again and the :class:`OSError` raised, its ``filename`` relative to the
    user's folder.
    """
    base, names = _split_job_dir(job_dir)
    relative = "/".join(names)
    with _opened(os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)) as root:
        parent = _walk_folders(root, names[:-1], create=True)
        with _opened(parent):
            try:
                os.mkdir(names[-1], FOLDER_MODE, dir_fd=parent)
            except OSError as exc:
                exc.filename = relative
                raise
            try:
                with _opened(_open_folder_at(parent, names[-1], relative)) as folder:
                    os.fchmod(folder, FOLDER_MODE)  # whatever the umask took away
                    _give_to_owner_of(parent, folder)
                    for name, data in files.items():
                        try:
                            write_file_at(folder, name, data)
                        except OSError as exc:
                            if not isinstance(exc, FilesChanged):
                                exc.filename = f"{relative}/{name}"
                            raise
            except BaseException:
                with contextlib.suppress(OSError):
                    _remove_folder_at(parent, names[-1])
                raise


def open_job_dir(job_dir: Path) -> int:
    """A descriptor of an existing job folder, reached without following any link.

    ``job_dir`` is ``<user's folder>/.nbjobs/jobs/<id>``; the user's folder itself is
    the admin's and opened as it is, the three names below it are walked with
    ``O_NOFOLLOW``. Raises :class:`FilesChanged` for a link or a file on the way,
    :class:`FileNotFoundError` when a part is missing. The caller closes it.
    """
    base, names = _split_job_dir(job_dir)
    with _opened(os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)) as root:
        return _walk_folders(root, names, create=False)


@contextlib.contextmanager
def opened_job_dir(job_dir: Path) -> Iterator[int]:
    """:func:`open_job_dir` for a ``with`` block, which closes it."""
    with _opened(open_job_dir(job_dir)) as fd:
        yield fd


def open_in_job_dir(path: Path, flags: int) -> int:
    """Open the file ``path`` of a job's folder (its log, say) without following links.

    In a job folder (``<user's folder>/.nbjobs/jobs/<id>/<name>``) the folder is
    reached by :func:`open_job_dir`; any other folder (one given outside the service,
    as tests do) is opened as it is. The file itself is :func:`open_file_at`'s: never
    a link or a pipe. The caller closes the descriptor.
    """
    folder = path.parent
    if len(folder.parts) >= 4 and list(folder.parts[-3:-1]) == list(JOBS_DIR.parts):
        opened = open_job_dir(folder)
    else:
        opened = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    with _opened(opened):
        return open_file_at(opened, path.name, flags)


def remove_job_dir(job_dir: Path) -> None:
    """Remove a job folder nbjobs made and the files in it (a submit that failed late).

    Only plain files directly in it are removed, each without following links; a
    folder someone made inside stays, and so does the job folder then. A missing or
    changed job folder is left alone.
    """
    with contextlib.suppress(FileNotFoundError, FilesChanged):
        base, names = _split_job_dir(job_dir)
        with _opened(os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)) as root:
            parent = _walk_folders(root, names[:-1], create=False)
        with _opened(parent):
            _remove_folder_at(parent, names[-1])


def remove_from_job_dir(job_dir: Path, name: str) -> int:
    """Remove the file ``name`` from a job folder (its input, once the job has long
    ended), reached without following links; the bytes it freed (0: it was not there,
    or was not a plain file, or the folder changed)."""
    try:
        with opened_job_dir(job_dir) as folder:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                return 0
            os.unlink(name, dir_fd=folder)
            return info.st_size
    except (FileNotFoundError, FilesChanged, NotADirectoryError):
        return 0


def job_files_size(folder: Path) -> int:
    """The bytes of every plain file under the user's ``.nbjobs`` (job folders: inputs,
    logs, status, telemetry), walked without following any link; 0 when there is none."""
    try:
        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    with _opened(root):
        try:
            top = _walk_folders(root, [JOBS_DIR.parts[0]], create=False)
        except (FileNotFoundError, FilesChanged, NotADirectoryError):
            return 0
        return size_beneath(top, depth=4)


def open_file_at(folder: int, name: str, flags: int, mode: int = FILE_MODE) -> int:
    """Open the regular file ``name`` in the folder descriptor ``folder``, never through
    a link and never blocking (on a pipe planted there, say).

    ``flags`` as for :func:`os.open`; ``O_NOFOLLOW``, ``O_NONBLOCK`` and ``O_CLOEXEC``
    are added. A link, a pipe or a folder at ``name`` is :class:`FilesChanged`. A
    file made here (``O_CREAT``) gets exactly ``mode`` and, when the service runs as
    root, the owner of ``folder``; a file that was there keeps its mode and owner.
    """
    flags |= _NOFOLLOW | os.O_NONBLOCK
    created = bool(flags & os.O_CREAT)
    try:
        if created and not flags & os.O_EXCL:
            try:
                fd = os.open(name, flags | os.O_EXCL, mode, dir_fd=folder)
            except FileExistsError:
                created = False
                fd = os.open(name, flags & ~os.O_CREAT, dir_fd=folder)
        else:
            fd = os.open(name, flags, mode, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FilesChanged(name, "a link, not a file") from None
        if exc.errno == errno.ENXIO:  # a pipe nobody reads, opened for writing
            raise FilesChanged(name, "not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FilesChanged(name, "not a regular file")
        # O_NONBLOCK was for the open; a log handed to a runner should not carry it
        os.set_blocking(fd, True)
        if created:
            os.fchmod(fd, mode)  # exactly this, whatever the umask
            _give_to_owner_of(folder, fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file_at(folder: int, name: str, *, limit: int) -> bytes | None:
    """The bytes of the regular file ``name`` in ``folder``; None when there is none.

    Never through a link, never blocking on a pipe (:class:`FilesChanged` for
    both); more than ``limit`` bytes is :class:`OSError` (EFBIG).
    """
    try:
        fd = open_file_at(folder, name, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with _opened(fd):
        data = _read_all(fd, limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"more than {limit} bytes", name)
    return data


def write_file_at(folder: int, name: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Write ``data`` as the new file ``name`` in ``folder`` (``O_EXCL``: never over
    anything there, a link included); on a failure (a full disk) the file is removed."""
    fd = open_file_at(folder, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with _opened(fd):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)
        raise


@contextlib.contextmanager
def _opened(fd: int) -> Iterator[int]:
    """Close a descriptor when the block ends."""
    try:
        yield fd
    finally:
        os.close(fd)


def _split_job_dir(job_dir: Path) -> tuple[Path, list[str]]:
    """``<user's folder>/.nbjobs/jobs/<id>`` as the user's folder and the three names."""
    names = list(job_dir.parts[-3:])
    if len(job_dir.parts) < 4 or names[:2] != list(JOBS_DIR.parts):
        raise ValueError(f"{job_dir} is not a job folder (<user folder>/{JOBS_DIR}/<id>)")
    return job_dir.parents[2], names


def _walk_folders(root: int, names: list[str], *, create: bool) -> int:
    """Open ``names`` one below the other from ``root``, never through a link; with
    ``create``, make the missing ones. Returns the last one's descriptor."""
    fd = os.dup(root)
    for depth, name in enumerate(names):
        relative = "/".join(names[: depth + 1])
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    _make_folder_at(fd, name, relative)
            child = _open_folder_at(fd, name, relative)
        except OSError as exc:
            os.close(fd)
            if not isinstance(exc, FilesChanged):
                exc.filename = relative
            raise
        os.close(fd)
        fd = child
    return fd


def _open_folder_at(parent: int, name: str, relative: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except NotADirectoryError:
        # O_DIRECTORY | O_NOFOLLOW says ENOTDIR for a link as for a file: which is it?
        try:
            os.readlink(name, dir_fd=parent)
        except OSError:
            raise FilesChanged(relative, "not a folder") from None
        raise FilesChanged(relative, "a link, not a folder") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FilesChanged(relative, "a link, not a folder") from None
        raise


def _make_folder_at(parent: int, name: str, relative: str) -> None:
    """Make the folder ``name`` in ``parent``: :data:`FOLDER_MODE`, the parent's owner."""
    os.mkdir(name, FOLDER_MODE, dir_fd=parent)
    with _opened(_open_folder_at(parent, name, relative)) as made:
        os.fchmod(made, FOLDER_MODE)  # whatever the umask took away
        _give_to_owner_of(parent, made)


def _give_to_owner_of(parent: int, fd: int) -> None:
    """As root, hand what was just made to the owner of the folder it was made in."""
    if os.geteuid() != 0:
        return
    owner = os.fstat(parent)
    if owner.st_uid != 0 or owner.st_gid != 0:
        os.fchown(fd, owner.st_uid, owner.st_gid)


def _remove_folder_at(parent: int, name: str) -> None:
    with _opened(_open_folder_at(parent, name, name)) as folder:
        for entry in os.listdir(folder):
            with contextlib.suppress(IsADirectoryError, PermissionError, FileNotFoundError):
                os.unlink(entry, dir_fd=folder)
    os.rmdir(name, dir_fd=parent)


def _read_all(fd: int, most: int) -> bytes:
    """Up to ``most`` bytes from ``fd``, from where it stands to its end.

    One read first, into one buffer: a regular file comes back whole from it, and only
    the pages read are in memory (a notebook is held once, not once more as chunks)."""
    first = os.read(fd, most)
    if not first or len(first) == most:
        return first
    chunks = [first]
    left = most - len(first)
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _walk_beneath(
    root: int, roots: tuple[str, ...], path: str, parts: list[str]
) -> tuple[int, list[str]]:
    """Open the file at ``parts`` below ``root``, resolving links only while they stay
    beneath it; returns its descriptor and the names walked (links resolved).

    ``roots`` are the absolute paths of ``root`` that a link may name (the user's
    folder as configured and as resolved).
    """
    outside = PathRefused(
        f"{path!r} leads outside your folder (through a link); "
        "copy the notebook into your folder and submit that copy"
    )
    missing = PathRefused(f"{path!r} does not exist in your folder; save it first")
    stack: list[tuple[int, str]] = [(os.dup(root), "")]  # the folders walked, and their names
    pending = [p for p in parts if p not in ("", ".")]
    turns = 0  # links followed, and looks again at a name that changed under us
    try:
        while pending:
            name = pending.pop(0)
            if name == "..":
                if len(stack) == 1:
                    raise outside
                os.close(stack.pop()[0])
                continue
            here = stack[-1][0]
            last = not pending
            flags = (os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW) if last else _DIR_FLAGS
            try:
                fd = os.open(name, flags, dir_fd=here)
            except FileNotFoundError:
                raise missing from None
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise PathRefused(f"{path!r} cannot be read: {exc.strerror}") from None
                turns += 1
                if turns > MAX_LINKS:
                    raise PathRefused(
                        f"{path!r} goes through too many links (a loop?); "
                        "give the notebook's real path"
                    ) from None
                try:
                    target = os.readlink(name, dir_fd=here)
                except OSError:
                    # Not a link (now): a file where a folder belongs, or a link swapped
                    # back for what it replaced: look again.
                    if not last and _is_plain_file_at(here, name):
                        raise missing from None
                    pending.insert(0, name)
                    continue
                if target.startswith("/"):
                    inside = _beneath(PurePosixPath(target), roots)
                    if inside is None:
                        raise outside from None
                    while len(stack) > 1:  # walk again from the user's folder
                        os.close(stack.pop()[0])
                    target = str(inside)
                pending[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
            if last:
                return fd, [n for _, n in stack[1:]] + [name]
            stack.append((fd, name))
        raise missing  # the path named the folder itself
    finally:
        for folder, _ in stack:
            os.close(folder)


def _beneath(target: PurePosixPath, roots: tuple[str, ...]) -> PurePosixPath | None:
    """``target`` relative to the first of ``roots`` it lies in (by name), or None."""
    for root in roots:
        if target.is_relative_to(root):
            return target.relative_to(root)
    return None


def _is_plain_file_at(folder: int, name: str) -> bool:
    """Whether ``name`` in ``folder`` is there and neither a folder nor a link."""
    try:
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return False
    return not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
