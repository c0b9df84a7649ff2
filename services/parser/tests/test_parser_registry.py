"""The format registry (ragmesh_common.formats.FORMATS) is the one place a format is declared: the parser's
Docling mapping, the accepted extensions, MIME types and content checks all follow from it. AsciiDoc was added
as one registry entry; this converts a real AsciiDoc file through the Parse RPC to prove nothing else is needed."""

from __future__ import annotations

import grpc
import pytest

from ragmesh.parser.v1 import parser_pb2, parser_pb2_grpc
from ragmesh_common import formats

ADOC = b"""= Release handbook

== Rollout

Every release is rolled out to the canary region first and watched for one hour.

== Rollback

A failed canary is rolled back with the previous image tag.
"""


def test_every_lookup_follows_the_registry() -> None:
    for fmt in formats.FORMATS:
        for ext in fmt.extensions:
            assert formats.detect_format(f"a.{ext}") == fmt.name
            assert f".{ext}" in formats.accepted_extensions()
        for mime in fmt.mime_types:
            assert formats.detect_format("upload", mime) == fmt.name
    assert len(formats.EXTENSIONS) == sum(len(f.extensions) for f in formats.FORMATS)  # no extension twice


async def test_a_format_added_to_the_registry_parses(parser_stub: parser_pb2_grpc.ParserServiceStub) -> None:
    reply = await parser_stub.Parse(parser_pb2.ParseRequest(filename="handbook.adoc", content=ADOC, document_id="d"))
    assert reply.format == "asciidoc"
    assert [h.text for h in reply.headings] == ["Release handbook", "Rollout", "Rollback"]
    paragraphs = [c for c in reply.chunks if c.text.startswith("A failed canary")]
    assert paragraphs and paragraphs[0].section_path[-1] == "Rollback"


async def test_the_registry_content_check_applies_to_it(parser_stub: parser_pb2_grpc.ParserServiceStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await parser_stub.Parse(
            parser_pb2.ParseRequest(filename="fake.adoc", content=b"\x7fELF\x00\x00binary", document_id="d")
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not the text a .adoc file holds" in (caught.value.details() or "")
