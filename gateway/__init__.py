"""The daemon process: WebSocket gateway, MessageBus, durable inbox/outbox, wiring, CLI."""

__version__ = "0.1.0"
