"""File-level durability under the episode store's commit protocol.

A commit writes chunks through :class:`DurableLocalStore` (zarr writes each chunk and
``zarr.json`` to a temporary file and renames it, so a chunk is either the old or the new
file, never torn), fsyncs every written file and directory (:meth:`DurableLocalStore.sync`),
then publishes the commit record with :func:`write_root_attrs` (an atomic replace of the root
``zarr.json``, fsynced). :func:`lock_writer` keeps to one writer at a time.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from zarr.storage import LocalStore

from robotrl.datasets.store_layout import EpisodeStoreError


class DurableLocalStore(LocalStore):
    """A zarr LocalStore that remembers which files it wrote so a commit can fsync them."""

    def __init__(self, root: Path | str, *, read_only: bool = False) -> None:
        super().__init__(root, read_only=read_only)
        self.dirty: set[Path] = set()

    def set_sync(self, key: str, value: Any) -> None:
        super().set_sync(key, value)
        self.dirty.add(self.root / key)

    async def _set(self, key: str, value: Any, exclusive: bool = False) -> None:
        await super()._set(key, value, exclusive=exclusive)
        self.dirty.add(self.root / key)

    def sync(self) -> None:
        """fsync every file written since the last call, then the directories holding them."""
        dirs: set[Path] = set()
        for path in self.dirty:
            fsync_path(path)
            parent = path.parent
            while parent != self.root.parent and parent not in dirs:
                dirs.add(parent)
                parent = parent.parent
        for d in dirs:
            fsync_path(d)
        self.dirty.clear()


def fsync_path(path: Path) -> None:
    """fsync a file or directory; a path deleted in the meantime is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # deleted later in the same commit (a shrunk array's chunk)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_root_attrs(root: Path, attrs: dict[str, Any]) -> None:
    """Durably and atomically replace the root group's attributes (the commit point)."""
    meta_path = root / "zarr.json"
    doc = json.loads(meta_path.read_text())
    doc["attributes"] = attrs
    tmp = root / f"zarr.json.{os.getpid()}.partial"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, meta_path)
    fsync_path(root)


def lock_writer(root: Path) -> int:
    """Take the store's writer lock (``flock`` on the root directory, released by the kernel
    when the process dies); returns the fd to close. Raises :class:`EpisodeStoreError` when
    another process holds it."""
    fd = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise EpisodeStoreError(f"{root} is open for writing by another process") from None
    return fd
