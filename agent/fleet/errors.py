"""The fleet's start-up error, in a module without redis so the CLI can name it cheaply."""


class FleetUnavailable(Exception):
    """The fleet cannot run: the message names Redis, the URL (password masked) and the fix."""
