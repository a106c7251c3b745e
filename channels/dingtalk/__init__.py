"""The DingTalk channel: an app robot over Stream mode (no public URL), replies through the message's
session webhook or the robot OpenAPI.

Only DingTalk's protocol lives here; access, intake, delivery, progress and approvals are the channel
kit's (clawgate.channels.kit). Receiving uses the official SDK, `dingtalk-stream` (the `dingtalk` extra),
imported only when the channel runs (docs/dingtalk.md).
"""
