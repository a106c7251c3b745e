"""A caller without the secret never makes the daemon read a body: raw sockets against the real daemon's
webhook listener send a request's headers and then hold the body back. The daemon must answer from the
headers alone (401, 413, 429) and close the connection; were it waiting for the body, it would answer
nothing until its read deadline (30 s) and then 408."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from tests.harness import DaemonProcess
from tests.hooks_support import SECRET, TOKEN, call, call_bearer, github_signature, hooks_daemon  # noqa: F401
from tests.waiting import DEFAULT_TIMEOUT

BEARER = f'[hooks.ci]\ntoken = "{TOKEN}"\nmax_body_bytes = 4096\n'
SIGNED = f'[hooks.gh]\nhmac_secret = "{SECRET}"\nmax_body_bytes = 4096\n'
STRIPE = f'[hooks.pay]\nhmac_secret = "{SECRET}"\nsignature_scheme = "stripe"\n'
HELD = 2000  # the length each request declares and never sends
HANG_UP_SECONDS = 5.0  # the daemon would linger 10 s draining a body; closing at once takes a loop turn


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: dict[str, Any], closed: bool) -> None:
        self.status, self.headers, self.body, self.closed = status, headers, body, closed


def held_request(daemon: DaemonProcess, name: str, headers: dict[str, str], length: int = HELD) -> Answer:
    """POST the request line and headers, declare `length` bytes of body, send none of it, and read the answer."""
    port = int(daemon.env["CLAWGATE_GATEWAY__HOOKS_PORT"])
    lines = [f"POST /hooks/{name} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
             f"Content-Length: {length}", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection(("127.0.0.1", port), timeout=DEFAULT_TIMEOUT) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return _read_answer(sock)


def _read_answer(sock: socket.socket) -> Answer:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the daemon closed the connection without an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    while len(rest) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk, "the answer's body was cut"
        rest += chunk
    # nothing more comes, and the daemon hangs up at once rather than wait for (or drain, for up to its
    # 10 s lingering time) the body it was promised
    answered = time.monotonic()
    closed = sock.recv(65536) == b"" and time.monotonic() - answered < HANG_UP_SECONDS
    return Answer(int(status_line.split()[1]), headers, json.loads(rest or b"{}"), closed)


async def test_a_caller_without_the_secret_is_answered_before_its_body_arrives(hooks_daemon, fake_model) -> None:
    daemon = hooks_daemon(BEARER + SIGNED + STRIPE)
    refused = [
        held_request(daemon, "ci", {}),                                        # no token
        held_request(daemon, "ci", {"Authorization": f"Bearer {TOKEN}x"}),     # a wrong one
        held_request(daemon, "ci", {"Authorization": f"Basic {TOKEN}"}),       # not a bearer
        held_request(daemon, "gh", {}),                                        # no signature header
        held_request(daemon, "gh", {"X-Hub-Signature-256": "sha256=abc"}),     # not 64 hex digits
        held_request(daemon, "gh", {"X-Hub-Signature-256": "sha1=" + "0" * 64}),
        held_request(daemon, "pay", {"Stripe-Signature": "v1=" + "0" * 64}),   # no time
        held_request(daemon, "pay", {"Stripe-Signature": "t=12x,v1=" + "0" * 64}),
    ]
    assert [a.status for a in refused] == [401] * len(refused), [(a.status, a.body) for a in refused]
    assert all(a.body == {"error": "unauthorized"} and a.closed for a in refused)

    # a well-formed signature whose body would be too large: 413 from the declared length, the body unread
    too_big = held_request(daemon, "gh", {"X-Hub-Signature-256": "sha256=" + "a" * 64}, length=5000)
    assert too_big.status == 413 and "max_body_bytes (4096)" in too_big.body["error"]

    # the same hooks still take a caller with the secret, and a signed one whose body does not match is a 401
    body = json.dumps({"ref": "main"}).encode()
    assert (await call(daemon, "gh", body, {"X-Hub-Signature-256": github_signature(body)})).status_code == 202
    wrong = await call(daemon, "gh", body + b" ", {"X-Hub-Signature-256": github_signature(body)})
    assert wrong.status_code == 401
    assert (await call_bearer(daemon, "ci", {"status": "ok"})).status_code == 202
    log = daemon.log_text()
    assert "hook ci: a call from 127.0.0.1 refused (401): no valid bearer token" in log
    assert "did not arrive in time" not in log


def test_expect_100_continue_is_answered_by_the_header_checks(hooks_daemon, fake_model) -> None:
    """curl and others ask before sending a large body: only a caller with the secret is told to go on."""
    daemon = hooks_daemon(BEARER)
    refused = held_request(daemon, "ci", {"Expect": "100-continue"})
    assert refused.status == 401 and refused.closed
    port = int(daemon.env["CLAWGATE_GATEWAY__HOOKS_PORT"])
    body = json.dumps({"status": "ok"}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=DEFAULT_TIMEOUT) as sock:
        sock.sendall((f"POST /hooks/ci HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Authorization: Bearer {TOKEN}\r\nExpect: 100-continue\r\nConnection: close\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode())
        go = b""
        while b"\r\n\r\n" not in go:
            chunk = sock.recv(1)  # byte by byte: nothing past the interim answer is read here
            assert chunk, go
            go += chunk
        assert go.startswith(b"HTTP/1.1 100 Continue"), go
        sock.sendall(body)
        answer = _read_answer(sock)
    assert answer.status == 202 and answer.body["duplicate"] is False


async def test_failed_authentications_are_limited_per_address_before_any_body_is_read(hooks_daemon, fake_model) -> None:
    daemon = hooks_daemon(BEARER + SIGNED)
    wrong = [await call_bearer(daemon, "ci", {"n": n}, token=TOKEN + "x") for n in range(20)]
    assert [r.status_code for r in wrong] == [401] * 20
    # past the budget: refused from the headers, whatever they say, before the body
    flooded = [held_request(daemon, "ci", {"Authorization": f"Bearer {TOKEN}y"}),
               held_request(daemon, "gh", {"X-Hub-Signature-256": "sha256=" + "a" * 64})]
    assert [a.status for a in flooded] == [429, 429] and all(a.closed for a in flooded)
    assert all(int(a.headers["retry-after"]) >= 1 for a in flooded)
    assert "too many failed authentications" in flooded[0].body["error"]
    # the right bearer token still passes (checking it read nothing), so a flood through a shared proxy
    # does not lock out the sender that holds it
    ok = await call_bearer(daemon, "ci", {"status": "still here"})
    assert ok.status_code == 202, ok.text


def test_an_unknown_hook_or_a_wrong_method_is_answered_and_closed_without_the_body(hooks_daemon, fake_model) -> None:
    daemon = hooks_daemon(BEARER)
    unknown = held_request(daemon, "nope", {"Authorization": f"Bearer {TOKEN}"})
    assert unknown.status == 404 and unknown.closed
    port = int(daemon.env["CLAWGATE_GATEWAY__HOOKS_PORT"])
    with socket.create_connection(("127.0.0.1", port), timeout=DEFAULT_TIMEOUT) as sock:
        sock.sendall(f"PUT /hooks/ci HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {HELD}\r\n\r\n".encode())
        wrong = _read_answer(sock)
    assert wrong.status == 405 and wrong.headers["allow"] == "POST" and wrong.closed
