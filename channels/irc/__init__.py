"""The IRC channel: a bot nick on an IRC network, over the protocol itself (asyncio streams).

Only IRC lives here: CAP negotiation, SASL PLAIN or NickServ, mention-only channels and DMs, the
`account-tag` as the only identity, paced sending in lines under 512 bytes. Access, intake,
delivery, progress and approvals are the channel kit's (clawgate.channels.kit). No extra to
install (docs/irc.md).
"""
