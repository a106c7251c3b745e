"""[channels.irc]'s log-in by certificate and the renderer's wraps: a client certificate needs TLS and picks SASL
EXTERNAL; a wrapped line ends its chunk (what lets the kit keep an approval prompt's command off a wrap)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clawgate.channels.irc.render import line_bytes, render
from clawgate.channels.irc.settings import IrcSettings


def test_a_client_certificate_logs_in_by_sasl_external_and_needs_tls() -> None:
    assert IrcSettings(host="irc.example", tls_certfile="/etc/bot.pem").sasl_mechanism == "EXTERNAL"
    assert IrcSettings(host="irc.example", tls_certfile="/etc/bot.pem", sasl_password="pw").sasl_mechanism == "PLAIN"
    assert IrcSettings(host="irc.example").sasl_mechanism is None
    with pytest.raises(ValidationError, match="set tls = true"):
        IrcSettings(host="irc.example", tls=False, tls_certfile="/etc/bot.pem")
    with pytest.raises(ValidationError, match="without tls_certfile"):
        IrcSettings(host="irc.example", tls_keyfile="/etc/bot.key")


def test_a_line_too_long_for_one_privmsg_is_wrapped_and_ends_its_chunk() -> None:
    budget = line_bytes("bot!bot@host")
    long_line = "é" * budget  # two bytes each: about two PRIVMSGs
    chunks = render(f"before\n\n{long_line}\n\nafter", budget)
    assert len(chunks) == 2 and chunks[0].startswith("before\n") and chunks[1].endswith("\nafter")
    assert all(len(row.encode()) <= budget for chunk in chunks for row in chunk.split("\n"))
    assert "".join(row for chunk in chunks for row in chunk.split("\n") if row.startswith("é")) == long_line
    assert render("short\n\nlines", budget) == ["short\nlines"]
    assert line_bytes(None) < budget  # before the server showed us our user@host, the longest one is assumed
