"""The MessageBus and the two message types that cross it: the agent's only input and output."""

from .bus import Intake, MessageBus
from .messages import InboundMessage, OutboundMessage, new_id
from .sqlite import SqliteBus

__all__ = ["InboundMessage", "Intake", "MessageBus", "OutboundMessage", "SqliteBus", "new_id"]
