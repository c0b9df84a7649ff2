"""Embedder: dense text embeddings with FlagEmbedding, batching concurrent requests."""
