"""A fake signal-cli JSON-RPC daemon (multi-account `signal-cli daemon --http`), written from
signal-cli's documented interface (man/signal-cli-jsonrpc.5.adoc, signal-cli.1.adoc) and its handler's
error codes: tests/fakes/signal/server.py."""

from tests.fakes.signal.server import BOT_NUMBER, BOT_UUID, Call, FakeSignalCli, Person, Sent

__all__ = ["BOT_NUMBER", "BOT_UUID", "Call", "FakeSignalCli", "Person", "Sent"]
