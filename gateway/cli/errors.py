"""Exit codes and the one place a CLI error becomes `clawgate: <one line>` on stderr.

Commands raise CliError; only `main` prints it. The codes are documented in README.md
(section Commands) so scripts can tell "refused" from "no daemon" from "cannot talk to it".
"""

from __future__ import annotations

import sys

EXIT_OK = 0
EXIT_FAILED = 1          # the operation was refused: not found, conflict, already done, busy
EXIT_USAGE = 2           # usage or configuration error (including arguments the daemon rejects as invalid)
EXIT_NO_DAEMON = 3       # the command needs a running gateway and none is running
EXIT_UNREACHABLE = 4     # cannot talk to the gateway: wrong token, foreign server on the port, dropped, not answering
EXIT_ALREADY_RUNNING = 5  # `clawgate gateway`: another gateway already runs on this CLAWGATE_HOME
EXIT_INTERRUPTED = 130   # Ctrl-C
EXIT_BROKEN_PIPE = 141   # stdout closed early (`clawgate status --json | head -1`), as for other Unix tools


class CliError(Exception):
    """A problem the user can fix: one line naming it and the fix, and the exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def report(message: str, exit_code: int) -> int:
    """Print the one line (newlines folded, so it stays one line) and return the exit code."""
    line = " ".join(str(message).split())
    print(f"clawgate: {line}", file=sys.stderr, flush=True)
    return exit_code
