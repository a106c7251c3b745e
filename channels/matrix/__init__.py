"""The Matrix channel (docs/channels.md#matrix): a bot account on any homeserver, via matrix-nio.

The adapter is `clawgate.channels.matrix.adapter:MatrixAdapter` (the `matrix` entry point); this
package imports nothing itself, so its pure parts (events, render) load without the client library.
"""
