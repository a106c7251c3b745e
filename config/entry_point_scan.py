"""One scan of the installed distributions' entry points for the imports of a start, not four.

Libraries look for their plugins when imported: pydantic's plugin loader at the first model,
apscheduler's scheduler class once per plugin group (triggers, executors, job stores). Each call of
`importlib.metadata.entry_points(group=...)` opens every installed distribution's metadata: 5-30 ms
each with the ~140 distributions of a development install, depending on the machine's load. Inside
`one_entry_point_scan()` (the start's imports; apscheduler's import when the scheduler starts, right
after the ready line) those calls are answered from a single scan, so the libraries still find
every plugin installed when the process started; outside it, `entry_points` is the standard one
(a library that bound the shared function answers from the standard one too once the scope ended).
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_standard = metadata.entry_points
_active = 0


@functools.cache
def _every_entry_point() -> metadata.EntryPoints:
    """The standard function's own walk (distributions on sys.path, each name once), done once."""
    unique = getattr(metadata, "_unique", lambda dists: dists)  # the standard library's own de-duplication
    return metadata.EntryPoints(itertools.chain.from_iterable(
        dist.entry_points for dist in unique(metadata.distributions())))


def _shared(**params: Any) -> Any:
    """`importlib.metadata.entry_points`, from the one scan while a scope is open; a call without a
    selection (its return type differs between Python versions) always goes to the standard one."""
    if not _active or not params:
        return _standard(**params)
    return _every_entry_point().select(**params)


@contextmanager
def one_entry_point_scan() -> Iterator[None]:
    """Imports inside share one scan; nested and repeated scopes share it too (within one start)."""
    global _active
    _active += 1
    metadata.entry_points = _shared
    try:
        yield
    finally:
        _active -= 1
        if not _active:
            metadata.entry_points = _standard
