"""The MessageBus and the two message types that cross it: the agent's only input and output."""

from .bus import Intake, MessageBus
from .messages import InboundMessage, OutboundMessage, new_id
from .outbox_files import discard_file, read_file, store_file, unsent_line
from .sqlite import SqliteBus

__all__ = ["InboundMessage", "Intake", "MessageBus", "OutboundMessage", "SqliteBus", "discard_file", "new_id",
           "read_file", "store_file", "unsent_line"]
