"""The Signal channel: signal-cli's JSON-RPC daemon (HTTP calls, Server-Sent Events in).

Only Signal's protocol lives here; access, intake, delivery, progress and approvals are the channel
kit's (clawgate.channels.kit). No extra to install: it speaks HTTP with aiohttp, a core dependency;
signal-cli itself runs beside clawgate (docs/signal.md).
"""
