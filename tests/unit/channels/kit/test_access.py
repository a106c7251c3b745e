"""The kit's access decisions, command addressing, session keys and pairing codes, without any network."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.agent.core.statedb import open_state_db
from clawgate.channels.kit.access import AccessPolicy, AccessSettings, Sender, Verdict, decide, may_approve
from clawgate.channels.kit.commands import for_another_bot, parse_command
from clawgate.channels.kit.keys import parse_session_key, session_key
from clawgate.channels.kit.pairing import ALPHABET, CODE_LENGTH, PairingError, PairingStore
from clawgate.channels.telegram.channel import strip_mention

BOT = "clawgate_test_bot"
ALICE = Sender("111", "Alice")
BOB = Sender("222", None)


def policy(dm: str = "pairing", group: str = "allowlist", allow: tuple[str, ...] = ()) -> AccessPolicy:
    return AccessPolicy.build(dm, group, allow)  # type: ignore[arg-type]


@pytest.mark.parametrize("dm, allow, paired, refused, expected", [
    ("open", (), False, False, Verdict.ADMIT),
    ("pairing", (), False, False, Verdict.PAIR),
    ("pairing", (), False, True, Verdict.PAIR),  # pairing never goes silent by itself; the code reply is once
    ("pairing", (), True, False, Verdict.ADMIT),
    ("pairing", ("111",), False, False, Verdict.ADMIT),
    ("pairing", ("@alice",), False, False, Verdict.ADMIT),  # usernames: '@' optional, any case
    ("allowlist", (), False, False, Verdict.REFUSE),
    ("allowlist", (), False, True, Verdict.IGNORE),  # refused once, then silence
    ("allowlist", ("*",), False, False, Verdict.ADMIT),
    ("allowlist", (), True, False, Verdict.ADMIT),
])
def test_private_chats(dm: str, allow: tuple[str, ...], paired: bool, refused: bool, expected: Verdict) -> None:
    assert decide(policy(dm, allow=allow), ALICE, private=True, paired=paired, refused_before=refused) is expected


def test_groups() -> None:
    listed = policy("open", "allowlist", ("alice",))
    assert decide(listed, ALICE, private=False, paired=False, refused_before=False) is Verdict.ADMIT
    assert decide(listed, BOB, private=False, paired=False, refused_before=False) is Verdict.REFUSE
    assert decide(listed, BOB, private=False, paired=False, refused_before=True) is Verdict.IGNORE
    assert decide(listed, BOB, private=False, paired=True, refused_before=False) is Verdict.ADMIT
    assert decide(policy("open", "open"), BOB, private=False, paired=False, refused_before=False) is Verdict.ADMIT
    disabled = policy("open", "disabled", ("111",))
    assert decide(disabled, ALICE, private=False, paired=True, refused_before=False) is Verdict.IGNORE


def test_only_owners_may_approve() -> None:
    """Being admitted (listed, paired, an open policy) never makes someone an approver."""
    guests = AccessPolicy.build("open", "open", ("*", "111", "@bob"))
    assert not may_approve(guests, ALICE) and not may_approve(guests, BOB)
    owned = AccessPolicy.build("pairing", "allowlist", (), owners=("@ALICE",))
    assert owned.bound == {} and not may_approve(owned, ALICE)  # a username is an owner once bound to an id
    assert owned.claim(ALICE) == "alice" and owned.claim(BOB) is None
    owned.bound["alice"] = ALICE.user_id  # what the channel does at first contact (and keeps in its state)
    assert may_approve(owned, ALICE) and not may_approve(owned, BOB)
    assert owned.claim(Sender("333", "alice")) is None  # bound for good: the username cannot move to another id
    assert not may_approve(owned, Sender("333", "alice"))
    assert not may_approve(AccessPolicy.build("open", "open", (), owners=("*",)), BOB)  # '*' is never an owner


def test_owners_are_always_admitted_unless_groups_are_off() -> None:
    owned = AccessPolicy.build("allowlist", "allowlist", (), owners=("111",))
    assert decide(owned, ALICE, private=True, paired=False, refused_before=True) is Verdict.ADMIT
    assert decide(owned, ALICE, private=False, paired=False, refused_before=True) is Verdict.ADMIT
    off = AccessPolicy.build("allowlist", "disabled", (), owners=("111",))
    assert decide(off, ALICE, private=False, paired=False, refused_before=False) is Verdict.IGNORE


NAMES = ("new", "stop", "status")


@pytest.mark.parametrize("text, expected", [
    ("hello", None),
    ("/new", ("new", "")),
    (f"/STOP@{BOT}", ("stop", "")),
    ("/stop", ("stop", "")),  # a bare `/cmd` in a group is for every bot there, us included
    ("/stop@other_bot", None),
    ("/status  now please", ("status", "now please")),
    ("/translate this please", None),  # not ours: ordinary text for the model
])
def test_commands(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_command(text, NAMES, BOT) == expected


def test_a_command_for_another_bot_is_not_ours_to_read() -> None:
    assert for_another_bot("/stop@other_bot", BOT) and for_another_bot("/anything@other_bot now", BOT)
    assert not for_another_bot(f"/stop@{BOT}", BOT) and not for_another_bot("/stop", BOT)
    assert not for_another_bot("hello @other_bot", BOT)


def test_the_bots_own_mention_is_removed() -> None:
    assert strip_mention(f"@{BOT} hello there", BOT) == "hello there"
    assert strip_mention(f"hey @{BOT.upper()}, look", BOT) == "hey , look"
    assert strip_mention(f"@{BOT}x stays", BOT) == f"@{BOT}x stays"


@pytest.mark.parametrize("group, dm, known, expected", [
    ("mention", "pairing", False, Verdict.REFUSE),  # a stranger mentioning the bot: the DM rules say no
    ("mention", "pairing", True, Verdict.ADMIT),
    ("mention", "open", False, Verdict.ADMIT),  # whoever a DM admits
    ("allowlist", "open", False, Verdict.REFUSE),  # Telegram's old default keeps its meaning
    ("allowlist", "open", True, Verdict.ADMIT),
    ("open", "allowlist", False, Verdict.ADMIT),
    ("disabled", "open", True, Verdict.IGNORE),
])
def test_the_group_matrix(group: str, dm: str, known: bool, expected: Verdict) -> None:
    policy = AccessPolicy.build(dm, group, ("111",) if known else ())  # type: ignore[arg-type]
    assert decide(policy, ALICE, private=False, paired=False, refused_before=False) is expected


def test_private_chats_can_be_disabled_except_for_owners() -> None:
    policy = AccessPolicy.build("disabled", "mention", ("111",), owners=("222",))
    assert decide(policy, ALICE, private=True, paired=True, refused_before=False) is Verdict.IGNORE
    assert decide(policy, BOB, private=True, paired=False, refused_before=False) is Verdict.ADMIT


def test_session_keys_round_trip() -> None:
    assert session_key("telegram", 42) == "telegram:42" and session_key("telegram", -100123, 7) == "telegram:-100123:7"
    assert parse_session_key("telegram:-100123:7", "telegram") == ("-100123", "7")
    assert parse_session_key("telegram:42", "telegram") == ("42", None)
    assert parse_session_key("main", "telegram") is None and parse_session_key("cron:job", "telegram") is None
    assert parse_session_key("discord:42", "telegram") is None



def test_a_platform_whose_ids_contain_colons_reads_its_own_keys_back() -> None:
    """A run the kit did not see start (replayed, or taken in by another process of a fleet) finds its chat
    from the key alone: Matrix room ids have ':' inside (and a port may add one), thread roots start with '$'."""
    from clawgate.channels.matrix.adapter import MatrixAdapter

    split = MatrixAdapter.split_chat
    for room, thread in [("!abc:example.org", None), ("!abc:example.org", "$ev1"), ("!abc:localhost:8448", "$ev:old.org"),
                         ("!abc:localhost:8448", None)]:
        key = session_key("matrix", room, thread)
        assert parse_session_key(key, "matrix", split) == (room, thread), key
    assert parse_session_key("matrix:#alias:example.org", "matrix", split) is None  # not a room id
    assert parse_session_key("telegram:42", "matrix", split) is None

# pairing codes ---------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pairing(clock: Clock, tmp_path: Path) -> PairingStore:
    return PairingStore(open_state_db(tmp_path / "state.db", fsync=False), ttl_seconds=3600, max_pending=3,
                        interval_seconds=600, clock=clock)


def test_codes_are_unambiguous_and_stable_per_user(pairing: PairingStore) -> None:
    first = pairing.request("telegram", "1", "ann", "1")
    assert first is not None and len(first.code) == CODE_LENGTH and set(first.code) <= set(ALPHABET)
    assert not set(ALPHABET) & set("01OIL")
    again = pairing.request("telegram", "1", "ann", "1")
    assert again is not None and again.code == first.code


def test_a_full_table_replaces_the_oldest_code_instead_of_refusing(pairing: PairingStore, clock: Clock) -> None:
    codes = {u: pairing.request("telegram", str(u), None, str(u)) for u in (1, 2, 3)}
    clock.now += 1
    newest = pairing.request("telegram", "4", None, "4")
    assert not newest.replaced and [r.user_id for r in pairing.pending("telegram")] == ["2", "3", "4"]
    with pytest.raises(PairingError, match="may have expired"):
        pairing.approve("telegram", codes[1].code)  # the replaced code no longer admits anyone
    # the pushed-out user gets no new code (and pushes no one else out) until the interval has passed
    again = pairing.request("telegram", "1", None, "1")
    assert again.replaced and again.code == codes[1].code and again.expires_at == codes[1].created_at + 600
    assert [r.user_id for r in pairing.pending("telegram")] == ["2", "3", "4"]
    clock.now += 600
    fresh = pairing.request("telegram", "1", None, "1")
    assert not fresh.replaced and fresh.code != codes[1].code
    assert [r.user_id for r in pairing.pending("telegram")] == ["3", "4", "1"]


def test_asking_again_keeps_the_same_code_and_pushes_no_one_out(pairing: PairingStore, clock: Clock) -> None:
    first = {u: pairing.request("telegram", str(u), None, str(u)).code for u in (1, 2, 3)}
    for _ in range(10):
        clock.now += 1
        assert pairing.request("telegram", "2", None, "2").code == first[2]
    assert {r.user_id: r.code for r in pairing.pending("telegram")} == {str(u): c for u, c in first.items()}


def test_a_real_user_pairs_while_strangers_flood(pairing: PairingStore, clock: Clock) -> None:
    for stranger in range(100, 110):
        pairing.request("telegram", str(stranger), None, str(stranger))
    clock.now += 1
    mine = pairing.request("telegram", "7", "me", "7")
    assert not mine.replaced
    for stranger in range(110, 112):  # fewer than the cap arrive before the owner approves
        clock.now += 1
        pairing.request("telegram", str(stranger), None, str(stranger))
    assert pairing.approve("telegram", mine.code).user_id == "7" and pairing.is_paired("telegram", "7")


def test_codes_expire(pairing: PairingStore, clock: Clock) -> None:
    code = pairing.request("telegram", "1", None, "1")
    clock.now += 3601
    assert pairing.pending("telegram") == []
    with pytest.raises(PairingError, match="may have expired"):
        pairing.approve("telegram", code.code)
    assert pairing.request("telegram", "1", None, "1").code != code.code


def test_the_default_cap_leaves_room_for_real_users() -> None:
    from clawgate.config.schema import TelegramSettings

    assert TelegramSettings().pairing_max_pending >= 50 and AccessSettings().pairing_max_pending >= 50


def test_only_one_of_the_processes_sharing_the_database_tells_an_approved_user(pairing: PairingStore,
                                                                               tmp_path: Path) -> None:
    """A fleet's processes share state/clawgate.db: each sees the user unnotified, one marks (and tells) them."""
    other = PairingStore(open_state_db(tmp_path / "state.db", fsync=False), ttl_seconds=3600, max_pending=3)
    request = pairing.request("telegram", "7", "zed", "7")
    assert request is not None
    pairing.approve("telegram", request.code)
    assert pairing.unnotified("telegram") == other.unnotified("telegram") == [("7", "7")]
    assert [other.mark_notified("telegram", "7"), pairing.mark_notified("telegram", "7")] == [True, False]
    assert pairing.unnotified("telegram") == []


def test_approve_admits_once_and_accepts_sloppy_typing(pairing: PairingStore) -> None:
    request = pairing.request("telegram", "7", "zed", "7")
    assert request is not None and not pairing.is_paired("telegram", "7")
    sloppy = request.code.lower()[:4] + "-" + request.code.lower()[4:]
    approved = pairing.approve("telegram", sloppy)
    assert approved.user_id == "7" and pairing.is_paired("telegram", "7")
    assert pairing.unnotified("telegram") == [("7", "7")]
    pairing.mark_notified("telegram", "7")
    assert pairing.unnotified("telegram") == []
    with pytest.raises(PairingError) as info:
        pairing.approve("telegram", request.code)  # used up
    assert "\n" not in str(info.value) and "pairing list" in str(info.value)
    with pytest.raises(PairingError, match="not a pairing code"):
        pairing.approve("telegram", "0OIL")
    assert pairing.revoke("telegram", "@zed") and not pairing.is_paired("telegram", "7")


def test_an_owner_named_by_a_platform_id_with_an_at_sign_is_the_owner_from_the_first_message() -> None:
    """Matrix ids start with '@' (`@alice:example.org`); owner entries are kept without it, so the id
    must be compared the same way, or the owner would only count after a username binding."""
    policy = AccessPolicy.build("pairing", "mention", [], ["@Alice:example.org"])
    assert policy.is_owner(Sender("@alice:example.org"))
    assert not policy.is_owner(Sender("@alice:evil.example"))
    assert not policy.is_owner(Sender("alice"))
