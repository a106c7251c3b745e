"""Infrastructure the rest of the agent stands on: the state database, durable writes, session lanes, events, errors, redaction, the audit log and traces."""
