"""The channel kit: everything a chat channel needs beyond its platform's protocol (docs/channels.md).

An adapter implements PlatformAdapter and sees its kit as AdapterKit (adapter.py, the kit's contract,
which imports none of the kit's services); the kit does access and pairing, commands,
idempotent intake, files, chunked delivery with retries, typing and status, approval prompts,
isolation (runner.py) and discovery through the `clawgate.channels` entry points (registry.py).
"""

from clawgate.channels.base import DeliveryError

from .access import AccessPolicy, AccessSettings, Sender, Verdict, decide, may_approve
from .adapter import (AdapterKit, Capabilities, ChannelAuthError, ChannelUnavailable, Incoming, IncomingFile,
                      PlatformAdapter, Target, Unconfirmed, send_key_digest)
from .commands import parse_command
from .kit import ChannelKit, ChannelServices
from .markdown import split_markdown, to_plain
from .pairing import PairingError, PairingStore
from .store import ChannelStore

__all__ = ["AccessPolicy", "AccessSettings", "AdapterKit", "Capabilities", "ChannelAuthError", "ChannelKit",
           "ChannelServices", "ChannelStore", "ChannelUnavailable", "DeliveryError", "Incoming", "IncomingFile", "PairingError",
           "PairingStore", "PlatformAdapter", "Sender", "Target", "Unconfirmed", "Verdict", "decide", "may_approve",
           "parse_command", "send_key_digest", "split_markdown", "to_plain"]
