"""How Google Chat shows a message's text: WhatsApp's markers (the same rules: *bold*, _italic_, ~strike~,
`code`, ```block```) plus `<url|text>` links, read as a person sees them."""

from __future__ import annotations

import re

from tests.fakes.whatsapp.reading import formats_of as _formats, plain_of as _plain

_LINK = re.compile(r"<((?:https?|mailto):[^|>\s]+)\|([^>]*)>")


def plain_of(text: str) -> str:
    return _plain(_LINK.sub(lambda m: m.group(2), text))


def formats_of(text: str) -> set[str]:
    kinds = _formats(_LINK.sub(lambda m: m.group(2), text))
    return kinds | ({"link"} if _LINK.search(text) else set())
