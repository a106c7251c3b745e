"""The background job index shared by a fleet's processes: no process overwrites another's entries."""

from __future__ import annotations

import json
import time
from pathlib import Path

from clawgate.agent.jobs.background_index import Entry, Index


def _entry(job_id: str, session: str) -> Entry:
    return Entry(id=job_id, session=session, kind="exec", summary="make", sender="owner", owner=True, deliver=None,
                 started=time.time())


def _on_disk(path: Path) -> dict[str, str]:
    return {k: v["state"] for k, v in json.loads(path.read_text())["jobs"].items()}


def test_two_processes_sharing_the_index_keep_each_others_entries_and_number_jobs_in_one_sequence(
        tmp_path: Path) -> None:
    path = tmp_path / "background.json"
    a, b = Index.load(path, fsync=False), Index.load(path, fsync=False)
    a.share()
    b.share()
    first, second = a.new_id(), b.new_id()
    assert (first, second) == ("bg-1", "bg-2")  # one counter across the processes
    a.jobs[first] = _entry(first, "telegram:1")
    a.save()
    b.jobs[second] = _entry(second, "telegram:2")
    b.save()  # b never read a's entry, and does not lose it
    assert _on_disk(path) == {"bg-1": "running", "bg-2": "running"}
    a.jobs[first].state = "ended"
    a.save()
    assert _on_disk(path) == {"bg-1": "ended", "bg-2": "running"}
    b.drop(second)
    b.save()
    assert _on_disk(path) == {"bg-1": "ended"}


def test_a_partition_given_up_leaves_its_entries_for_the_next_holder(tmp_path: Path) -> None:
    path = tmp_path / "background.json"
    a, b = Index.load(path, fsync=False), Index.load(path, fsync=False)
    a.share()
    b.share()
    job = a.new_id()
    a.jobs[job] = _entry(job, "telegram:1")
    a.save()
    [released] = a.release(lambda session: session == "telegram:1")
    assert released.id == job and a.jobs == {}
    a.save()  # a forgets it without removing it
    assert _on_disk(path) == {job: "running"}
    b.take(lambda session: session == "telegram:2")
    assert b.jobs == {}  # not its sessions
    b.take(lambda session: session == "telegram:1")
    assert list(b.jobs) == [job] and b.jobs[job].session == "telegram:1"


def test_alone_the_index_is_read_whole_and_written_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "background.json"
    index = Index.load(path, fsync=False)
    job = index.new_id()
    index.jobs[job] = _entry(job, "main")
    index.save()
    again = Index.load(path, fsync=False)
    assert list(again.jobs) == [job] and again.new_id() == "bg-2"
    again.drop(job)
    again.save()
    assert _on_disk(path) == {}
