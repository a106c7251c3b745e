"""Which filesystem a path lives on, so the state database can pick a journal that is safe there.

SQLite's WAL keeps its index in a memory-mapped `-shm` file: every process using the database
must share that memory, i.e. run on one host. A fleet whose home is on a network filesystem
(processes on several hosts) must use the rollback journal instead, which relies only on the
file locks the network filesystem provides (https://www.sqlite.org/wal.html, "WAL does not work
over a network filesystem"). A local filesystem can only be shared by processes of one host, so
WAL stays the default there.
"""

from __future__ import annotations

import os
from pathlib import Path

# Filesystems whose files other hosts may open at the same time.
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "ceph", "glusterfs", "lustre", "gpfs", "9p",
    "ocfs2", "gfs2", "beegfs", "orangefs", "fuse.sshfs", "fuse.glusterfs", "fuse.cephfs", "fuse.s3fs",
    "fuse.gcsfuse", "fuse.juicefs", "fuse.rclone", "fuse.efs",
})
MOUNTINFO = Path("/proc/self/mountinfo")


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040 …)."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the filesystem `path` is on (the longest mount point containing it), or None when
    the mount table cannot be read (not Linux)."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text()
        except OSError:
            return None
    target = os.path.realpath(path)
    best, best_type = "", None
    for line in mountinfo.splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or not tail:
            continue
        mount_point = _unescape(fields[4])
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):  # later mounts over the same point win
            best, best_type = mount_point, tail[0]
    return best_type


def on_network_filesystem(path: Path, mountinfo: str | None = None) -> str | None:
    """The network filesystem's type when `path` is on one, else None."""
    kind = filesystem_type(path, mountinfo)
    return kind if kind in NETWORK_FILESYSTEMS else None


__all__ = ["NETWORK_FILESYSTEMS", "filesystem_type", "on_network_filesystem"]
