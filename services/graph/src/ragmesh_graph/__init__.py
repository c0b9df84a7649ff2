"""ragmesh graph service: an entity graph over chunks in Neo4j 5 (or ArcadeDB's Bolt server), permission-filtered."""
