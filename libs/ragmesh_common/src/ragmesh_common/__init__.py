"""Shared runtime for ragmesh services: config, server bootstrap, request context, telemetry."""
