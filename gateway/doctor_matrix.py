"""`clawgate doctor`'s note on the Matrix line — always said when the channel is on: whether encrypted
rooms are read (end-to-end encryption on) or not (`encryption = false`, or vodozemac missing: the
rooms the bot met are listed). The log-in itself is the adapter's probe (channels/matrix/probe.py).

Why its own module: it reads the channel's rows in the state database, which the probe never touches.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from clawgate.config.paths import Paths

NOT_SUPPORTED = "end-to-end encrypted rooms cannot be read"


def _encrypted_rooms(paths: Paths) -> list[str]:
    """The encrypted rooms the running bot met (the adapter records them), read-only from the state db."""
    from clawgate.channels.matrix.adapter import ENCRYPTED_ROOMS, encrypted_rooms

    if not paths.database.exists():
        return []
    try:
        db = sqlite3.connect(f"file:{paths.database}?mode=ro", uri=True, timeout=2)
        try:
            row = db.execute("SELECT value FROM channel_state WHERE channel='matrix' AND key=?",
                             (f"kv:{ENCRYPTED_ROOMS}",)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return []
    return encrypted_rooms(row[0] if row else None)


def matrix_note(paths: Paths, matrix: Any) -> tuple[str, str]:
    """(what the bot does with encrypted rooms, a fix when people already wrote in rooms it cannot read)."""
    from clawgate.channels.matrix.adapter import e2e_available

    rooms = _encrypted_rooms(paths)
    if matrix.encryption and e2e_available():
        return "end-to-end encrypted rooms are read (keys in state/matrix-e2e)", ""
    if rooms:
        return (f"{NOT_SUPPORTED} (the bot said so in: {', '.join(rooms)})",
                "talk to the bot in rooms without encryption")
    return f"{NOT_SUPPORTED} ({'encryption = false' if not matrix.encryption else 'vodozemac missing'}; none met so far)", ""
