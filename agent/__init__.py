"""The agent: loop, context layers, providers, tools, sessions, events."""
