"""Embedded engines for one machine: PostgreSQL + pgvector, Redis, ArcadeDB (Bolt), started from PyPI wheels."""
