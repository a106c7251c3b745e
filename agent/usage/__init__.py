"""Token usage: the ledger and its SQLite store."""
