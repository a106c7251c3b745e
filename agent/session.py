"""Sessions: one append-only JSONL log per session key — the source of truth for a run.

Every record is a typed JSON line with a sequence number: user turns, assistant turns,
tool results, the tool-call journal (intent / done) and internal events. What the model
sees is a projection of it (`llm_messages`); internal records are kept but never sent.
Appending is one `write` to an O_APPEND descriptor, so it costs the same at any length.
"""

from __future__ import annotations

import json
import logging
import os
import time
import weakref
from collections import OrderedDict
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterator

from .core.durability import Durability
from .core.fsio import fsync_folder
from .core.jsontext import encoder
from .history_view import readable_history
from .providers.base import text_of
from .trust.untrusted import neutralise_markers
# The log's rules (agent/records.py), also imported from here by the modules that read logs.
from .records import (LLM_KINDS, InvalidSessionKey, Record, _key_of, _redacted,
                      check_session_key, record_problem, session_file_name)

log = logging.getLogger(__name__)
_encode = encoder(compact=True)  # json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class Session:
    def __init__(self, key: str, path: Path, *, fsync: bool = True, durability: Durability | None = None,
                 load: bool = True) -> None:
        """`load` False: a view filled by the caller (a checkpoint's past), never read from `path`."""
        self.key = key
        self.path = path
        self.fsync = fsync
        # With a barrier, a durable record is marked and flushed in a batch (`flush()`), not fsynced inline.
        self.durability = durability
        self.records: list[Record] = []
        self.seq = 0
        self.updated_at = 0.0
        self.progress = 0  # model answers and finished tool calls: what a retry would not redo
        self.inbound_seqs: dict[str, int] = {}  # inbound message id -> seq of its user turn
        self._messages: list[dict[str, Any]] = []
        self._pending_tool_ids: list[str] = []
        # Trigger answers delivered here while a tool call was open: they follow its results.
        self._deferred_notes: list[dict[str, Any]] = []
        self.delivered_ids: set[str] = set()  # outbox ids of the trigger answers kept in this log
        self._message_seqs: list[int] = []  # seq of the record that opened each LLM message
        # The latest "consolidated" record: messages before its `upto` index are summarised
        # in memory and left out of the model's view (they stay in this file).
        self.consolidation: Record | None = None
        self._fd: int | None = None
        # False while this log's file is new (created by this process): its name in the sessions folder
        # must reach the disk too before the first durable record counts as kept (once per new file).
        self._name_durable = True
        if load:
            self._load()

    # persistence -------------------------------------------------------------
    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:  # a new session (one system call, not a check and then the read)
            self._name_durable = False
            return
        pos = 0
        skipped: list[str] = []  # why each skipped line was skipped, for one summary log line
        while pos < len(raw):
            newline = raw.find(b"\n", pos)
            end = len(raw) if newline == -1 else newline + 1
            line = raw[pos:end]
            if line.strip():
                try:
                    record = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    if newline == -1:
                        # A torn final write (killed mid-append): cut it so appends start clean.
                        log.warning("session %s: dropping torn final line of %s", self.key, self.path)
                        with open(self.path, "r+b") as fh:
                            fh.truncate(pos)
                        break
                    skipped.append(f"byte {pos}: not JSON")
                else:
                    problem = record_problem(record)
                    if problem is None:
                        problem = self._absorb_safely(record)
                    if problem is not None:
                        skipped.append(f"byte {pos}: {problem}")
            pos = end
        else:
            if raw and not raw.endswith(b"\n"):
                with open(self.path, "ab") as fh:
                    fh.write(b"\n")
        if skipped:
            log.warning("session %s: skipped %d unreadable record(s) of %s (first at %s); the rest of the "
                        "conversation is kept", self.key, len(skipped), self.path, skipped[0])

    def _absorb_safely(self, record: Record) -> str | None:
        """Absorb a loaded record; if projecting it fails anyway, undo it and say why."""
        last = self._messages[-1] if self._messages else None  # a user turn may be merged into it
        saved = (len(self.records), len(self._messages), len(self._message_seqs), list(self._pending_tool_ids),
                 self.seq, self.updated_at, self.progress, dict(self.inbound_seqs), self.consolidation,
                 list(self._deferred_notes))
        try:
            self._absorb(record)
        except Exception as exc:  # the shape check missed something: the record must not stop the load
            records, messages, seqs, pending, self.seq, self.updated_at, self.progress, self.inbound_seqs, \
                self.consolidation, self._deferred_notes = saved
            del self.records[records:], self._messages[messages:], self._message_seqs[seqs:]
            if last is not None:
                self._messages[-1] = last
            self._pending_tool_ids = pending
            return f"{type(exc).__name__} while projecting it"
        return None

    # Called before every append (SessionManager caps how many sessions keep their file open).
    on_write: Callable[["Session"], None] | None = None
    # Called after every append with the new record (observers that project the log: checkpoints).
    on_append: Callable[["Session", Record], None] | None = None

    def _open(self) -> int:
        if self.on_write is not None:
            self.on_write(self)
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            except FileNotFoundError:  # its folder is gone (removed by hand): make it again
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return self._fd

    def close(self) -> None:
        """Close the file; the next append reopens it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, kind: str, *, durable: bool = False, **fields: Any) -> Record:
        """Append one record. `durable`: it must survive a power cut (tool intents: the crash window
        is one write) — fsynced now, or, with a Durability barrier, at the next `flush()`."""
        self.seq += 1
        record: Record = _redacted({"seq": self.seq, "ts": round(time.time(), 3), "kind": kind, **fields})
        fd = self._open()
        os.write(fd, (_encode(record) + "\n").encode())
        if durable and self.fsync:
            if self.durability is not None:
                self.durability.mark(self.path)
                if not self._name_durable:  # the folder once, flushed in the same batch as the file
                    self.durability.mark(self.path.parent)
            else:
                os.fsync(fd)
                if not self._name_durable:
                    fsync_folder(self.path.parent)  # a new file's name is kept by its folder
            self._name_durable = True
        self._absorb(record)
        if self.on_append is not None:
            self.on_append(self, record)
        return record

    async def flush(self) -> None:
        """Return once the durable records appended so far are on stable storage."""
        if self.durability is not None:
            await self.durability.sync()

    # projection --------------------------------------------------------------
    def _absorb(self, record: Record) -> None:
        self.records.append(record)
        self.seq = max(self.seq, int(record.get("seq", 0)))
        self.updated_at = float(record.get("ts", 0.0))
        kind = record.get("kind")
        if kind in ("assistant", "tool_done"):
            self.progress += 1
        elif kind == "user" and record.get("inbound_id"):
            self.inbound_seqs[record["inbound_id"]] = int(record.get("seq", 0))
        if kind == "delivered":
            self.delivered_ids.add(str(record.get("outbox_id")))
        if kind in LLM_KINDS or kind == "delivered":
            self._project(record)
            while len(self._message_seqs) < len(self._messages):
                self._message_seqs.append(int(record.get("seq", 0)))
        elif kind == "consolidated":
            self.consolidation = record

    def _project(self, record: Record) -> None:
        kind = record["kind"]
        msgs = self._messages
        if kind == "assistant":
            self._close_dangling_tools()
            msgs.append({"role": "assistant", "content": record["content"]})
            self._pending_tool_ids = [b["id"] for b in record["content"] if b.get("type") == "tool_use"]
            return
        if kind == "delivered":
            self._project_delivered(record)
            return
        if kind == "note":
            note = {"type": "text", "text": record["text"]}
            if msgs and msgs[-1]["role"] == "user":
                msgs[-1] = {"role": "user", "content": list(msgs[-1]["content"]) + [note]}
            return
        if kind == "tool_results":
            blocks = [
                {"type": "tool_result", "tool_use_id": r["tool_use_id"], "content": r["content"],
                 **({"is_error": True} if r.get("is_error") else {})}
                for r in record["results"]
            ]
            self._pending_tool_ids = []
            msgs.append({"role": "user", "content": blocks + self._deferred_notes})
            self._deferred_notes = []
            return
        # a user turn
        self._close_dangling_tools()
        blocks = user_blocks(record)
        if msgs and msgs[-1]["role"] == "user":
            msgs[-1] = {"role": "user", "content": list(msgs[-1]["content"]) + blocks}
        else:
            msgs.append({"role": "user", "content": blocks})

    def _close_dangling_tools(self) -> None:
        """A tool_use never answered (a crash, a cancel) gets a result so the history stays valid."""
        if not self._pending_tool_ids:
            return
        self._messages.append({
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tid, "is_error": True,
                 "content": "This tool call was interrupted before it finished; its outcome is unknown."}
                for tid in self._pending_tool_ids
            ] + self._deferred_notes,
        })
        self._pending_tool_ids = []
        self._deferred_notes = []

    def _project_delivered(self, record: Record) -> None:
        """A trigger's answer the person saw here becomes a labelled runtime line on the user side,
        so the model can refer to it; during an open tool call it waits for that call's results."""
        note = {"type": "text", "text": delivered_note(record)}
        msgs = self._messages
        if self._pending_tool_ids:
            self._deferred_notes.append(note)
        elif msgs and msgs[-1]["role"] == "user":
            msgs[-1] = {"role": "user", "content": list(msgs[-1]["content"]) + [note]}
        else:
            msgs.append({"role": "user", "content": [note]})

    def delivered(self, outbox_id: str) -> bool:
        """This trigger answer is already kept in the log (a retried delivery must not add it twice)."""
        return outbox_id in self.delivered_ids

    def llm_messages(self, start: int = 0) -> list[dict[str, Any]]:
        """The model's view: user / assistant / tool_result messages only."""
        return self._messages[start:]

    def iter_messages(self, start: int = 0) -> Iterator[dict[str, Any]]:
        """The same view without a copy, for a reader that may stop early."""
        return islice(self._messages, start, None)

    @property
    def message_count(self) -> int:
        return len(self._messages)

    @property
    def window_start(self) -> int:
        """Index of the first message the model sees (moved only by consolidation)."""
        return int(self.consolidation["upto"]) if self.consolidation else 0

    def message_seq(self, index: int) -> int:
        """Sequence number of the record that opened LLM message `index` (for pointers)."""
        return self._message_seqs[index]

    def pending_tool_calls(self) -> list[dict[str, Any]]:
        """tool_use blocks of the last assistant turn that have no tool_results record yet."""
        if not self._pending_tool_ids or not self._messages:
            return []
        last = self._messages[-1]
        return [b for b in last["content"] if b.get("type") == "tool_use" and b["id"] in self._pending_tool_ids]

    def journal(self, tool_use_id: str) -> tuple[Record | None, Record | None]:
        """The intent and done records of one tool call, searched from the end."""
        intent = done = None
        for record in reversed(self.records):
            if record.get("id") != tool_use_id:
                continue
            if record["kind"] == "tool_done" and done is None:
                done = record
            elif record["kind"] == "tool_intent":
                intent = record
                break
        return intent, done

    def last_origin(self) -> dict[str, str] | None:
        """Where the person behind this session was last heard from: the place to send notices."""
        for record in reversed(self.records):
            if record["kind"] == "user":
                if record.get("deliver"):
                    return record["deliver"]
                if record.get("channel") not in (None, "heartbeat", "recovery", "cron", "background", "hook"):
                    return {"channel": record["channel"], "chat_id": record["chat_id"]}
        return None

    def acts_for_owner(self) -> bool:
        """Whether the last person heard from in this session is the owner: the rights a turn
        nobody typed (heartbeat, resume after a restart) runs with."""
        for record in reversed(self.records):
            if record["kind"] == "user" and record.get("channel") not in ("heartbeat", "recovery", "cron", "background", "hook"):
                return record.get("owner") is True
        return False

    def final_answer(self, run_id: str) -> str | None:
        """The run's final answer if the log ends with it (a crash after the model answered):
        the answer is sent without calling the model again."""
        for record in reversed(self.records):
            if record["kind"] == "event":
                continue
            if record["kind"] == "assistant" and record.get("run_id") == run_id and \
                    not any(b.get("type") == "tool_use" for b in record.get("content") or []):
                return text_of(record["content"]).strip() or None
            return None
        return None

    def run_result(self, run_id: str) -> str:
        """A run's short result, newest first: its last answer text, its error, or its cancellation."""
        for record in reversed(self.records):
            if record.get("run_id") == run_id:
                if record["kind"] == "assistant" and (text := text_of(record["content"]).strip()):
                    return text
                if record["kind"] == "event" and record.get("error"):
                    return str(record["error"])
                if record["kind"] == "event" and record.get("name") == "cancelled":
                    return "stopped by the user"
            if record.get("kind") == "user" and record.get("inbound_id") == run_id:
                break
        return ""

    def history(self, limit: int = 200) -> list[Record]:
        """Readable history for clients: user and assistant text, tool steps, internal events."""
        return readable_history(self.records, limit)


def delivered_note(record: Record) -> str:
    """How the model sees a trigger's answer delivered into this conversation: where it came from,
    that the person saw it here, and its words — defused like a user's, as it may quote web pages."""
    origin = record.get("origin") or {}
    if origin.get("kind") == "cron":
        source = f'cron job "{origin.get("name") or origin.get("job")}" (id {origin.get("job")}' + \
            (f", {origin['schedule']})" if origin.get("schedule") else ")")
    elif origin.get("kind") == "heartbeat":
        source = "the heartbeat"
    elif origin.get("kind") == "hook":
        source = f'webhook "{origin.get("name")}" (delivery {origin.get("delivery")})'
    else:
        source = str(origin.get("kind") or "a trigger")
    what = "an error report" if record.get("error") else "an answer"
    return (f"[runtime] Delivered into this conversation from {source}: {what} the person saw here, written "
            f"by you in that job's own session. Its words:\n{neutralise_markers(record.get('text') or '')}")


def user_blocks(record: Record) -> list[dict[str, Any]]:
    """The runtime block (clawgate's), then the user's text with any forged [runtime] lines defused."""
    blocks: list[dict[str, Any]] = []
    if record.get("context"):
        blocks.append({"type": "text", "text": record["context"]})
    for item in record.get("attachments") or ():  # a photo from a channel, in front of the words about it
        if item.get("type") == "image" and item.get("data"):
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": item.get("media_type", "image/jpeg"),
                                                       "data": item["data"]}})
    blocks.append({"type": "text", "text": neutralise_markers(record.get("text") or "(empty message)")})
    return blocks


# How many sessions, and how many of their records in all, stay in memory while no one uses them
# (the defaults of `state.sessions_in_memory` and `state.records_in_memory`). A daemon that served
# thousands of chats keeps only the recent ones; the others are read again from their logs on
# their next message (a few ms for a long log).
MAX_IDLE_SESSIONS = 256
MAX_IDLE_RECORDS = 12_000


class SessionManager:
    """Opens sessions lazily and keeps the recently used ones in memory; one file per key.

    While anything holds a Session (a running turn, a queued run), `get` returns that same object:
    the manager keeps a weak reference to every session alive. Strongly it holds only the most
    recently used ones, at most `max_idle` sessions and `max_idle_records` records in all; a session
    pushed out of that set is dropped once nothing else holds it (its file closed first), and its
    next `get` reads its log again. `evicted` callbacks hear of each dropped key, so per-session
    caches elsewhere (keyed by the key) drop theirs too.

    At most `max_open` sessions keep their file open: when another one appends, the one that
    appended least recently closes its file, and reopens it on its own next append.
    """

    def __init__(self, folder: Path, *, fsync: bool = True, max_open: int = 64,
                 durability: Durability | None = None, max_idle: int = MAX_IDLE_SESSIONS,
                 max_idle_records: int = MAX_IDLE_RECORDS) -> None:
        self.folder = folder
        self.fsync = fsync
        self.durability = durability
        self.max_open = max(1, max_open)
        self.max_idle = max(1, max_idle)
        self.max_idle_records = max_idle_records
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._recent: OrderedDict[str, Session] = OrderedDict()  # kept in memory; least recently used first
        self._recent_records = 0  # records of the sessions in `_recent`, kept as they are appended
        self._writers: OrderedDict[Session, None] = OrderedDict()  # may hold a file open; least recent first
        # Told of every record appended to any session; a failing observer never breaks a run.
        self.observers: list[Callable[[Session, Record], None]] = []
        # Told the key of every session dropped from memory (not of `forget` and `reset`, whose callers act).
        self.evicted: list[Callable[[str], None]] = []
        # Called with the session's key before every append; raises to refuse the write (a fleet
        # worker that lost the session's partition, agent/fleet). None: every write goes through.
        self.guard: Callable[[str], None] | None = None
        folder.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> Session:
        """The session of `key`; InvalidSessionKey if the key cannot name a log file."""
        session = self._sessions.get(key)
        if session is None:
            check_session_key(key)
            session = Session(key, self.folder / session_file_name(key), fsync=self.fsync, durability=self.durability)
            session.on_write = self._writing
            session.on_append = self._appended
            self._sessions[key] = session
            weakref.finalize(session, self._dropped, key)
        if self._recent.get(key) is not session:
            self._recent[key] = session
            self._recent_records += len(session.records)
        self._recent.move_to_end(key)
        self._trim()
        return session

    def _trim(self) -> None:
        """Let go of the least recently used sessions beyond the bounds (kept alive if still in use)."""
        while len(self._recent) > 1 and (len(self._recent) > self.max_idle
                                         or self._recent_records > self.max_idle_records):
            _, oldest = self._recent.popitem(last=False)
            self._recent_records = max(0, self._recent_records - len(oldest.records))
            self._writers.pop(oldest, None)  # if still in use, its next append opens the file again
            oldest.close()

    def _dropped(self, key: str) -> None:
        if self._sessions.get(key) is not None:  # forgotten, and read again since: that one is in use
            return
        for callback in list(self.evicted):
            try:
                callback(key)
            except Exception:
                log.exception("session eviction callback %s failed", getattr(callback, "__name__", callback))

    def _appended(self, session: Session, record: Record) -> None:
        if self._recent.get(session.key) is session:
            self._recent_records += 1
        for observer in list(self.observers):
            try:
                observer(session, record)
            except Exception:
                log.exception("session observer %s failed on a %s record", getattr(observer, "__name__", observer),
                              record.get("kind"))

    def loaded(self, key: str) -> Session | None:
        """The session if it is in memory (no file is read)."""
        return self._sessions.get(key)

    def loaded_keys(self) -> list[str]:
        """Keys of the sessions in memory."""
        return list(self._sessions.keys())

    def forget(self, key: str) -> None:
        """Drop the in-memory session so the next `get` reads its log again (after the log was replaced)."""
        session = self._sessions.pop(key, None)
        if (recent := self._recent.pop(key, None)) is not None:
            self._recent_records = max(0, self._recent_records - len(recent.records))
        if session:
            self._writers.pop(session, None)
            session.close()

    def _writing(self, session: Session) -> None:
        if self.guard is not None:
            self.guard(session.key)
        self._writers[session] = None
        self._writers.move_to_end(session)
        while len(self._writers) > self.max_open:
            self._writers.popitem(last=False)[0].close()

    def exists(self, key: str) -> bool:
        if key in self._sessions:
            return True
        try:
            check_session_key(key)
        except InvalidSessionKey:
            return False  # no log can have that name
        return (self.folder / session_file_name(key)).exists()

    def keys(self) -> list[str]:
        on_disk = {_key_of(p) for p in self.folder.glob("*.jsonl")}
        return sorted(on_disk | set(self._sessions))

    def summaries(self) -> list[dict[str, Any]]:
        out = []
        for key in self.keys():
            path = self.folder / session_file_name(key)
            session = self._sessions.get(key)
            updated = session.updated_at if session else (path.stat().st_mtime if path.exists() else 0.0)
            out.append({"key": key, "updatedAt": updated, "messages": session.message_count if session else None})
        return out

    def reset(self, key: str) -> str | None:
        """Start the session afresh; the old log is kept beside it (transcripts are memory)."""
        check_session_key(key)
        self.forget(key)
        path = self.folder / session_file_name(key)
        if not path.exists():
            return None
        archived = path.with_name(f"{path.stem}.{time.strftime('%Y%m%dT%H%M%S')}.archived")
        path.rename(archived)
        return archived.name

    def close(self) -> None:
        for session in self._writers:
            session.close()
        self._writers.clear()
