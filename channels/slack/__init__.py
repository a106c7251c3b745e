"""The Slack channel: Socket Mode (or the Events API over HTTP) in, the Web API out.

Only Slack's protocol lives here; access, intake, delivery, progress and approvals are the
channel kit's (clawgate.channels.kit). Needs the `slack` extra: `pip install 'clawgate[slack]'`.
"""
