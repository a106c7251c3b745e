"""The Microsoft Teams channel: an Azure Bot (Bot Framework) on the Microsoft 365 Agents SDK's pieces.

Only Teams' protocol lives here (signed activities in, the Bot Connector out); access, intake, delivery,
progress and approvals are the channel kit's (clawgate.channels.kit). Needs the `teams` extra
(docs/teams.md); nothing of it is imported until a [channels.teams] section exists.
"""

try:  # the `teams` extra; without it the channel is reported (one line) and the others run
    import jwt  # noqa: F401
    import markdown_it  # noqa: F401
    import microsoft_agents.activity  # noqa: F401
    import microsoft_agents.hosting.core  # noqa: F401
except ImportError as exc:
    raise ImportError(f"the Teams channel needs the teams extra ({exc.name} is missing): "
                      "pip install 'clawgate[teams]'") from None
