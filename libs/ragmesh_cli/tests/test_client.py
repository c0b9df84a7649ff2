"""The API client's pieces: error messages from each error shape, SSE parsing, ACL parsing, file collection."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ragmesh_cli.client import ApiError, error_message, raise_for_status, sse_events
from ragmesh_cli.ingest import collect, parse_acl


def test_error_message_reads_each_shape_of_the_error_model() -> None:
    assert error_message({"detail": "invalid token"}) == "invalid token"
    assert (
        error_message({"detail": {"step": "answer", "message": "answerer busy", "status": 503}})
        == "answer: answerer busy"
    )
    assert (
        error_message(
            {
                "detail": [
                    {"loc": ["body", "question"], "msg": "too long", "type": "x"},
                    {"loc": [], "msg": "bad", "type": "y"},
                ]
            }
        )
        == "body.question: too long; bad"
    )
    assert error_message("Bad Gateway") == "Bad Gateway"


def test_raise_for_status_gives_one_line_with_the_status_and_retry_after() -> None:
    response = httpx.Response(
        429, json={"detail": "rate limit: at most 60 requests per minute"}, headers={"Retry-After": "60"}
    )
    with pytest.raises(ApiError) as caught:
        raise_for_status(response)
    assert str(caught.value) == "HTTP 429: rate limit: at most 60 requests per minute (retry after 60 s)"
    assert caught.value.status == 429
    with pytest.raises(ApiError, match="HTTP 502: upstream down"):
        raise_for_status(httpx.Response(502, text="upstream down"))
    raise_for_status(httpx.Response(202, json={}))  # success passes


def test_sse_events_skip_pings_and_join_multi_line_data() -> None:
    lines = [
        ": ping",
        "",
        "event: progress",
        'data: {"stage": "retrieve"}',
        "",
        "event: token",
        'data: {"text":',
        'data: " hi"}',
        "",
        "data: {}",
        "",
    ]
    assert list(sse_events(lines)) == [("progress", {"stage": "retrieve"}), ("token", {"text": " hi"}), ("message", {})]
    assert list(sse_events(["event: final", 'data: {"a": 1}'])) == [("final", {"a": 1})]  # no blank line at the end


def test_parse_acl_accepts_json_and_key_value_forms() -> None:
    assert parse_acl([]) is None
    assert parse_acl(['{"departments": ["eng"], "public": false}']) == {"departments": ["eng"], "public": False}
    assert parse_acl(["departments=eng,hr; users=bob", "roles=admin", "public=yes"]) == {
        "departments": ["eng", "hr"],
        "users": ["bob"],
        "roles": ["admin"],
        "public": True,
    }
    assert parse_acl(["users=bob", "users=carol"]) == {"users": ["bob", "carol"]}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"department": ["eng"]}', "unknown key 'department'"),
        ("department=eng", "unknown key 'department'"),
        ("departments", "expected key=value"),
        ("public=maybe", "public must be true or false"),
        ('{"users": "bob"', "not valid JSON"),
        ('{"users": [1]}', "users must be a list of names"),
    ],
)
def test_parse_acl_refuses_what_the_api_would_refuse(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_acl([value])


def test_collect_walks_folders_and_skips_unsupported_and_hidden_files(tmp_path: Path) -> None:
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "a" / ".git").mkdir()
    (tmp_path / "a" / "one.md").write_text("# one")
    (tmp_path / "a" / "deep" / "two.PDF").write_bytes(b"%PDF")
    (tmp_path / "a" / "deep" / "logo.png").write_bytes(b"\x89PNG")
    (tmp_path / "a" / ".git" / "config.txt").write_text("x")
    (tmp_path / "b.txt").write_text("b")
    files, skipped = collect(
        [tmp_path / "a", tmp_path / "b.txt", tmp_path / "a" / "one.md", tmp_path / "missing"],
        frozenset({".md", ".pdf", ".txt"}),
    )
    assert files == [tmp_path / "a" / "deep" / "two.PDF", tmp_path / "a" / "one.md", tmp_path / "b.txt"]
    assert [(o.path.name, o.status, o.reason) for o in skipped] == [
        ("logo.png", "skipped", "unsupported extension .png"),
        ("missing", "error", "no such file or folder"),
    ]


def test_without_the_servers_formats_every_file_is_uploaded(tmp_path: Path) -> None:
    (tmp_path / "logo.png").write_bytes(b"\x89PNG")
    files, skipped = collect([tmp_path])
    assert files == [tmp_path / "logo.png"] and not skipped  # the gateway's 415 says it is unsupported
