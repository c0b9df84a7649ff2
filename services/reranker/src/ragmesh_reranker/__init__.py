"""Reranker: cross-encoder relevance scores with FlagEmbedding's FlagReranker."""
