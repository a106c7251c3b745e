"""What one person's run sees of a conversation several people share (a group, a channel, a thread).

The session log of a shared conversation holds every person's runs. The rule, in this one place:
a person's run sees what everyone in the conversation saw — the people's messages and the answers
that were posted — plus its own work (its tool calls and results, notes, check turns). Another
person's tool calls, tool results, mid-run notes and unposted text are never in it; nor is a
consolidation summary made from them. Everything the model is shown is projected through here:
the request (context/builder.py), compaction (the view it compacts), consolidation (a shared
session is summarised from the common view), the supervision's spans and the memory tools'
reading of transcripts.

Who a record belongs to is read from the log itself: runs of one session never interleave (one
lane per session), so every record belongs to the run opened by the last user turn that carried
an inbound id, and that turn records whose run it is (`user`: workspace/users.py's key, OWNER for
the owner). A conversation only one person ever spoke in projects exactly as the whole log, so the
single-person path (and its prompt cache) is untouched.
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from clawgate.workspace.users import OWNER

from ..session import Record, Session

# The person of a run nobody owns (records before the first run); also the viewer of the common view.
NOBODY: str | None = None
EVERYONE = "everyone"  # a consolidated record made from the common view: its summary is for all
_TEXT_ONLY = ("text",)


def record_person(record: Record) -> str:
    """Whose run a run-opening user turn starts: its `user` (the loop writes it), else, in a log older
    than per-person workspaces, the owner or the sender on its channel."""
    user = record.get("user")
    if isinstance(user, str):
        return user
    if record.get("owner") is True:
        return OWNER
    return f"{record.get('channel')}:{record.get('sender_id')}"


def opens_run(record: Record) -> bool:
    """A user turn a message started (check turns, drift briefs and notes continue a run)."""
    return record.get("kind") == "user" and bool(record.get("inbound_id"))


def persons(records: Iterable[Record]) -> Iterator[str | None]:
    """For each record, the person of the run it belongs to (NOBODY before the first run)."""
    current: str | None = NOBODY
    for record in records:
        if opens_run(record):
            current = record_person(record)
        yield current


def own_records(session: Session, start: int, person: str | None) -> list[Record]:
    """records[start:] that belong to `person`'s runs (and to no run): what drift control and the completeness
    check may read back of a span, so their prompts and briefs never carry another person's work."""
    records = session.records
    current: str | None = NOBODY
    for index in range(min(start, len(records)) - 1, -1, -1):
        if opens_run(records[index]):
            current = record_person(records[index])
            break
    out: list[Record] = []
    for record in records[start:]:
        if opens_run(record):
            current = record_person(record)
        if current is NOBODY or current == person:
            out.append(record)
    return out


def opening_record(session: Session, index: int) -> Record | None:
    """The user turn that opened the run session.records[index] belongs to (None: before any run)."""
    for position in range(min(index, len(session.records) - 1), -1, -1):
        if opens_run(session.records[position]):
            return session.records[position]
    return None


def person_at(session: Session, index: int) -> str | None:
    """The person of the run that session.records[index] belongs to (NOBODY: before any run)."""
    opening = opening_record(session, index)
    return NOBODY if opening is None else record_person(opening)


def run_person(session: Session) -> str | None:
    """The person of the session's latest run: the run being answered (NOBODY: no run yet)."""
    for record in reversed(session.records):
        if opens_run(record):
            return record_person(record)
    return NOBODY


def is_shared(session: Session) -> bool:
    """Whether more than one person has had a run in this session."""
    return len(_people(session).seen) > 1


def sees_all(session: Session, viewer: str | None) -> bool:
    """The viewer may see the whole log: nobody else ever had a run in it."""
    seen = _people(session).seen
    return viewer is not NOBODY and seen <= {viewer}


def visible_records(records: list[Record], viewer: str | None) -> list[Record]:
    """The records `viewer` may read back from a transcript (memory_search / memory_get of a guest):
    their own runs whole; of everyone else's, the person's message and the answer that was posted."""
    out: list[Record] = []
    foreign_answer: Record | None = None
    for record, person in zip(records, persons(records)):
        if opens_run(record) and foreign_answer is not None:
            out.append(foreign_answer)
            foreign_answer = None
        if person is NOBODY or person == viewer:
            out.append(record)
        elif opens_run(record):
            out.append(_foreign_turn(record))
        elif record.get("kind") == "assistant":
            foreign_answer = _posted_answer(record)
    if foreign_answer is not None:
        out.append(foreign_answer)
    return out


def view_for(session: Session, viewer: str | None) -> Session:
    """The session as `viewer`'s run sees it: the session itself when nobody else spoke in it, else a
    projection kept up to date incrementally (per session and viewer) — same messages API, so the
    compactor and the builder read it like a session."""
    if sees_all(session, viewer):
        return session
    # kept on the session itself (a view refers to its session: a weak-keyed table would never let go of it)
    views: dict[str | None, PersonView] = session.__dict__.setdefault("_person_views", {})
    view = views.get(viewer)
    if view is None or view._done > len(session.records):  # a log only grows; anything else starts afresh
        view = views[viewer] = PersonView(session, viewer)
    view.catch_up()
    return view


def common_view(session: Session) -> Session:
    """What everyone in the conversation saw: the people's messages and the posted answers only."""
    return view_for(session, NOBODY)


def common_part(session: Session, seq_from: int, seq_to: int) -> list[dict[str, Any]]:
    """The common view's messages opened by records seq_from..seq_to (a consolidation's part)."""
    view = common_view(session)
    return [m for i, m in enumerate(view.llm_messages()) if seq_from <= view.message_seq(i) <= seq_to]


def _foreign_turn(record: Record) -> Record:
    """Another person's message as everyone saw it: the words and images, with only the first line of
    the runtime block (time, channel, chat, sender) — not the lines about that person's own work."""
    shown = {k: v for k, v in record.items() if k != "context"}
    if record.get("context"):
        shown["context"] = str(record["context"]).split("\n", 1)[0]
    if record.get("channel") in _INTERNAL:  # no person typed it: a trigger of that person's (their words, private)
        shown["text"] = f"(a {record.get('channel')} run for another person in this conversation)"
        shown.pop("attachments", None)
    return shown


def _posted_answer(record: Record) -> Record | None:
    """An answer turn of another person's run as posted: its text, if it called no tool (a turn with
    tool calls was a step of the work, not what went to the chat)."""
    content = record.get("content") or []
    if any(block.get("type") == "tool_use" for block in content):
        return None
    text = [block for block in content if block.get("type") in _TEXT_ONLY and str(block.get("text") or "").strip()]
    return {**record, "content": text} if text and not record.get("drift_reset") else None


# Channels whose messages no person typed (the loop's INTERNAL_CHANNELS, which sits above this layer).
_INTERNAL = frozenset({"cron", "heartbeat", "recovery", "background", "subagent", "drift"})


@dataclass
class _People:
    done: int = 0
    seen: set[str] = field(default_factory=set)


_PEOPLE: weakref.WeakKeyDictionary[Session, _People] = weakref.WeakKeyDictionary()


def _people(session: Session) -> _People:
    state = _PEOPLE.get(session)
    if state is None or state.done > len(session.records):
        state = _PEOPLE[session] = _People()
    for record in session.records[state.done:]:
        if opens_run(record):
            state.seen.add(record_person(record))
    state.done = len(session.records)
    return state


class PersonView(Session):
    """One person's projection of a shared session, fed from the session's records as they grow.

    Another person's run is shown as their message and, once their run has ended, its posted answer;
    while it is the latest run its answer is held back until the run ends (the answer still pending
    is shown last, so the common view after a run includes it)."""

    def __init__(self, session: Session, viewer: str | None) -> None:
        super().__init__(session.key, session.path, fsync=False, load=False)
        self.source = session
        self.viewer = viewer
        self._done = 0  # records of the source absorbed
        self._person: str | None = NOBODY  # person of the run being absorbed
        self._before: set[str] = set()  # the persons of the runs so far
        self._answer: Record | None = None  # the latest answer turn of the foreign run being absorbed

    def append(self, kind: str, *, durable: bool = False, **fields: Any) -> Record:
        raise RuntimeError("a person's view of a session is read-only; append to the session")

    def catch_up(self) -> None:
        records = self.source.records
        for record in records[self._done:]:
            self._take(record)
        self._done = len(records)

    def _take(self, record: Record) -> None:
        if opens_run(record):
            self._flush_answer()
            self._person = record_person(record)
            self._before.add(self._person)
        if record.get("kind") == "consolidated":
            if record.get("reset") and self._person not in (NOBODY, self.viewer):
                return  # another person's drift reset restarts their view of the work, not this one's
            self._absorb(self._consolidation(record))
        elif self._person is NOBODY or self._person == self.viewer:
            self._absorb(record)
        elif opens_run(record):
            self._absorb(_foreign_turn(record))
        elif record.get("kind") == "assistant":
            self._answer = _posted_answer(record)

    def _flush_answer(self) -> None:
        if self._answer is not None:
            self._absorb(self._answer)
            self._answer = None

    def _consolidation(self, record: Record) -> Record:
        """The window moves for everyone; the summary is shown only if this person could see what it
        was made from (the common view's summary, or a part only this person spoke in)."""
        full = self.source
        upto = int(record["upto"])
        cut_seq = full.message_seq(upto) if upto < len(full._message_seqs) else int(record.get("seq", 0))
        shown = {**record, "upto": bisect.bisect_left(self._message_seqs, cut_seq)}
        if record.get("audience") != EVERYONE and not self._before <= {self.viewer}:
            shown.pop("summary", None)
            shown["pointer"] = (f"[memory] The earlier part of this conversation (up to seq {record.get('seq_to', '?')}) "
                                "is no longer shown. For details use memory_search.") if record.get("pointer") else None
        return shown

    @property
    def window_start(self) -> int:
        """The consolidation's start, moved back to the user turn it falls in: a window cut at another
        person's check turn or reset brief (left out here) would otherwise open with their answer, and a
        request must open with a user turn."""
        start = super().window_start
        count = len(self._messages)  # the held-back answer, if any, comes after these: never a user turn
        while 0 < start and (start >= count or self._messages[start]["role"] != "user"):
            if start >= count and self._answer is None:
                break  # the window starts after every message there is (nothing to show yet)
            start -= 1
        return start

    # the held-back answer of a foreign run that is still the latest one, shown last
    def _tail(self) -> list[dict[str, Any]]:
        if self._answer is None:
            return []
        return [{"role": "assistant", "content": self._answer["content"]}]

    def llm_messages(self, start: int = 0) -> list[dict[str, Any]]:
        return self._messages[start:] + self._tail()

    def iter_messages(self, start: int = 0) -> Iterator[dict[str, Any]]:
        return iter(self.llm_messages(start))

    @property
    def message_count(self) -> int:
        return len(self._messages) + len(self._tail())

    def message_seq(self, index: int) -> int:
        if index == len(self._messages) and self._answer is not None:
            return int(self._answer.get("seq", 0))
        return self._message_seqs[index]
