"""The state database's journal follows the filesystem: WAL where only one host can reach the file,
the rollback journal on a network filesystem (a fleet over several hosts, docs/fleet.md)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from clawgate.agent.bus import InboundMessage, SqliteBus
from clawgate.agent.core import filesystems, statedb
from clawgate.agent.core.filesystems import filesystem_type, on_network_filesystem
from clawgate.agent.core.statedb import durable_file, open_state_db

# A real mount table's shape: the share at /srv/clawgate (NFSv4), a local disk under it, a path with a space.
MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /srv/clawgate rw,relatime shared:20 - nfs4 10.0.0.5:/export rw,vers=4.2
31 30 8:17 / /srv/clawgate/local rw,relatime shared:21 - xfs /dev/sdb1 rw
32 22 0:41 / /mnt/my\\040share rw,relatime shared:22 - cifs //nas/share rw
"""


def test_the_longest_mount_point_containing_the_path_decides(tmp_path: Path) -> None:
    assert filesystem_type(Path("/srv/clawgate/state"), MOUNTINFO) == "nfs4"
    assert filesystem_type(Path("/srv/clawgate/local/state"), MOUNTINFO) == "xfs"
    assert filesystem_type(Path("/srv/clawgate-other"), MOUNTINFO) == "ext4"  # a prefix, not a parent
    assert filesystem_type(Path("/mnt/my share/home"), MOUNTINFO) == "cifs"  # escaped space
    assert on_network_filesystem(Path("/srv/clawgate/state"), MOUNTINFO) == "nfs4"
    assert on_network_filesystem(Path("/srv/clawgate/local"), MOUNTINFO) is None
    assert on_network_filesystem(Path("/home/user"), MOUNTINFO) is None
    assert on_network_filesystem(tmp_path) is None  # this machine's own table: a local disk


def _write_rows(path: str, first: int) -> None:
    bus = SqliteBus(open_state_db(Path(path), fsync=False))
    for n in range(first, first + 200):
        bus.publish_inbound(InboundMessage(id=f"m{n}", channel="cli", chat_id="c", sender_id="u", text=str(n), session_key="cli:c"))
    bus.close()


def test_on_a_network_filesystem_the_rollback_journal_serves_several_processes(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    db_path = tmp_path / "state" / "clawgate.db"
    local = open_state_db(db_path)
    assert local.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert durable_file(local) == f"{db_path}-wal"
    local.close()

    monkeypatch.setattr(filesystems, "MOUNTINFO", tmp_path / "mountinfo")
    (tmp_path / "mountinfo").write_text(f"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                                        f"30 22 0:40 / {tmp_path} rw - nfs4 10.0.0.5:/export rw\n")
    db = open_state_db(db_path)  # the same file, now found on an NFS share: WAL is switched off
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert durable_file(db) == str(db_path)  # commits land in the file itself: that is what is fsynced
    db.close()
    assert not Path(f"{db_path}-wal").exists() and not Path(f"{db_path}-shm").exists()

    # two writers at once (the fork inherits the patched mount table), every row kept
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_write_rows, args=(str(db_path), first)) for first in (0, 1000)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
        assert w.exitcode == 0
    check = sqlite3.connect(db_path)
    assert check.execute("SELECT count(*) FROM inbox").fetchone()[0] == 400
    assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    check.close()
    assert statedb.journal_mode(db_path) == "DELETE"
