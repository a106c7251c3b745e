"""The Feishu / Lark channel: a custom app's bot over the long-connection event stream (no public URL) and
the Open Platform's message API, both through lark-oapi, the official SDK (the `feishu` extra, imported only
when the channel runs). Only Feishu's protocol lives here; the rest is the channel kit's (docs/feishu.md).
"""
