"""The readable history clients get from `chat.history`: people's and the model's words, internal
events, and each assistant turn's tool calls as steps with how they ended.

The steps come from the session log's tool-call journal (intent / done records) and the tool
results, so a page reloaded after a run still shows what the run did, as it was shown live by
`agent` events (docs/protocol.md, chat.history).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .providers.base import text_of

Record = dict[str, Any]
SUMMARY_CHARS = 200


def step_summary(args: Any) -> str:
    """The call's arguments as one line of JSON, cut like the live `tool_start` summary."""
    try:
        text = json.dumps(args if args is not None else {}, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = str(args)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


class _Journal:
    """How each tool call of the log ended, looked up by its tool_use id."""

    def __init__(self, records: Iterable[Record]) -> None:
        self.intent: dict[str, Record] = {}
        self.done: dict[str, Record] = {}
        self.unknown: set[str] = set()
        self.result_error: dict[str, bool] = {}
        for record in records:
            kind, call_id = record.get("kind"), record.get("id")
            if kind == "tool_intent" and call_id:
                self.intent[call_id] = record
            elif kind == "tool_done" and call_id:
                self.done[call_id] = record
            elif kind == "event" and record.get("name") == "tool_outcome_unknown" and call_id:
                self.unknown.add(call_id)
            elif kind == "tool_results":
                for result in record.get("results") or ():
                    if isinstance(result, dict) and result.get("tool_use_id"):
                        self.result_error[result["tool_use_id"]] = bool(result.get("is_error"))

    def step(self, block: Record) -> Record:
        call_id = block.get("id") or ""
        step: Record = {"id": call_id, "tool": block.get("name") or "", "summary": step_summary(block.get("input"))}
        done, intent = self.done.get(call_id), self.intent.get(call_id)
        if done is not None:
            step["status"] = done.get("status") or ("error" if done.get("is_error") else "ok")
            if intent is not None and "ts" in intent and "ts" in done:
                step["durationMs"] = max(0, round((float(done["ts"]) - float(intent["ts"])) * 1000))
        elif call_id in self.unknown:
            step["status"] = "unknown"
        elif call_id in self.result_error:
            step["status"] = "error" if self.result_error[call_id] else "ok"
        else:
            step["status"] = "pending"  # not finished (yet): the run is still going, or recovery will finish it
        return step


def readable_history(records: list[Record], limit: int = 200) -> list[Record]:
    """User and assistant text plus internal events, newest `limit`; an assistant turn that
    called tools carries `tools` (their names) and `steps` (one per call, in order)."""
    journal: _Journal | None = None
    out: list[Record] = []
    for record in records:
        kind = record["kind"]
        if kind == "user":
            out.append({"role": "user", "text": record["text"], "ts": record.get("ts", 0.0)})
        elif kind == "assistant":
            calls = [b for b in record["content"] if b.get("type") == "tool_use"]
            entry: Record = {"role": "assistant", "text": text_of(record["content"]),
                             "tools": [b["name"] for b in calls], "ts": record.get("ts", 0.0)}
            if record.get("run_id"):
                entry["runId"] = record["run_id"]
            if calls:
                journal = journal or _Journal(records)
                entry["steps"] = [journal.step(b) for b in calls]
            out.append(entry)
        elif kind == "delivered":  # a trigger's answer delivered here: numbered like the gateway's replies
            out.append({"role": "assistant", "text": record["text"], "tools": [], "from": record.get("origin") or {},
                        "seq": int(record.get("gseq") or 0), "ts": record.get("ts", 0.0),
                        "runId": record.get("run_id") or "", **({"error": True} if record.get("error") else {})})
        elif kind == "event":
            event: Record = {"role": "event", "name": record.get("name"), "ts": record.get("ts", 0.0)}
            if record.get("text"):
                event["text"] = record["text"]
            out.append(event)
    return out[-limit:]
