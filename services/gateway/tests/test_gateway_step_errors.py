"""What a failed hop shows the user: the step and the cause, never gRPC's peer details (addresses, ports)."""

from __future__ import annotations

import grpc
from grpc import aio

from ragmesh_gateway.mesh import StepFailed

PEER = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:50053: Failed to connect"


def rpc_error(code: grpc.StatusCode, details: str) -> aio.AioRpcError:
    return aio.AioRpcError(code, aio.Metadata(), aio.Metadata(), details=details)


def test_an_unavailable_hop_names_the_step_and_the_cause_only() -> None:
    failed = StepFailed.from_rpc("retrieve", rpc_error(grpc.StatusCode.UNAVAILABLE, PEER))
    assert failed.http_status == 503
    assert failed.message == (
        "the retrieve step (retriever service) is unavailable (UNAVAILABLE: the service is unreachable)"
    )
    assert failed.payload()["service"] == "retriever"


def test_a_step_over_several_services_names_the_step_only() -> None:
    failed = StepFailed.from_rpc("iterate", rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, PEER))
    assert failed.message == "the iterate step is unavailable (DEADLINE_EXCEEDED: no reply within the deadline)"
    assert "service" not in failed.payload()


def test_a_refusal_keeps_its_message_without_addresses() -> None:
    failed = StepFailed.from_rpc("retrieve", rpc_error(grpc.StatusCode.INVALID_ARGUMENT, f"bad filter ({PEER})"))
    assert failed.http_status == 400
    assert "127.0.0.1" not in failed.message and "ipv4" not in failed.message
    assert failed.message.startswith("bad filter (failed to connect to all addresses")
