"""The content type an upload is catalogued with."""

from __future__ import annotations

import pytest

from ragmesh_gateway.documents import upload_mime_type


@pytest.mark.parametrize(
    ("filename", "declared", "expected"),
    [
        ("notes.md", "application/octet-stream", "text/markdown"),  # curl's default for a file part
        ("notes.md", None, "text/markdown"),
        ("table.csv", "", "text/csv"),
        (
            "deck.pptx",
            "binary/octet-stream",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        ),
        ("report.pdf", "application/pdf", "application/pdf"),
        ("page.html", "text/html; charset=utf-8", "text/html; charset=utf-8"),  # a specific type is kept as sent
        ("notes.md", "text/plain", "text/plain"),
        ("file.unknownext", "application/octet-stream", "application/octet-stream"),
        ("file.unknownext", None, ""),
    ],
)
def test_generic_or_missing_types_come_from_the_extension(filename: str, declared: str | None, expected: str) -> None:
    assert upload_mime_type(filename, declared) == expected
