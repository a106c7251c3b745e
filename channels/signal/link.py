"""The `sgnl://linkdevice` URI as a QR code a phone can scan from the terminal (segno, the `signal` extra)."""

from __future__ import annotations

import io

LINK_WAIT_SECONDS = 300.0  # finishLink waits for the phone; Signal's own link request expires before this


def link_qr(uri: str) -> str:
    """The QR code in block characters (two rows a line) and the URI under it; without segno, the URI and
    the line naming the extra."""
    try:
        import segno
    except ImportError:
        return f"{uri}\n(install the signal extra to see this as a QR code: pip install 'clawgate[signal]')"
    out = io.StringIO()
    segno.make(uri, error="m").terminal(out=out, compact=True)
    return f"{out.getvalue()}\n{uri}"
