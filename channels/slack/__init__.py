"""The Slack channel: Socket Mode (or the Events API over HTTP) in, the Web API out.

Only Slack's protocol lives here; access, intake, delivery, progress and approvals are the
channel kit's (clawgate.channels.kit). Needs the `slack` extra: `pip install 'clawgate[slack]'`.
"""

try:  # the `slack` extra; without it the channel is reported (one line) and the others run
    import slack_sdk  # noqa: F401
except ImportError as exc:
    raise ImportError(f"the Slack channel needs the slack extra ({exc.name} is missing): "
                      "pip install 'clawgate[slack]'") from None
