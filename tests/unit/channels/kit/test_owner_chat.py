"""Each adapter says which owner entries name a private chat it can write to before the owner ever wrote
(PlatformAdapter.owner_chat): the kit asks approvals of the owner there. Entries come as the access lists
keep them (lower case, no leading '@')."""

from __future__ import annotations

import pytest

from clawgate.channels.kit.registry import load

UUID = "3f2a6c1e-0b6b-4d2a-9c1f-2b3c4d5e6f70"


def adapter(name: str) -> object:
    cls = load(name)
    return object.__new__(cls)  # owner_chat reads no settings and no connection: the platform's rule only


@pytest.mark.parametrize(("name", "entry", "chat"), [
    ("telegram", "4242", "4242"), ("telegram", "alice", None),  # a username is reached once bound to its id
    ("irc", "alice", "alice"), ("irc", "al[ice]", "al{ice}"), ("irc", "~alice", None),  # an account, casefolded
    ("signal", UUID, UUID), ("signal", "+15550100001", "+15550100001"), ("signal", "alice.01", None),
    ("email", "me@example.com", "me@example.com"), ("email", "example.com", None),
    ("whatsapp", "15550001001", None),  # the Cloud API never writes first (the 24-hour window)
    ("matrix", "alice:matrix.org", None),  # a private chat is a room, not the user id
    ("discord", "1234567890", None), ("slack", "u0123abcd", None),
])
def test_an_owner_entry_names_a_private_chat_only_where_the_platform_reaches_it(name: str, entry: str,
                                                                              chat: str | None) -> None:
    assert adapter(name).owner_chat(entry) == chat  # type: ignore[attr-defined]
