"""The `ragmesh` command-line tool: a client of the gateway's HTTP API (documents, chat, search, traces)."""
