"""Search backends behind one contract: pgvector (embedded default) and Weaviate (production)."""
