"""Discord channel (discord.py): the Gateway for messages and interactions, REST for replies.

Only the platform's protocol lives here (see docs/discord.md); access, pairing, commands,
delivery retries, progress and approvals are the channel kit's (clawgate.channels.kit).
discord.py is an optional dependency (`pip install clawgate[discord]`), imported only when the
channel is enabled: the entry point names `clawgate.channels.discord.adapter:DiscordAdapter`.
"""
