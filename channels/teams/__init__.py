"""The Microsoft Teams channel: an Azure Bot (Bot Framework) on the Microsoft 365 Agents SDK's pieces.

Only Teams' protocol lives here (signed activities in, the Bot Connector out); access, intake, delivery,
progress and approvals are the channel kit's (clawgate.channels.kit). Needs the `teams` extra
(docs/teams.md); nothing of it is imported until a [channels.teams] section exists.
"""
