"""Tasks and their steps: the store and the `task` tool."""
