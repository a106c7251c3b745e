"""JSON text for the message path's busiest writers (session log, trace, gateway frames), built
without json.dumps's per-call layers.

json.dumps with any option set builds a JSONEncoder and runs its Python `encode` and `iterencode`
on every call; the C encoder underneath does the actual work. `encoder()` returns a function that
gives exactly json.dumps's text for the same options by calling the C encoder directly (a fresh one
per call, so each call has its own circular-reference check, as json.dumps has, and threads never
share one); where the interpreter has no C encoder it is json.dumps's own path.
"""

from __future__ import annotations

import json
from json import encoder as _std
from typing import Any, Callable

Default = Callable[[Any], Any]


def encoder(*, compact: bool = False, default: Default | None = None) -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=False, default=default[, separators=(",", ":") if compact])`."""
    item, key = (",", ":") if compact else (", ", ": ")
    make = _std.c_make_encoder
    if make is None or _std.c_encode_basestring is None:
        fallback = json.JSONEncoder(ensure_ascii=False, separators=(item, key), default=default)
        return fallback.encode
    # What JSONEncoder hands the C encoder: its `default` method raises the usual TypeError.
    on_other = default if default is not None else json.JSONEncoder().default
    escape = _std.c_encode_basestring

    def encode(value: Any) -> str:
        return "".join(make({}, on_other, escape, None, key, item, False, False, True)(value, 0))

    return encode
