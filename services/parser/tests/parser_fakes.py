"""Stand-ins for Docling and the tokenizer that parser worker processes build in tests (importable by name in a
worker, and light: a worker imports this module, not the test that uses it)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ragmesh_parser.chunker import LEVEL_PARAGRAPH, ChunkRecord
from ragmesh_parser.document import Block, ParsedDocument


class Hostile:
    """Does what the file's name says (burn CPU, grab memory, hang), else reads the bytes as one paragraph."""

    def warmup(self) -> None:
        return None

    def parse(
        self, filename: str, content: bytes, fmt: str, progress: Callable[[int, int], None] | None = None
    ) -> ParsedDocument:
        if filename.startswith("cpu"):
            while True:  # pure CPU, as a converter lost in a pathological file
                sum(range(10_000))
        if filename.startswith("memory"):
            hoard = []
            while True:
                hoard.append(bytearray(64 * 1024 * 1024))
        if filename.startswith("hang"):
            time.sleep(3600)
        return ParsedDocument("t", fmt, 0, [Block("paragraph", content.decode())], "plain_text")


class OneChunk:
    """One paragraph chunk per document (no tokenizer)."""

    def count(self, text: str) -> int:
        return len(text.split())

    def chunk(self, parsed: ParsedDocument, document_id: str, max_tokens: int = 0) -> list[ChunkRecord]:
        text = " ".join(block.text for block in parsed.blocks)
        return [ChunkRecord(f"{document_id}:0", document_id, LEVEL_PARAGRAPH, "", 0, [], 0, text, "t", "paragraph")]


def hostile_worker() -> tuple[Hostile, OneChunk]:
    return Hostile(), OneChunk()
