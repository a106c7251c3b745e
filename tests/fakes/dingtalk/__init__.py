"""A fake DingTalk (Stream gateway, OpenAPI, session webhooks) for the DingTalk channel's tests."""

from tests.fakes.dingtalk.server import CLIENT_ID, CLIENT_SECRET, FakeDingTalk, Person, Sent

__all__ = ["CLIENT_ID", "CLIENT_SECRET", "FakeDingTalk", "Person", "Sent"]
