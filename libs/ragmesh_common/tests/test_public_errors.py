"""What users are shown of a failed call: the cause, never a peer address (gRPC's details name them)."""

from __future__ import annotations

import grpc
import pytest

from ragmesh_common.errors import public_message, redact_addresses

REFUSED = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:50053: Failed to connect"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ipv4:10.0.0.7:50053: Connection refused", "<address> Connection refused"),
        ("peer ipv6:[::1]:50053 reset", "peer <address> reset"),
        ("resolving dns:///embedder.ragmesh.svc:50053 failed", "resolving <address> failed"),
        ("unix:/run/ragmesh/embedder.sock: closed", "<address> closed"),
        ("host 192.168.1.20 unreachable", "host <address> unreachable"),
        ("ragmesh-embedder:50053 and localhost:6379", "<address> and <address>"),
        ("not a PDF", "not a PDF"),
        ("meeting at 12:30, version 3", "meeting at 12:30, version 3"),
    ],
)
def test_addresses_are_redacted_and_nothing_else(text: str, shown: str) -> None:
    assert redact_addresses(text) == shown


def test_a_service_side_failure_shows_only_its_cause() -> None:
    assert public_message(grpc.StatusCode.UNAVAILABLE, REFUSED) == "the service is unreachable (UNAVAILABLE)"
    assert public_message(grpc.StatusCode.INTERNAL, "Traceback ... /srv/app.py") == (
        "the service failed internally (INTERNAL)"
    )
    assert public_message(grpc.StatusCode.INVALID_ARGUMENT, "bad page range") == "bad page range"
    assert public_message(grpc.StatusCode.NOT_FOUND, None) == "NOT_FOUND"
