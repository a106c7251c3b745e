"""A fake Slack server for tests: Web API, Socket Mode and signed Events API requests.

The real slack_sdk runs against it unmodified: ``AsyncWebClient(token, base_url=fake.api_url)`` and
``SocketModeClient(app_token, web_client=…)``, which gets its WebSocket URL from the fake's
apps.connections.open. One module per job: workspace (ids, users, conversations, payloads),
limits (what Slack refuses in a message), webapi (methods), socket_mode (envelopes, acks,
retries, disconnect), signing (v0 request signatures), server (HTTP, injection, recording).
"""
