"""Bindings at the kit's intake: the route is decided after access, from the place the adapter reports
(peer, guild and roles, team, room), and stored with the message (its key and metadata)."""

from __future__ import annotations

from pathlib import Path

from clawgate.channels.kit import AccessSettings, Incoming, Sender
from clawgate.config.agents import Agent, AgentConfig, Binding, BindingMatch, Place, Roster
from tests.unit.channels.kit.support import make_kit

OWNER, GUEST, STRANGER = Sender("1", "boss"), Sender("2", "guest"), Sender("3", "nobody")


def _roster(*bindings: tuple[str, dict[str, object]]) -> Roster:
    agents = {ident: Agent(ident, ident == "home", Path(f"/ws/{ident}"), AgentConfig(default=ident == "home"))
              for ident in ("home", "work", "team")}
    return Roster(agents, tuple(Binding(agent=a, match=BindingMatch(**m)) for a, m in bindings))


def _msg(sender: Sender, mid: str, *, private: bool = True, chat: str = "c1", **metadata: object) -> Incoming:
    return Incoming(message_id=mid, chat_id=chat if not private else f"dm{sender.user_id}", sender=sender,
                    private=private, text="hi", addressed=True, metadata=dict(metadata))


async def test_peer_guild_roles_and_default_routes_are_stored_with_the_message() -> None:
    seen: list[Place] = []
    roster = _roster(("work", {"channel": "memory", "peer": "2"}), ("team", {"guild": "G", "roles": ["r1"]}))

    def route(place: Place) -> Agent:
        seen.append(place)
        return roster.route(place)

    kit, _, inbox = make_kit(settings=AccessSettings(owner=["1"], allow_from=["2"], dm_policy="allowlist",
                                                     group_policy="open"), route=route)
    assert await kit.receive(_msg(OWNER, "1"))
    assert await kit.receive(_msg(GUEST, "2"))
    assert await kit.receive(_msg(OWNER, "3", private=False, chat="g1", guild_id="G", role_ids=["r0", "r1"]))
    assert await kit.receive(_msg(OWNER, "4", private=False, chat="g2", guild_id="G", role_ids=["r0"]))
    assert not await kit.receive(_msg(STRANGER, "5"))  # access first: a binding never lets anyone in
    assert [(m.session_key, m.metadata["agent"]) for m in inbox.messages] == [
        ("memory:dm1", "home"), ("agent:work:memory:dm2", "work"), ("agent:team:memory:g1", "team"),
        ("memory:g2", "home")]
    assert [p.peer for p in seen] == ["1", "2", "g1", "g2"]  # the stranger was never routed
    assert seen[2] == Place("memory", "default", peer="g1", guild="G", roles=frozenset({"r0", "r1"}))
    assert kit.locate("agent:work:memory:dm2") == ("dm2", None)  # another agent's session is in the same chat


async def test_without_a_roster_keys_and_metadata_are_as_before() -> None:
    kit, _, inbox = make_kit(settings=AccessSettings(owner=["1"], dm_policy="open"))
    assert await kit.receive(_msg(OWNER, "1", team_id="T1"))
    [msg] = inbox.messages
    assert msg.session_key == "memory:dm1" and "agent" not in msg.metadata
