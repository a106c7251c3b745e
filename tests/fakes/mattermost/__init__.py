"""A fake Mattermost server (REST API v4 and the WebSocket event stream), written from Mattermost's
published API reference: tests/fakes/mattermost/server.py."""

from tests.fakes.mattermost.server import BOT_TOKEN, BOT_USERNAME, Call, FakeMattermost, Post, User

__all__ = ["BOT_TOKEN", "BOT_USERNAME", "Call", "FakeMattermost", "Post", "User"]
