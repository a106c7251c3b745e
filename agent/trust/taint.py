"""Taint of a run: whether untrusted content has entered it, and from where.

A prompt injection works by getting text into the model's input; the wrapper (agent/trust/untrusted.py)
tells the model it is data, but a model can still be talked round. So the decision is taken in
code, on the effect: once a run has taken in untrusted content, every call with a lasting or
outward effect (the agent's own files, memory, cron jobs, other chats, a new web host, a
sub-agent) waits for the owner's approval for the rest of that run, and the prompt says what
came in before it.

What taints a run is found on the effect as well: every piece of outside content reaches the model
through `wrap_untrusted`, so a tool result (or an inbound message: a background job's result, a
sub-agent's report) holding an untrusted-data block taints the run. A run started by a cron job
created in a tainted run starts tainted (metadata "tainted").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .untrusted import TAG

# The opening tag wrap_untrusted writes: a 16-hex nonce and an escaped source.
_OPENING = re.compile(rf'<{TAG} id="[0-9a-f]{{16}}" source="([^"\n]*)">')
SOURCE_SHOWN = 100
MAX_SOURCES = 5
WARNING_SOURCES = 200


@dataclass
class Taint:
    """One run's taint: shared by every call of the run (ToolContext holds the same object)."""

    sources: list[str] = field(default_factory=list)
    # Hosts this run already sent a web request to: a request to another one may carry data out.
    hosts: set[str] = field(default_factory=set)

    @property
    def tainted(self) -> bool:
        return bool(self.sources)

    def add(self, source: str) -> None:
        source = source[:SOURCE_SHOWN]
        if source not in self.sources and len(self.sources) < MAX_SOURCES:
            self.sources.append(source)

    def take_in(self, content: str, via: str = "") -> None:
        """Taint the run when `content` (a tool result, an inbound text) holds untrusted data."""
        if TAG not in content:
            return
        for match in _OPENING.finditer(content):
            source = match.group(1)
            self.add(source if not via or source.startswith(via) else f"{via}: {source}")

    def warning(self) -> str:
        """The line an approval prompt starts with in a tainted run."""
        shown = "; ".join(self.sources)
        if len(shown) > WARNING_SOURCES:  # the prompt's own reason must still fit (Telegram shows 500 characters)
            shown = shown[:WARNING_SOURCES] + "…"
        return f"untrusted content entered this run before this call ({shown}) and may be what asked for it"

    def note(self, reason: str) -> str:
        """`reason` for an approval prompt, led by the warning when the run is tainted."""
        return f"{self.warning()}. {reason}" if self.tainted else reason

    @classmethod
    def of_message(cls, text: str, metadata: dict[str, Any]) -> "Taint":
        """The taint a run starts with: from its trigger (a tainted cron job) or its own text."""
        taint = cls()
        if isinstance(metadata.get("tainted"), str) and metadata["tainted"]:
            taint.add(metadata["tainted"])
        taint.take_in(text)
        return taint

    def replay(self, records: Iterable[dict[str, Any]]) -> None:
        """Take in what a run recorded before a restart (its tool results), so recovery keeps the taint."""
        names: dict[str, str] = {}
        for record in records:
            kind = record.get("kind")
            if kind == "tool_intent":
                names[str(record.get("id"))] = str(record.get("name") or "")
            elif kind == "tool_done":
                self.take_in(str(record.get("content") or ""), names.get(str(record.get("id")), ""))
            elif kind == "tool_results":
                for result in record.get("results") or []:
                    if isinstance(result, dict):
                        content = result.get("content")
                        self.take_in(content if isinstance(content, str) else str(content or ""),
                                     names.get(str(result.get("tool_use_id")), ""))
