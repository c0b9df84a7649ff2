"""ragmesh ingestion: the Celery worker that turns an upload into searchable chunks (parse → embed → index → graph)."""
