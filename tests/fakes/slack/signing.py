"""Slack request signing (v0): what Slack puts on the HTTP requests it sends to an app's URL.

    basestring = "v0:" + X-Slack-Request-Timestamp + ":" + raw body
    X-Slack-Signature = "v0=" + hex(HMAC-SHA256(signing_secret, basestring))
"""

from __future__ import annotations

import hashlib
import hmac
import time


def sign(signing_secret: str, timestamp: int | str, body: str | bytes) -> str:
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + str(timestamp).encode() + b":" + raw
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(signing_secret: str, body: str | bytes, *, timestamp: int | None = None,
                   content_type: str = "application/json") -> dict[str, str]:
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sign(signing_secret, ts, body),
    }
