"""The Google Chat channel: a Chat app on an HTTP endpoint, answering through the Chat API.

Only Google Chat's protocol lives here; access, intake, delivery, progress and approvals are the channel
kit's (clawgate.channels.kit). The libraries (`pip install clawgate[googlechat]`): google-apps-chat, the
official Chat API client (REST transport), and google-auth (the service account's token, the check of
the bearer token Google sends with each event). Both are imported only when the channel starts.
"""
