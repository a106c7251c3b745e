"""Consolidation: when a session's window passes a share of the context budget, the oldest
part is summarised into memory and only a pointer moves.

It runs as an `after_run` hook of the AgentLoop (in the session's lane, after the reply is
queued), so the person never waits for the reply; a message sent while it summarises waits
for it, which keeps the session strictly serial. The session file is never rewritten: a typed
"consolidated" record stores the new window start (`upto`, a message index), the summary
and the pointer text the model sees at the head of the next request. If the model cannot
summarise, the raw part is archived verbatim to memory/archive/ and the pointer still moves:
nothing is lost either way. Cuts fall only before a user message that is not a tool_result,
so a tool call and its result are never split. A conversation several people share is
summarised from what everyone in it saw (context/shared_view.py): the summary heads every
person's window, so it never carries one person's tool work into another's run.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable

from clawgate.config.schema import AgentSettings

from .compaction import message_chars
from .builder import ContextBuilder
from .shared_view import EVERYONE, common_part, is_shared
from ..core.events import EventHub
from ..memory.store import Memory
from ..providers.base import ModelRequest, Provider
from ..session import Session

log = logging.getLogger(__name__)

SUMMARY_PROMPT = """\
You consolidate the older part of a conversation between a person and their agent into
durable memory notes. Write a concise Markdown bullet summary (at most about 300 words) that
keeps, in this order of priority:
1. decisions and their reasons; constraints and preferences the person stated;
2. files created or changed, commands run and their results (pass/fail);
3. the state of the work: what is done and verified, what is still open (TODOs, failures, next steps);
4. facts learned about the person or their systems.
Copy every identifier exactly, character for character: ids, hashes, file paths, URLs,
hostnames, IP addresses, ports, version numbers, branch/ticket/PR names. Never shorten, round
or paraphrase an identifier. Drop small talk and raw tool output. Invent nothing. If a summary
of even earlier parts is given, merge it in so your summary covers everything. Output only
the summary."""

IDENTIFIER = (  # compiled by the first consolidation (`_identifier`), not at every start
    r"https?://[^\s<>\"'`)\]]+"  # URLs
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # UUIDs
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{2,5})?\b"  # IPv4 (with port)
    r"|\b(?=[\w.-]*[A-Za-z])[\w.-]+:\d{2,5}\b"  # host:port
    r"|(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+"  # paths
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b"  # hex hashes
    r"|\b[A-Za-z]+[_-][\w.-]*\d[\w-]*\b"  # ids like t_3f9a, build-4411, release-2025.06
    r"|\bv?\d+\.\d+\.\d+[\w.-]*\b"  # versions like v1.4.2
    r"|\b[\w-]+\.(?:py|js|ts|md|json|toml|ya?ml|txt|csv|html|css|sh|go|rs|sql|log|ini|cfg)\b"  # file names
)
MAX_IDENTIFIERS = 40
ITEM_CAP = 1_500


@dataclass(kw_only=True, eq=False)
class Consolidator:
    """`memory_for(session, msg)`: the memory of the person the run acted for (a guest's summaries go
    to the guest's own daily log, never the owner's); without it, always `memory`."""

    provider: Provider
    context: ContextBuilder
    memory: Memory
    settings: AgentSettings
    events: EventHub | None = None
    memory_for: Callable[[Session, Any], Memory] | None = None

    @property
    def threshold(self) -> int:
        return int(self.settings.context_tokens * self.settings.consolidate_at)

    async def __call__(self, session: Session, msg: Any) -> None:
        await self.maybe_consolidate(session, None if self.memory_for is None else self.memory_for(session, msg))

    async def maybe_consolidate(self, session: Session, memory: Memory | None = None) -> dict[str, Any] | None:
        """Consolidate when the window's estimate reaches the threshold; the new record or None."""
        start = session.window_start
        tokens = self.context.compactor.estimate_tokens(session, start)
        if tokens < self.threshold:
            return None
        cut = self.choose_cut(session, start)
        if cut is None:
            log.info("session %s: %d tokens in one turn; nothing to consolidate yet", session.key, tokens)
            return None
        return await self.consolidate(session, start, cut, memory)

    def choose_cut(self, session: Session, start: int) -> int | None:
        """The earliest safe boundary that leaves at most half the threshold in the window."""
        view = self.context.compactor.view(session, start)
        sizes = [message_chars(m) // 4 for m in view]
        tail = sum(sizes)
        candidates: list[int] = []
        for offset, message in enumerate(view):
            if offset and _starts_turn(message):
                candidates.append(offset)
        if not candidates:
            return None
        target = self.threshold // 2
        for offset in range(len(view)):
            if offset in candidates and tail <= target:
                return start + offset
            tail -= sizes[offset]
        return start + candidates[-1]

    async def consolidate(self, session: Session, start: int, cut: int,
                          memory: Memory | None = None) -> dict[str, Any] | None:
        memory = memory or self.memory
        first, last = session.message_seq(start), session.message_seq(cut) - 1
        transcript = f"sessions/{session.path.name}"
        previous = (session.consolidation or {}).get("summary") or ""
        title = f"session {session.key} · consolidated up to seq {last}"
        fields: dict[str, Any] = {"upto": cut, "seq_from": first, "seq_to": last, "transcript": transcript}
        if is_shared(session):  # the summary heads every person's window: made of what everyone saw
            part = common_part(session, first, last)
            previous = previous if (session.consolidation or {}).get("audience") == EVERYONE else ""
            fields["audience"] = EVERYONE
        else:
            part = session.llm_messages(start)[: cut - start]
        try:
            summary = await self.summarise(part, previous)
            summary = keep_identifiers(summary, part)
            path = memory.log(f"{summary}\n\n(full transcript: {transcript}, seq {first}–{last})", title=title)
            where = memory.relative(path)
            pointer = (f"[memory] The earlier part of this conversation ({transcript}, up to seq {last}) was "
                       f"consolidated; its summary follows (also in {where}). For details use memory_search, or "
                       f"memory_get(path=\"{transcript}\", seq=N).\n{summary}")
            fields.update(ok=True, summary=summary, file=where, pointer=pointer)
        except Exception as exc:  # any failure to summarise: archive verbatim instead
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            try:
                archive = memory.archive(f"{session.key}-seq{first}-{last}", render(part, cap=None, header=(
                    f"# Archived conversation part\nsession {session.key} · {transcript} seq {first}–{last}\n"
                    f"Summarising failed: {reason}\n")))
                where = memory.relative(archive)
                memory.log(f"Summarising failed ({reason}); the raw part was archived to {where}.", title=title)
            except OSError as io_error:
                log.error("session %s: consolidation skipped, archive not writable: %s", session.key, io_error)
                return None
            pointer = (f"[memory] The earlier part of this conversation ({transcript}, up to seq {last}) is no longer "
                       f"shown. It could not be summarised, so it was archived word for word to {where}; read it "
                       f"with memory_get(path=\"{where}\") when you need details.")
            if previous:
                pointer += f"\nSummary of what came before that:\n{previous}"
            fields.update(ok=False, error=reason, archive=where, summary=previous, pointer=pointer)
            log.warning("session %s: summarising failed (%s); archived seq %d–%d to %s", session.key, reason,
                        first, last, where)
        record = session.append("consolidated", durable=True, **fields)
        self.context.invalidate(session.key)
        self.context.compactor.forget(session)
        if self.events:
            self.events.emit("consolidation", session=session.key, ok=fields["ok"], upto=cut, seq_to=last)
        return record

    async def summarise(self, part: list[dict[str, Any]], previous: str) -> str:
        budget = int(self.settings.context_tokens * 4 * 0.6)
        text = render(part, cap=ITEM_CAP)
        if len(text) > budget:
            half = budget // 2
            text = text[:half] + "\n[… middle of this part left out for length …]\n" + text[-half:]
        if previous:
            text = f"Summary of even earlier parts:\n{previous}\n\nConversation part to consolidate:\n{text}"
        request = ModelRequest(model=self.settings.model, system=[{"type": "text", "text": SUMMARY_PROMPT}],
                               messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
                               max_tokens=min(2048, self.settings.max_tokens))
        response = await self.provider.complete(request)
        summary = response.text.strip()
        if not summary:
            raise ValueError("the model returned an empty summary")
        return summary


def _starts_turn(message: dict[str, Any]) -> bool:
    return message["role"] == "user" and message["content"][0].get("type") != "tool_result"


def render(messages: list[dict[str, Any]], *, cap: int | None, header: str = "") -> str:
    """A readable transcript of LLM messages; `cap` shortens each tool output (None: verbatim)."""
    out = [header] if header else []
    names: dict[str, str] = {}
    for message in messages:
        for block in message["content"]:
            kind = block.get("type")
            if kind == "text":
                out.append(f"{message['role']}: {block['text']}")
            elif kind == "tool_use":
                names[block["id"]] = block["name"]
                out.append(f"assistant → {block['name']} {json.dumps(block['input'], ensure_ascii=False)}")
            elif kind == "tool_result":
                content = str(block.get("content", ""))
                if cap is not None and len(content) > cap:
                    content = content[:cap] + f" [… {len(content) - cap} more characters]"
                error = " (error)" if block.get("is_error") else ""
                out.append(f"tool result{error} ({names.get(block['tool_use_id'], 'tool')}): {content}")
    return "\n".join(out) + "\n"


@functools.cache
def _identifier() -> re.Pattern[str]:
    return re.compile(IDENTIFIER)


def identifiers(messages: list[dict[str, Any]]) -> list[str]:
    """Identifiers the person and the agent wrote (tool outputs excluded: too many, too noisy)."""
    found: dict[str, None] = {}
    for message in messages:
        for block in message["content"]:
            if block.get("type") == "text":
                if block["text"].startswith(("[runtime]", "[memory]")):
                    continue  # written by clawgate, not by the person or the agent
                source = block["text"]
            elif block.get("type") == "tool_use":
                source = json.dumps(block["input"], ensure_ascii=False)
            else:
                continue
            for match in _identifier().findall(source):
                found.setdefault(match.rstrip(".,;:"), None)
    return list(found)


def keep_identifiers(summary: str, part: list[dict[str, Any]]) -> str:
    """Append the identifiers the summary dropped, so none is lost to a paraphrase."""
    missing = [i for i in identifiers(part) if i not in summary]
    if not missing:
        return summary
    return summary + "\n- Identifiers (verbatim): " + ", ".join(missing[:MAX_IDENTIFIERS])
