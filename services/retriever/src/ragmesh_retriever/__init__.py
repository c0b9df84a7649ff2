"""Retriever: the document catalogue (PostgreSQL, row-level security) and permission-aware hybrid search."""
