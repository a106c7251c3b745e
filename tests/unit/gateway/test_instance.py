"""The single-instance lock (gateway/instance.py) in one process: flock conflicts between open
file descriptions, so two InstanceLock objects behave like two processes."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from clawgate.config.paths import Paths
from clawgate.gateway.instance import CLI, GATEWAY, AlreadyRunning, Holder, InstanceLock, holder_pid, remove_pid_file


def test_a_held_gateway_lock_refuses_a_second_at_once_and_names_the_holder(tmp_path: Path, monkeypatch) -> None:
    paths = Paths(tmp_path)

    def waited(seconds: float) -> None:
        raise AssertionError(f"a live gateway was waited for ({seconds} s)")

    with InstanceLock(paths).acquire(GATEWAY) as first:
        assert first.holder() == Holder(os.getpid(), GATEWAY) and holder_pid(paths) == os.getpid()
        with monkeypatch.context() as patch, pytest.raises(AlreadyRunning) as info:
            patch.setattr(time, "sleep", waited)  # refused without one pause, though 30 s are allowed
            InstanceLock(paths).acquire(GATEWAY, wait=30)
        assert info.value.pid == os.getpid() and "a gateway (pid" in str(info.value)
    assert InstanceLock(paths).holder() is None and holder_pid(paths) is None
    assert (paths.state / "daemon.lock").read_text() == ""  # no pid left to be mistaken for a holder


def test_a_cli_holder_is_waited_for_then_given_up_on(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    edit = InstanceLock(paths).acquire(CLI, wait=0)
    assert holder_pid(paths) is None  # an offline edit is not a running daemon
    threading.Timer(0.3, edit.release).start()
    daemon = InstanceLock(paths).acquire(GATEWAY, wait=20)
    assert daemon.holder() == Holder(os.getpid(), GATEWAY)
    daemon.release()
    with InstanceLock(paths).acquire(CLI, wait=0):
        with pytest.raises(AlreadyRunning) as info:
            InstanceLock(paths).acquire(GATEWAY, wait=0.2)
        assert info.value.holder.role == CLI


def test_stale_lock_text_from_a_dead_holder_counts_as_nobody(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    paths.ensure()
    (paths.state / "daemon.lock").write_text(f"{os.getpid()} gateway\n")  # text, but no flock
    assert InstanceLock(paths).holder() is None
    with InstanceLock(paths).acquire(GATEWAY, wait=0):
        pass


def test_the_pid_file_is_removed_only_by_its_owner(tmp_path: Path) -> None:
    pid_file = tmp_path / "gateway.pid"
    pid_file.write_text("999999")
    assert remove_pid_file(pid_file) is False and pid_file.exists()
    pid_file.write_text(str(os.getpid()))
    assert remove_pid_file(pid_file) is True and not pid_file.exists()
    assert remove_pid_file(pid_file) is False  # missing: nothing to do
