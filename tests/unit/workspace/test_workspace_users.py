"""Which root each person gets (workspace/users.py): names that cannot collide or climb out."""

from __future__ import annotations

import stat
from pathlib import Path

from clawgate.workspace.guard import WorkspaceGuard
from clawgate.workspace.users import OWNER, Workspaces, folder_name


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


def test_each_agent_but_the_default_has_its_own_workspaces_and_a_sub_agent_its_parents(tmp_path: Path) -> None:
    owner = WorkspaceGuard(tmp_path / "workspace")

    def folders(ident: str) -> tuple[Path, Path, Path]:
        return tmp_path / "agents" / ident / "workspace", tmp_path / "agents" / ident / "workspaces", tmp_path / "x" / ident

    spaces = Workspaces(owner, tmp_path / "workspaces", tmp_path / "state/exec", agents=folders)
    work = spaces.of("agent:work:telegram:42")
    assert spaces.of("telegram:42") is spaces and spaces.of("main") is spaces  # the default agent's keys are plain
    assert work is spaces.of("agent:work:main") is spaces.of("sub-0a1b@agent:work:main") is spaces.agent("work")
    assert work.owner.root == (tmp_path / "agents/work/workspace").resolve() != owner.root
    guest = work.guard("telegram:555")
    assert guest.root.parent == (tmp_path / "agents/work/workspaces").resolve()
    assert guest.root != spaces.guard("telegram:555").root  # a guest of one agent is not the same folder in another
    assert spaces.of("agent:other:main").owner.root not in (work.owner.root, owner.root)
    single = Workspaces(owner, tmp_path / "workspaces", tmp_path / "state/exec")
    assert single.of("agent:work:main") is single  # one agent: every session works in its workspace


def test_undo_puts_back_only_the_sessions_own_files_in_the_callers_own_workspace(tmp_path: Path) -> None:
    from clawgate.agent.commands import CommandRouter
    from tests.unit.agent.checkpoints.test_checkpoints import Rig

    rig = Rig(tmp_path)
    guest = tmp_path / "workspaces/telegram_5"
    guest.mkdir(parents=True)
    rig.service.roots = lambda user: rig.workspace if user == OWNER else guest
    rig.session("s").append("user", text="do it", inbound_id="in1", channel="telegram", chat_id="5", sender_id="5",
                            owner=False, user="telegram:5")
    task = rig.plan("s", 2)
    for i in (1, 2):
        rig.call("s", "write_file", {"path": f"f{i}.txt", "content": str(i)}, "created",
                 effect=lambda i=i: (guest / f"f{i}.txt").write_text(str(i)))

        def complete(i: int = i) -> None:
            task.steps[i - 1].status, task.steps[i - 1].verification = "done", "read back"
            rig.tasks.save(task)
        rig.call("s", "task", {"action": "complete", "step": i, "verification": "read back"}, "done", effect=complete)
    (rig.workspace / "owner.txt").write_text("the owner's, written meanwhile")
    (guest / "other.txt").write_text("not written by this session's file tools")
    router = CommandRouter(agent_name="t", sessions=None, tasks=None, status=None,  # type: ignore[arg-type]
                           checkpoints=rig.service)
    assert "another person's workspace" in (router.handle("undo", "s", "1", user="telegram:9") or "")
    assert "another person's workspace" in (router.handle("undo", "s", "1", user=OWNER) or "")
    assert (guest / "f2.txt").exists()
    reply = router.handle("undo", "s", "1", user="telegram:5") or ""
    assert reply.startswith("Went back 1 step(s)") and "1 file(s) restored" in reply, reply
    assert not (guest / "f2.txt").exists() and (guest / "f1.txt").exists() and (guest / "other.txt").exists()
    assert (rig.workspace / "owner.txt").exists() and not (rig.workspace / "f1.txt").exists()


def test_a_guests_undo_in_a_shared_conversation_puts_back_their_files_but_never_rewinds_the_talk(
        tmp_path: Path) -> None:
    """A group the owner and a guest share: the guest's /undo restores the guest's own files; the conversation,
    which holds everyone's messages, is the owner's to rewind."""
    from clawgate.agent.commands import CommandRouter
    from tests.unit.agent.checkpoints.test_checkpoints import Rig

    rig = Rig(tmp_path)
    guest = tmp_path / "workspaces/telegram_5"
    guest.mkdir(parents=True)
    rig.service.roots = lambda user: rig.workspace if user == OWNER else guest
    rig.session("g").append("user", text="do it", inbound_id="in1", channel="telegram", chat_id="-9", sender_id="5",
                            owner=False, user="telegram:5")
    task = rig.plan("g", 2)
    for i in (1, 2):
        rig.call("g", "write_file", {"path": f"f{i}.txt", "content": str(i)}, "created",
                 effect=lambda i=i: (guest / f"f{i}.txt").write_text(str(i)))

        def complete(i: int = i) -> None:
            task.steps[i - 1].status, task.steps[i - 1].verification = "done", "read back"
            rig.tasks.save(task)
        rig.call("g", "task", {"action": "complete", "step": i, "verification": "read back"}, "done", effect=complete)
    rig.session("g").append("user", text="the owner speaks after it", inbound_id="in2", channel="telegram",
                            chat_id="-9", sender_id="1", owner=True, user=OWNER)
    records = len(rig.session("g").records)
    router = CommandRouter(agent_name="t", sessions=None, tasks=None, status=None,  # type: ignore[arg-type]
                           checkpoints=rig.service)
    reply = router.handle("undo", "g", "1", user="telegram:5", shared=True) or ""
    assert reply.startswith("Put your files back 1 step(s)") and "only the owner rewinds it" in reply, reply
    assert not (guest / "f2.txt").exists() and (guest / "f1.txt").exists(), reply
    assert len(rig.session("g").records) >= records  # nothing of the conversation was cut
    assert any(r.get("text") == "the owner speaks after it" for r in rig.session("g").records)


def test_an_explicit_restore_puts_back_only_what_the_session_changed(tmp_path: Path) -> None:
    """`checkpoints.restore` (gateway, CLI, web page) in the owner's shared workspace: the session's
    own write goes back, while a file another session wrote after the point stays."""
    from tests.unit.agent.checkpoints.test_checkpoints import Rig

    rig = Rig(tmp_path)
    rig.user("s", "write a file")
    point = rig.service.store.lineage("s")[0]
    rig.call("s", "write_file", {"path": "mine.txt", "content": "x"}, "created",
             effect=lambda: (rig.workspace / "mine.txt").write_text("x"))
    (rig.workspace / "other-session.txt").write_text("written by another session meanwhile")
    result = rig.service.restore(point.id, "files", confirm=True)
    assert result["restored"], result
    assert not (rig.workspace / "mine.txt").exists()
    assert (rig.workspace / "other-session.txt").read_text() == "written by another session meanwhile"


def test_a_guests_tasks_in_a_shared_conversation_are_their_own() -> None:
    """/tasks in a group: a guest lists the tasks their runs planned, never the owner's goals and steps; the
    owner, and a person alone in a private chat, list the conversation's."""
    from clawgate.agent.commands import CommandRouter
    from clawgate.agent.tasks.store import Task

    owners = Task(id="t_owner", session_key="g", goal="owner-goal-5d2", user=OWNER)
    guests = Task(id="t_guest", session_key="g", goal="guest-goal-81a", user="telegram:5")
    older = Task(id="t_old", session_key="g", goal="older-goal-3e0")  # planned before tasks had a person: the owner's

    class Tasks:
        def list(self, *, session: str | None = None, include_finished: bool = False) -> list[Task]:
            return [owners, guests, older]

    router = CommandRouter(agent_name="t", sessions=None, tasks=Tasks(), status=None)  # type: ignore[arg-type]
    guest = router.handle("tasks", "g", user="telegram:5", shared=True) or ""
    assert "guest-goal-81a" in guest and "owner-goal-5d2" not in guest and "older-goal-3e0" not in guest, guest
    owner = router.handle("tasks", "g", user=OWNER, shared=True) or ""
    assert all(goal in owner for goal in ("owner-goal-5d2", "guest-goal-81a", "older-goal-3e0")), owner
    alone = router.handle("tasks", "g", user="telegram:5", shared=False) or ""
    assert "owner-goal-5d2" in alone  # a private chat is one person's conversation: nothing to hide there
    nobody = router.handle("tasks", "g", user="telegram:9", shared=True) or ""
    assert nobody == "You have no active tasks in this chat."
