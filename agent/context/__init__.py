"""What the model sees: the context builder, compaction, consolidation, restatement, skills and the marking of untrusted text."""
