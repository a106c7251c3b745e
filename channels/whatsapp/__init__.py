"""The WhatsApp channel (docs/whatsapp.md): Meta's Cloud API on the channel kit."""

from clawgate.channels.whatsapp.adapter import WhatsAppAdapter

__all__ = ["WhatsAppAdapter"]
