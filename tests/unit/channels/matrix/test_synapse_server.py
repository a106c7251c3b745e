"""The test homeserver itself: a real Synapse answers, registers users, and carries a DM between two clients."""

from __future__ import annotations

from tests.matrix_support import Human, humans  # noqa: F401
from tests.servers.synapse import SERVER_NAME, Synapse


def test_two_people_talk_through_synapse(synapse: Synapse, humans) -> None:
    alice, bob = humans("alice"), humans("bob")
    assert alice.user_id.endswith(f":{SERVER_NAME}") and alice.user_id != bob.user_id
    room = alice.dm(bob.user_id)
    bob.wait(lambda: any(e.room_id == room for e in bob.events), "bob to join the DM alice created")
    sent = alice.send(room, "hello bob")
    got = bob.wait(lambda: [e for e in bob.seen(room, alice.user_id) if e.event_id == sent],
                   "bob to receive alice's message", describe=synapse.describe)
    assert got[0].body == "hello bob"
