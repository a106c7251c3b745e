"""The number a pairing code is asked for: E.164 as people write it, anything else one line naming the form;
and a link that cannot work refused by the adapter before anything connects."""

from __future__ import annotations

import pytest

from clawgate.channels.kit import ChannelAuthError
from clawgate.channels.whatsapp.adapter import WhatsAppAdapter
from clawgate.channels.whatsapp.login import phone_digits
from clawgate.channels.whatsapp.settings import WhatsAppSettings


@pytest.mark.parametrize(("written", "digits"), [
    ("+15551234567", "15551234567"),
    ("+1 (555) 123-4567", "15551234567"),
    ("44 20 7946 0958", "442079460958"),
    ("+683 4002", "6834002"),  # Niue: among the shortest numbers in use
    ("+86 139 1234 5678 9", "86139123456789"),  # 14 digits
])
def test_a_number_with_its_country_code_is_its_digits(written: str, digits: str) -> None:
    assert phone_digits(written) == digits


@pytest.mark.parametrize(("written", "words"), [
    ("+1 555", "is not a phone number in international form"),
    ("0171 2345678", "write the country code instead of the leading 0"),
    ("+1234567890123456", "is not a phone number in international form"),  # 16 digits: longer than E.164
    ("+1 555 CALL NOW", "is not a phone number in international form"),
    ("++15551234567", "is not a phone number in international form"),
    ("15551234567; rm -rf /", "is not a phone number in international form"),
    ("", "is not a phone number in international form"),
])
def test_anything_else_is_one_line_naming_the_form_expected(written: str, words: str) -> None:
    with pytest.raises(ChannelAuthError) as refused:
        phone_digits(written)
    line = str(refused.value)
    assert words in line and "+15551234567" in line and "\n" not in line


def test_the_adapter_refuses_a_cloud_account_and_a_bad_number_before_anything_connects() -> None:
    linked, cloud = WhatsAppSettings(mode="linked"), WhatsAppSettings(mode="cloud")
    WhatsAppAdapter.link_check(linked, "+15551234567")
    WhatsAppAdapter.link_check(linked)
    with pytest.raises(ChannelAuthError, match='only mode = "linked" links a device'):
        WhatsAppAdapter.link_check(cloud)
    with pytest.raises(ChannelAuthError, match="not a phone number"):
        WhatsAppAdapter.link_check(linked, "12")
