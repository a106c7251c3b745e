"""The agent's workspace: the template files `clawgate init` writes, and the path guard."""
