"""Gateway: the HTTP face of ragmesh — chat (SSE), documents, traces, auth, and per-request orchestration."""
