"""The Mattermost channel: a bot account on the REST API v4 and the WebSocket event stream.

Only Mattermost's protocol lives here; access, intake, delivery, progress and approvals are the channel
kit's (clawgate.channels.kit). No extra to install: it speaks HTTP and WebSocket with aiohttp, a core
dependency (mattermostdriver, the usual client, is unmaintained since 2022; docs/mattermost.md).
"""
