"""workspace/fdpath.py: paths pinned to folder descriptors, as the file tools and checkpoints use them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from clawgate.workspace.fdpath import PathOutsideWorkspace, locate, open_regular, read_all, walk, write_atomic


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "a/b").mkdir(parents=True)
    (root / "a/b/f.txt").write_text("inner")
    (tmp_path / "secret.txt").write_text("SECRET")
    os.symlink("a/b", root / "rel-link")
    os.symlink(root / "a", root / "abs-link")
    os.symlink("rel-link/f.txt", root / "file-link")
    os.symlink("../secret.txt", root / "out-rel")
    os.symlink(tmp_path, root / "out-abs")
    return root


@pytest.mark.parametrize("path", ["a/b/f.txt", "rel-link/f.txt", "abs-link/b/f.txt", "file-link",
                                  "rel-link/../b/f.txt", "a/b/../b/./f.txt"])
def test_links_and_dots_inside_the_workspace_are_followed(ws: Path, path: str) -> None:
    with locate(ws, path) as loc:
        assert loc.relative == "a/b/f.txt" and read_all(loc) == b"inner"
    with locate(ws, str(ws / path)) as loc:  # absolute inside the workspace: the same
        assert loc.relative == "a/b/f.txt"


@pytest.mark.parametrize("path", ["out-rel", "out-abs/secret.txt", "../secret.txt", "a/../../secret.txt",
                                  "/etc/passwd", "rel-link/../../../secret.txt"])
def test_a_path_or_link_leading_out_is_refused_in_one_line(ws: Path, path: str) -> None:
    with pytest.raises(PathOutsideWorkspace) as info:
        locate(ws, path).close()
    assert "outside the workspace" in str(info.value) and "\n" not in str(info.value)


def test_without_following_links_a_link_on_the_way_is_an_error(ws: Path) -> None:
    with pytest.raises(OSError) as info:
        locate(ws, "rel-link/f.txt", follow_links=False)
    assert info.value.errno == 40  # ELOOP
    with locate(ws, "file-link", follow_links=False) as loc:  # the link itself, for the checkpoint store
        assert loc.name == "file-link" and os.readlink(loc.name, dir_fd=loc.folder) == "rel-link/f.txt"


def test_a_write_replaces_a_link_at_the_name_instead_of_writing_through_it(ws: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "secret.txt", ws / "a/b/planted")
    folder = os.open(ws / "a/b", os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_atomic(folder, "planted", b"new", mode=None)
    finally:
        os.close(folder)
    assert (tmp_path / "secret.txt").read_text() == "SECRET"
    assert not (ws / "a/b/planted").is_symlink() and (ws / "a/b/planted").read_bytes() == b"new"
    assert sorted(os.listdir(ws / "a/b")) == ["f.txt", "planted"]  # no temp file left


def test_missing_folders_are_made_only_when_asked(ws: Path) -> None:
    with pytest.raises(FileNotFoundError):
        locate(ws, "new/deeper/x.txt")
    with locate(ws, "new/deeper/x.txt", create_folders=True) as loc:
        write_atomic(loc.folder, loc.name, b"x")
    assert (ws / "new/deeper/x.txt").read_bytes() == b"x"


def test_a_fifo_is_refused_without_hanging_the_reader(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            with locate(ws, "pipe") as loc:
                open_regular(loc)
        except OSError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=120)
    assert not reader.is_alive() and outcome and "not a regular file" in str(outcome[0])


def test_walk_lists_files_and_links_without_following_links(ws: Path) -> None:
    found = {rel: link for rel, _, link in walk(ws)}
    assert found == {"a/b/f.txt": None, "rel-link": "a/b", "abs-link": str(ws / "a"),
                     "file-link": "rel-link/f.txt", "out-rel": "../secret.txt", "out-abs": str(ws.parent)}
