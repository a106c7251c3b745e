"""A fake of neonize's client (in the daemon) and of WhatsApp behind it (in the test): docs/whatsapp.md."""

from tests.fakes.whatsapp_linked.server import BOT_NUMBER, GROUP, FakeWhatsAppLinked, Sent, text_of

__all__ = ["BOT_NUMBER", "GROUP", "FakeWhatsAppLinked", "Sent", "text_of"]
