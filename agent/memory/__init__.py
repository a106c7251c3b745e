"""Long-term memory: the store, its search and the embeddings client."""
