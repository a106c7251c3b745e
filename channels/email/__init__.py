"""Email channel: IMAP in (IDLE or polling), SMTP out, threaded replies, no answers to machines.

See docs/email.md. The adapter (adapter.py) is the platform's protocol only; access, pairing,
commands, dedupe, delivery retries and approvals are the channel kit's.
"""
