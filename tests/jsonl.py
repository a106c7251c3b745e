"""Reading the daemon's JSON-lines files while it may be appending to them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def complete_records(path: Path) -> list[dict[str, Any]]:
    """The records of every line the writer has finished.

    A test polls these files while the daemon appends: the last line may be half written, so
    only lines that end in a newline count (the writer ends every record with one).
    """
    if not path.exists():
        return []
    text = path.read_text()
    finished = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in finished.splitlines() if line.strip()]
