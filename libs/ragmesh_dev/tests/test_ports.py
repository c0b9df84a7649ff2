"""Ports the launchers pick or default to stay out of the kernel's ephemeral range, where an outgoing
connection could hold one between the pick and the server's bind."""

from __future__ import annotations

import socket

import pytest

from ragmesh_dev.devstack import DEFAULT_PORTS
from ragmesh_dev.ports import LOWEST_PICKED_PORT, ephemeral_range, free_port, port_open, refused_port


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low, _ = ephemeral_range()
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)  # never the same port twice in one process
    if low - LOWEST_PICKED_PORT >= 1000:
        assert all(LOWEST_PICKED_PORT <= p < low for p in ports), sorted(ports)[-5:]
    for port in ports[:20]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_make_run_ports_are_below_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    inside = {name: port for name, port in DEFAULT_PORTS.items() if low <= port <= high}
    assert not inside, f"inside {low}-{high}: {inside}"


def test_a_held_refused_port_refuses_connections_and_cannot_be_taken() -> None:
    with refused_port() as port:
        assert not port_open("127.0.0.1", port)
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
