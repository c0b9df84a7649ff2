"""Which reading of a file this parser gives: `PARSER_VERSION`, raised whenever the same file would give other
blocks or chunks.

Each document records the reading its visible version was parsed with (`Document.parser_version`; 0 for documents
parsed before readings were recorded). A document with a lower one holds what an older parser read: `ragmesh docs
list --stale` finds those, `ragmesh docs reingest --stale` parses them again from their stored files (each stays
searchable meanwhile). `services/parser/tests/test_parser_reading.py` keeps a digest of what this parser reads from
the shared sample files: when the output changes and the version does not, it fails and says to raise it.

History: 1 — checkboxes keep their state ("[x] Design"), the title a file declares (stop 49–50 readings). 2 — an
HTML description list's term is one list item with what its descriptions say ("CSS: Cascading Style Sheets").
"""

from __future__ import annotations

PARSER_VERSION = 2
