"""The attacker of the symlink-race tests: flips a workspace folder and a symlink out of it, fast.

    python -m tests.fakes.symlink_racer FOLDER LINK COUNTER [exchange|rename|both]

FOLDER (a real folder in the workspace) and LINK (a symlink in the workspace pointing outside)
trade places as often as the machine allows, as a sandboxed program could: atomically with
renameat2(RENAME_EXCHANGE), or with three plain os.rename calls (both: alternately). Every
successful flip is counted; the count is written to COUNTER now and then, so the test can wait
until thousands of flips happened while it read and wrote. Runs until killed. A flip that fails
(the daemon removed or recreated a name meanwhile) is skipped and tried again.
"""

from __future__ import annotations

import ctypes
import os
import sys

RENAME_EXCHANGE = 2
AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a: str, b: str) -> None:
    """renameat2(a, b, RENAME_EXCHANGE): both names swap what they point at in one step."""
    if _libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), a)


def three_renames(a: str, b: str) -> None:
    spare = a + ".spare"
    os.rename(a, spare)
    try:
        os.rename(b, a)
    except OSError:
        os.rename(spare, a)
        raise
    os.rename(spare, b)


def main(argv: list[str]) -> int:
    folder, link, counter = argv[1], argv[2], argv[3]
    mode = argv[4] if len(argv) > 4 else "both"
    flips = 0
    while True:
        use_exchange = mode == "exchange" or (mode == "both" and flips % 2 == 0)
        try:
            (exchange if use_exchange else three_renames)(folder, link)
        except OSError:
            continue
        flips += 1
        if flips % 200 == 0:
            with open(counter + ".tmp", "w") as fh:
                fh.write(str(flips))
            os.replace(counter + ".tmp", counter)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
