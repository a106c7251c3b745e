"""A fake Telegram Bot API server for tests.

Why: the daemon must be exercised with the *real* python-telegram-bot client (its request
encoding, retry and polling logic are part of what we test), but without the network. This
module serves the Bot API over real HTTP on 127.0.0.1, so the daemon can run as a subprocess
and simply be configured with ``base_url=fake.base_url``.

Standard library only. All state is guarded by one lock/condition because the HTTP server
answers from many threads while the test thread injects and inspects.

The implementation lives in the ``tests.fakes.telegram`` package, one module per job; this
module re-exports its names so existing imports keep working.
"""

from __future__ import annotations

# Re-exports (private names included: tests and bench scripts import some of them).
from tests.fakes.telegram.failures import (  # noqa: F401
    _DEFAULT_DESCRIPTIONS,
    _ApiError,
    _Failure,
    _FailureInjection,
)
from tests.fakes.telegram.html import (  # noqa: F401
    _HTML_TAGS,
    _NAMED_ENTITIES,
    HtmlParseError,
    _byte_offset,
    _decode_entity,
    _parse_html,
    html_to_plain_length,
)
from tests.fakes.telegram.methods import _CHAT_ACTIONS, _BotMethods  # noqa: F401
from tests.fakes.telegram.observation import _Observation  # noqa: F401
from tests.fakes.telegram.params import (  # noqa: F401
    _INLINE_BUTTON_ACTIONS,
    MAX_CALLBACK_DATA_BYTES,
    MAX_MESSAGE_LENGTH,
    _ParamChecks,
)
from tests.fakes.telegram.records import JSONDict, _Queued, _Stored  # noqa: F401
from tests.fakes.telegram.server import (  # noqa: F401
    _STRING_FIELDS,
    FakeTelegram,
    _decode_value,
    _Handler,
    _parse_body,
)
from tests.fakes.telegram.updates import _UpdateInjection, _utf16_len  # noqa: F401

__all__ = ["FakeTelegram", "html_to_plain_length", "MAX_MESSAGE_LENGTH"]
