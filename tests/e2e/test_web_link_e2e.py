"""Linking WhatsApp (linked mode) from the web page: the real daemon with the fake of neonize's client
(tests/fakes/whatsapp_linked) and the fake WhatsApp here, the page in headless Chromium.

The daemon runs the same pairing as `clawgate channels login whatsapp`; the page shows each code WhatsApp
offers as the daemon's SVG, the next one when it rotates, then "linked", and the account's channel starts
without a restart. The codes reach the page that asked and nobody else (another owner client, the log);
one pairing per account; Cancel or closing the page stops the login's connection to WhatsApp. With a
phone number instead: a bad number is one line (the QR codes go on), WhatsApp's pairing code (neonize's
PairPhone through the fake) is shown to that page alone, the phone types it and the channel starts; a
code that expired says so and a new one is asked from the page; no other client can ask or take over.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable, Iterator

import pytest
import segno
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.conformance.platforms.whatsapp_linked import WhatsAppLinkedHarness
from tests.e2e.test_web_e2e import browser, expect, logged_in, screenshot  # noqa: F401 (browser: a fixture)
from tests.fakes.signal import FakeSignalCli
from tests.fakes.whatsapp.reading import plain_of
from tests.fakes.whatsapp_linked import BOT_NUMBER
from tests.fakes.whatsapp_linked.server import FIRST_CODE
from tests.harness import TOKEN, DaemonProcess
from tests.waiting import wait_until

OWNER = WhatsAppLinkedHarness.owner


RECORD_CODES = """() => {
  window.__codes = [];
  new MutationObserver(() => {
    const img = document.querySelector('#link-view img.qr');
    if (img && img.src && window.__codes[window.__codes.length - 1] !== img.src) window.__codes.push(img.src);
  }).observe(document.querySelector('#link-view'), {childList: true, subtree: true, attributes: true});
}"""


def image_of(code: str) -> str:
    """The QR code as the page must show it: segno's SVG of exactly that code."""
    return str(segno.make(code, error="l").svg_data_uri(scale=6, border=4))


class OwnerClient:
    """Another gateway client with the token (the owner's CLI or a second page): every frame it receives."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.ws: ClientConnection = connect(f"ws://127.0.0.1:{daemon.port}/")
        self.frames: list[dict[str, Any]] = []
        self.ids = 0
        self.ws.send(json.dumps({"type": "req", "id": "c0", "method": "connect",
                                 "params": {"auth": {"token": TOKEN}, "subscribe": "*"}}))
        assert json.loads(self.ws.recv(timeout=30))["ok"]
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            for data in self.ws:
                self.frames.append(json.loads(data))
        except ConnectionClosed:
            pass

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.ids += 1
        ident = f"c{self.ids}"
        self.ws.send(json.dumps({"type": "req", "id": ident, "method": method, "params": params}))
        return wait_until(lambda: next((f for f in self.frames if f.get("id") == ident), None), f"the answer to {method}")

    def events(self, name: str) -> list[dict[str, Any]]:
        return [f["payload"] for f in self.frames if f.get("type") == "event" and f.get("event") == name]

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def wa() -> Iterator[WhatsAppLinkedHarness]:
    harness = WhatsAppLinkedHarness()
    harness.start()
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def unlinked(wa: WhatsAppLinkedHarness, daemon_factory: Callable[..., DaemonProcess]) -> DaemonProcess:
    """A daemon whose WhatsApp account (linked mode) has never been linked: its channel failed, asking for it."""
    wa.fake.account().linked = False
    daemon = daemon_factory(wa.env(owner=[OWNER], dm_policy="allowlist", retry_base_seconds=0.05))
    wait_until(lambda: _state(daemon) == "failed", "the unlinked channel failed", describe=daemon.log_text)
    return daemon


def _state(daemon: DaemonProcess, name: str = "whatsapp") -> str:
    rows = json.loads(daemon.cli("channels", "--json").stdout)
    return str(next((r for r in rows if r["name"] == name), {}).get("state"))


def test_the_page_shows_each_code_until_the_phone_links_and_the_channel_starts_without_a_restart(
        browser, wa: WhatsAppLinkedHarness, unlinked: DaemonProcess) -> None:  # noqa: F811
    daemon, fake = unlinked, wa.fake
    other = OwnerClient(daemon)  # another owner client, watching every session: it must see no code
    try:
        page = logged_in(browser, daemon)
        row = page.locator('#channels li[data-channel="whatsapp"]')
        expect(row).to_contain_text("not linked yet")
        row.locator("button.link-device").click()
        qr = page.locator("#link-view img.qr")
        expect(qr).to_have_attribute("src", image_of(FIRST_CODE))
        expect(qr).to_be_visible()
        expect(page.locator("#link-view .link-status")).to_contain_text("Linked devices")
        screenshot(page, "link-whatsapp-qr")
        rotated = fake.rotate()  # WhatsApp's next code, about 20 s later
        expect(qr).to_have_attribute("src", image_of(rotated))
        assert image_of(rotated) != image_of(FIRST_CODE)

        fake.scan()  # the phone scanned it
        status = page.locator("#link-view .link-status")
        expect(status).to_contain_text(f"WhatsApp linked as +{BOT_NUMBER}")
        expect(status).to_contain_text("Its channel is starting")
        expect(qr).to_be_hidden()
        wait_until(lambda: _state(daemon) == "running", "the channel started", describe=daemon.log_text)
        expect(row).to_contain_text("running")
        expect(row.locator("button.link-device")).to_have_count(0)
        screenshot(page, "link-whatsapp-linked")

        fake.text(OWNER, "hello after linking")
        wait_until(lambda: [plain_of(s.text) for s in fake.to(f"{OWNER}@s.whatsapp.net")] == ["echo: hello after linking"],
                   "the answer through the newly linked device", describe=daemon.log_text)
        assert not page.errors, page.errors  # type: ignore[attr-defined]
    finally:
        other.close()
    assert not other.events("link") and "fake-ref" not in json.dumps(other.frames)
    log = daemon.log_text()
    assert "fake-ref" not in log and "data:image" not in log and "linking whatsapp: linked" in log


def test_one_pairing_per_account_and_cancel_or_closing_the_page_stops_it(
        browser, wa: WhatsAppLinkedHarness, unlinked: DaemonProcess) -> None:  # noqa: F811
    daemon, account = unlinked, wa.fake.account()
    other = OwnerClient(daemon)
    try:
        page = logged_in(browser, daemon)
        link = page.locator('#channels li[data-channel="whatsapp"] button.link-device')
        link.click()
        expect(page.locator("#link-view img.qr")).to_have_attribute("src", image_of(FIRST_CODE))
        assert len(account.conns) == 1  # the login's connection to WhatsApp
        busy = other.call("channels.link", channel="whatsapp")
        assert not busy["ok"] and busy["error"]["code"] == "conflict" and "already being linked" in busy["error"]["message"]
        theirs = other.call("channels.link.cancel", channel="whatsapp")
        assert not theirs["ok"] and theirs["error"]["code"] == "conflict"

        page.locator("#link-view button", has_text="Cancel").click()
        expect(page.locator("#link-view")).to_be_hidden()
        wait_until(lambda: not account.conns, "the login's connection closed after Cancel", describe=daemon.log_text)

        link.click()
        expect(page.locator("#link-view img.qr")).to_have_attribute("src", image_of(FIRST_CODE))
        page.close()  # leaving the page closes its connection: the pairing stops with it
        wait_until(lambda: not account.conns, "the login's connection closed with the page", describe=daemon.log_text)

        def link_again() -> dict | None:
            """Free again once the closed page's pairing has ended: until then (its login closed its connection
            first), a link is refused as taken, never otherwise."""
            answer = other.call("channels.link", channel="whatsapp")
            assert answer["ok"] or answer["error"]["code"] == "conflict", answer
            return answer if answer["ok"] else None

        started = wait_until(link_again, "the account free to link again", describe=daemon.log_text)
        assert started["payload"] == {"channel": "whatsapp", "state": "started"}  # its codes come to this client
        wait_until(lambda: other.events("link"), "the code to the client that asked")
        (event,) = other.events("link")
        assert event == {"channel": "whatsapp", "state": "qr", "image": image_of(FIRST_CODE)}
        for params, code, words in (({"channel": "whatsapp", "account": "nope"}, "not_found", "no account nope"),
                                    ({"channel": "telegram"}, "not_found", "no [channels.telegram]"),
                                    ({"channel": "whatsapp", "account": "../x"}, "invalid_params", "account")):
            answer = other.call("channels.link", **params)
            assert not answer["ok"] and answer["error"]["code"] == code and words in answer["error"]["message"], answer
    finally:
        other.close()
    wait_until(lambda: not account.conns, "the login's connection closed with the client", describe=daemon.log_text)
    assert "Traceback" not in daemon.log_text()


def test_signal_without_its_account_in_signal_cli_is_linked_from_the_page_and_starts(
        browser, daemon_factory: Callable[..., DaemonProcess]) -> None:  # noqa: F811
    """signal-cli holds no account of the configured number: the page links it (signal-cli's startLink URI
    as the daemon's SVG, finishLink waiting for the phone) and the channel starts without a restart."""
    with FakeSignalCli(keepalive_seconds=2.0) as signal:
        signal.scanned.clear()  # the phone has not scanned yet: finishLink waits
        env = {f"CLAWGATE_CHANNELS__SIGNAL__{k.upper()}": v for k, v in {
            "ENABLED": "true", "ACCOUNT": signal.linked_number, "BASE_URL": signal.url,
            "OWNER": json.dumps(["+15550100001"]), "RETRY_BASE_SECONDS": "0.05"}.items()}
        daemon = daemon_factory(env)
        wait_until(lambda: _state(daemon, "signal") == "failed", "the channel failed without its account",
                   describe=daemon.log_text)
        page = logged_in(browser, daemon)
        row = page.locator('#channels li[data-channel="signal"]')
        expect(row).to_contain_text("has no account")
        page.evaluate(RECORD_CODES)
        row.locator("button.link-device").click()
        qr = page.locator("#link-view img.qr")
        wait_until(lambda: signal.link_uri, "startLink asked")
        expect(qr).to_have_attribute("src", image_of(str(signal.link_uri)))
        expect(page.locator("#link-view .link-status")).to_contain_text("Link new device")
        signal.scanned.set()
        expect(page.locator("#link-view .link-status")).to_contain_text(f"Signal linked as {signal.linked_number}")
        wait_until(lambda: _state(daemon, "signal") == "running", "the channel started", describe=daemon.log_text)
        wait_until(lambda: signal.connected(signal.linked_number), "the linked account's event stream",
                   describe=daemon.log_text)
        owner = signal.add_person("owner", number="+15550100001")
        signal.write(owner, "hello after linking", account=signal.linked_number)
        wait_until(lambda: [m.message for m in signal.sent_to(owner.uuid)] == ["echo: hello after linking"],
                   "the answer from the linked account", describe=daemon.log_text)
        assert page.evaluate("window.__codes") == [image_of(str(signal.link_uri))]
        assert str(signal.link_uri) not in daemon.log_text()


PAIRING_CODE = re.compile(r"[1-9A-Z]{4}-[1-9A-Z]{4}")  # whatsmeow's: 8 of its alphabet, as ABCD-EFGH
SPOKEN_NUMBER = f"+{BOT_NUMBER[0]} ({BOT_NUMBER[1:4]}) {BOT_NUMBER[4:7]}-{BOT_NUMBER[7:]}"  # as people write it


def _ask_by_phone(page: Any, number: str) -> None:
    view = page.locator("#link-view")
    if view.locator("button.by-phone").is_visible():
        view.locator("button.by-phone").click()
    view.locator("form.link-phone input[name=phone]").fill(number)
    view.locator("form.link-phone button[type=submit]").click()


def test_a_phone_number_gets_a_pairing_code_the_phone_types_and_the_channel_starts_without_a_restart(
        browser, wa: WhatsAppLinkedHarness, unlinked: DaemonProcess) -> None:  # noqa: F811
    daemon, fake, account = unlinked, wa.fake, wa.fake.account()
    other = OwnerClient(daemon)  # another owner client, watching everything: it must see no code
    try:
        page = logged_in(browser, daemon)
        row = page.locator('#channels li[data-channel="whatsapp"]')
        row.locator("button.link-device").click()
        qr, status = page.locator("#link-view img.qr"), page.locator("#link-view .link-status")
        expect(qr).to_have_attribute("src", image_of(FIRST_CODE))

        _ask_by_phone(page, "+1 555")  # too short: one line, nothing asked of WhatsApp, the QR codes go on
        expect(status).to_have_text(re.compile(r"^WhatsApp: '\+1 555' is not a phone number in international form, "
                                               r"as \+15551234567 .*7 to 15 digits\)$"))
        expect(status).to_have_class(re.compile(r"\bbad\b"))
        _ask_by_phone(page, "0171 2345678")
        expect(status).to_contain_text("starts with 0: write the country code instead of the leading 0")
        expect(qr).to_be_visible()
        assert not account.pairings
        rotated = fake.rotate()
        expect(qr).to_have_attribute("src", image_of(rotated))  # the QR pairing was left running

        _ask_by_phone(page, SPOKEN_NUMBER)
        wait_until(lambda: account.pairings, "the daemon asked WhatsApp for a pairing code", describe=daemon.log_text)
        ((number, code),) = account.pairings
        assert number == BOT_NUMBER and PAIRING_CODE.fullmatch(code), (number, code)
        shown = page.locator("#link-view output.pair-code")
        expect(shown).to_have_text(code)
        expect(status).to_contain_text("Linked devices → Link a device → Link with phone number instead")
        expect(qr).to_be_hidden()
        wait_until(lambda: len(account.conns) == 1, "the QR pairing's connection gave way to the phone-number one",
                   describe=daemon.log_text)
        screenshot(page, "link-whatsapp-pairing-code")

        assert not fake.type_code("ABCD-EFGH")  # a wrong code is refused on the phone: nothing links
        assert fake.type_code(code)  # the owner types the code shown on the page
        expect(status).to_contain_text(f"WhatsApp linked as +{BOT_NUMBER}")
        expect(status).to_contain_text("Its channel is starting")
        expect(shown).to_be_hidden()
        wait_until(lambda: _state(daemon) == "running", "the channel started", describe=daemon.log_text)
        expect(row).to_contain_text("running")
        fake.text(OWNER, "hello after pairing")
        wait_until(lambda: [plain_of(s.text) for s in fake.to(f"{OWNER}@s.whatsapp.net")] == ["echo: hello after pairing"],
                   "the answer through the device linked by code", describe=daemon.log_text)
        assert not page.errors, page.errors  # type: ignore[attr-defined]
    finally:
        other.close()
    assert not other.events("link") and code not in json.dumps(other.frames)
    log = daemon.log_text()
    assert code not in log and "linking whatsapp: linked" in log and "Traceback" not in log


def test_an_expired_pairing_code_says_so_and_the_page_asks_for_a_new_one(
        browser, wa: WhatsAppLinkedHarness, daemon_factory: Callable[..., DaemonProcess]) -> None:  # noqa: F811
    """WhatsApp's code is good while the device that asked waits for the phone; past the account's
    link_wait_seconds the login stops, so the code cannot link any more: the page says so and asks again."""
    account = wa.fake.account()
    account.linked = False
    daemon = daemon_factory({**wa.env(owner=[OWNER], dm_policy="allowlist", retry_base_seconds=0.05),
                             "CLAWGATE_CHANNELS__WHATSAPP__LINK_WAIT_SECONDS": "8"})
    wait_until(lambda: _state(daemon) == "failed", "the unlinked channel failed", describe=daemon.log_text)
    page = logged_in(browser, daemon)
    page.locator('#channels li[data-channel="whatsapp"] button.link-device').click()
    expect(page.locator("#link-view img.qr")).to_have_attribute("src", image_of(FIRST_CODE))
    _ask_by_phone(page, f"+{BOT_NUMBER}")
    wait_until(lambda: account.pairings, "the first pairing code", describe=daemon.log_text)
    first = account.pairings[0][1]
    expect(page.locator("#link-view output.pair-code")).to_have_text(first)

    status = page.locator("#link-view .link-status")
    expect(status).to_have_text("WhatsApp: the pairing code expired: no phone linked this device within 8 s; "
                                "ask for a new one")
    expect(page.locator("#link-view output.pair-code")).to_be_hidden()
    wait_until(lambda: not account.conns, "the expired login's connection closed", describe=daemon.log_text)
    assert not wa.fake.type_code(first)  # typed too late: its device is gone
    again = page.locator("#link-view button.ask-again")
    expect(again).to_be_visible()
    again.click()
    wait_until(lambda: len(account.pairings) == 2, "a new pairing code", describe=daemon.log_text)
    second = account.pairings[1][1]
    expect(page.locator("#link-view output.pair-code")).to_have_text(second)
    expect(again).to_be_hidden()
    assert wa.fake.type_code(second)
    expect(status).to_contain_text(f"WhatsApp linked as +{BOT_NUMBER}")
    wait_until(lambda: _state(daemon) == "running", "the channel started", describe=daemon.log_text)
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_only_the_client_that_asked_gets_a_pairing_code_and_a_non_linked_account_is_refused(
        wa: WhatsAppLinkedHarness, daemon_factory: Callable[..., DaemonProcess]) -> None:
    """Over the gateway protocol: a client without the token never reaches channels.link; another owner
    client can neither take a pairing over (with a number or without), nor cancel it, nor see its code;
    a Cloud API account and a bad number are one line each, before anything reaches WhatsApp."""
    account = wa.fake.account("home")
    account.linked = False
    phone = f"+{account.number}"
    daemon = daemon_factory({**wa.env(owner=[OWNER], dm_policy="allowlist", retry_base_seconds=0.05),
                             "CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__HOME__ENABLED": "true",
                             "CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__BIZ__MODE": "cloud",
                             "CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__BIZ__ENABLED": "false"})
    wait_until(lambda: _state(daemon, "whatsapp.home") == "failed", "the unlinked channel failed",
               describe=daemon.log_text)

    for first in ({"type": "req", "id": "x", "method": "connect", "params": {"auth": {"token": "not-the-token"}}},
                  {"type": "req", "id": "x", "method": "channels.link",
                   "params": {"channel": "whatsapp", "account": "home", "phone": phone}}):
        with connect(f"ws://127.0.0.1:{daemon.port}/") as stranger:
            stranger.send(json.dumps(first))
            with pytest.raises(ConnectionClosed) as closed:
                stranger.recv(timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    asker, other = OwnerClient(daemon), OwnerClient(daemon)
    try:
        for params, code, words in (
                ({"channel": "whatsapp", "account": "home", "phone": "+1 555"}, "invalid_params", "is not a phone number in international form"),
                ({"channel": "whatsapp", "account": "home", "phone": "+1 555 CALL NOW"}, "invalid_params", "is not a phone number"),
                ({"channel": "whatsapp", "account": "home", "phone": "0171 2345678"}, "invalid_params", "instead of the leading 0"),
                ({"channel": "whatsapp", "account": "home", "phone": "x" * 41}, "invalid_params", "phone"),
                ({"channel": "whatsapp", "account": "biz", "phone": phone}, "invalid_params",
                 'only mode = "linked" links a device'),
                ({"channel": "whatsapp", "account": "biz"}, "invalid_params", 'only mode = "linked" links a device')):
            answer = asker.call("channels.link", **params)
            assert not answer["ok"] and answer["error"]["code"] == code and words in answer["error"]["message"], answer
            assert "\n" not in answer["error"]["message"]
        assert not account.pairings and not account.conns  # nothing reached WhatsApp

        wa.fake.refuse_next_pairing("failed to request pairing code: rate-overlimit")  # WhatsApp says no
        assert asker.call("channels.link", channel="whatsapp", account="home", phone=phone)["ok"]
        wait_until(lambda: asker.events("link"), "WhatsApp's refusal to the client that asked", describe=daemon.log_text)
        assert asker.events("link") == [{"channel": "whatsapp.home", "state": "error", "text":
                                         f"WhatsApp refused a pairing code for {account.number}: "
                                         "failed to request pairing code: rate-overlimit"}]
        wait_until(lambda: not account.conns, "the refused login's connection closed", describe=daemon.log_text)
        asker.frames.clear()

        started = asker.call("channels.link", channel="whatsapp", account="home", phone=phone)
        assert started["ok"] and started["payload"] == {"channel": "whatsapp.home", "state": "started"}, started
        wait_until(lambda: asker.events("link"), "the pairing code to the client that asked", describe=daemon.log_text)
        ((number, code),) = account.pairings
        assert asker.events("link") == [{"channel": "whatsapp.home", "state": "code", "code": code}]
        for method, params in (("channels.link", {"channel": "whatsapp", "account": "home", "phone": phone}),
                               ("channels.link", {"channel": "whatsapp", "account": "home"}),
                               ("channels.link.cancel", {"channel": "whatsapp", "account": "home"})):
            refused = other.call(method, **params)
            assert not refused["ok"] and refused["error"]["code"] == "conflict", refused
        assert len(account.pairings) == 1 and len(account.conns) == 1  # the asker's pairing untouched
        assert wa.fake.type_code(code, "home")
        wait_until(lambda: any(e["state"] == "linked" for e in asker.events("link")), "linked", describe=daemon.log_text)
    finally:
        asker.close()
        other.close()
    assert not other.events("link") and code not in json.dumps(other.frames) and code not in daemon.log_text()
    wait_until(lambda: _state(daemon, "whatsapp.home") == "running", "the channel started", describe=daemon.log_text)
