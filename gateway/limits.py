"""How many files the daemon may keep open, and so how many session logs and traces stay open.

Every busy session appends to its log and its trace at each step; with more busy sessions than
open files allowed, each append reopens a file (and the least recent one closes). The common
soft limit of 1,024 is raised towards the hard limit at start, and the caches are sized from it.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)
WANT_OPEN_FILES = 4096
# Per cache (session logs, traces); the rest of the limit is for sockets, the database, tools.
MAX_OPEN_PER_CACHE = 512
MIN_OPEN_PER_CACHE = 16


def raise_open_file_limit(want: int = WANT_OPEN_FILES) -> int:
    """Raise the soft limit on open files to `want` (at most the hard limit); returns the soft limit."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to raise
        return 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.info("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    return want if soft == resource.RLIM_INFINITY else soft


def open_files_per_cache(limit: int) -> int:
    """Files each cache may keep open under a soft limit of `limit`: an eighth of it, within bounds."""
    return max(MIN_OPEN_PER_CACHE, min(MAX_OPEN_PER_CACHE, limit // 8))
