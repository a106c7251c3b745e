"""`clawgate status` prints each webhook on a line of its own: how it is called, its target, its latest call."""

from __future__ import annotations

import time

from clawgate.gateway.cli.status_view import status_lines


def test_each_hook_is_one_line_with_its_latest_call() -> None:
    at = time.time()
    lines = status_lines({"hooks": [
        {"name": "ci", "auth": "bearer token", "deliver": "telegram:42",
         "lastCalls": [{"at": at, "status": 429, "id": None, "note": "rate limited"}, {"at": at - 5, "status": 202}]},
        {"name": "invoices", "auth": "mailbox INBOX on imap.example.org", "deliver": "none", "lastCalls": []}]})
    shown = time.strftime("%H:%M:%S", time.localtime(at))
    assert any(line.endswith(f"ci: bearer token -> telegram:42; last call 429 (rate limited) at {shown}") for line in lines)
    assert any(line.endswith("invoices: mailbox INBOX on imap.example.org -> none; no call yet") for line in lines)
    assert lines[0].startswith("hooks")
