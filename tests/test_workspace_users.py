"""Which root each person gets (workspace/users.py): names that cannot collide or climb out."""

from __future__ import annotations

import stat
from pathlib import Path

from workspace.guard import WorkspaceGuard
from workspace.users import OWNER, Workspaces, folder_name


def test_folder_names_are_distinct_safe_and_bounded() -> None:
    keys = ["telegram:1", "telegram_1", "telegram:1/..", "..", "gateway:" + "x" * 300, "telegram:é", "telegram:e"]
    names = [folder_name(key) for key in keys]
    assert len(set(names)) == len(keys)
    for name in names:
        assert "/" not in name and ":" not in name and name not in (".", "..") and len(name) <= 100


def test_each_guest_gets_a_root_and_a_home_apart_from_the_owners(tmp_path: Path) -> None:
    owner = WorkspaceGuard(tmp_path / "workspace")
    spaces = Workspaces(owner, tmp_path / "workspaces", tmp_path / "state/exec")
    guest = spaces.guard("telegram:555")
    assert spaces.guard(OWNER) is owner and spaces.guard("telegram:555") is guest
    assert guest.root.parent == (tmp_path / "workspaces").resolve() and guest.root != owner.root
    assert owner.root not in guest.root.parents and guest.root not in owner.root.parents
    home, mine = spaces.scratch("telegram:555"), spaces.scratch(OWNER)
    assert home != mine and (home / "home").is_dir() and (home / "tmp").is_dir()
    for folder in (guest.root, home, mine):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert owner.root not in folder.parents and guest.root not in folder.parents
