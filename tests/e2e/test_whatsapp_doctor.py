"""`clawgate doctor` logs in to the WhatsApp Cloud API for real (the phone number's details with the token),
through the real CLI, against tests/fakes/whatsapp: logged in, each credential refused, a wrong base URL."""

from __future__ import annotations

from tests.e2e.test_doctor import home  # noqa: F401  (the initialised-home fixture)
from tests.e2e.test_doctor_channels import channel_line, section
from tests.fakes.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN, FakeWhatsApp
from tests.harness import DaemonProcess


def test_whatsapp_logged_in_refused_and_wrong_base_url(home: DaemonProcess) -> None:  # noqa: F811
    fake = FakeWhatsApp().start()
    try:
        env = section("whatsapp", access_token=TOKEN, phone_number_id=PHONE_NUMBER_ID, app_secret=APP_SECRET,
                      verify_token=VERIFY_TOKEN, base_url=fake.base_url)
        code, line, _ = channel_line(home, env, "whatsapp")
        assert code == 0 and line["status"] == "ok", line
        assert line["detail"] == "Cloud API number 15550783881 (Clawgate Test)"
        assert not fake.sent and not fake.attempts  # nothing sent

        code, line, raw = channel_line(home, {**env, **section("whatsapp", access_token="EAAGrevoked")}, "whatsapp")
        assert code == 1 and line["detail"].startswith("WhatsApp refused the access token: (190)"), line
        assert "access_token" in line["fix"] and "EAAGrevoked" not in raw
        code, line, _ = channel_line(home, {**env, **section("whatsapp", phone_number_id="12345")}, "whatsapp")
        assert code == 1 and line["detail"].startswith("WhatsApp refused the phone number id"), line
        assert "phone_number_id" in line["fix"]
        code, line, _ = channel_line(home, {**env, **section("whatsapp", app_secret="")}, "whatsapp")
        assert code == 1 and "app_secret is not set" in line["detail"], line

        code, line, _ = channel_line(home, {**env, **section("whatsapp", base_url=fake.base_url + "/graph")}, "whatsapp")
        assert code == 1 and "HTTP 404" in line["detail"] and "channels.whatsapp.base_url" in line["fix"], line
    finally:
        fake.stop()
