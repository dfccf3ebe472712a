"""Loopback only: every benchmark process refuses to connect anywhere but 127.0.0.0/8 / ::1.

The same guard as the test suite's (tests/conftest.py): a connection to any other address, or a
name lookup other than ``localhost``, raises at once, so nothing a library tries on its own
(price maps, tokenizer downloads, telemetry, update checks) can leave the machine.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_real_connect = socket.socket.connect
_real_getaddrinfo = socket.getaddrinfo


def _allowed(host: Any) -> bool:
    if not isinstance(host, str) or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else None
    if not _allowed(host):
        raise ConnectionRefusedError(f"benchmarks may only connect to loopback, not {host}")
    return _real_connect(self, address)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is not None and not _allowed(host if isinstance(host, str) else host.decode()):
        raise OSError(f"benchmarks resolve no names but localhost (asked for {host})")
    return _real_getaddrinfo(host, *args, **kwargs)


def guard() -> None:
    """Install the guard for this process (idempotent)."""
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.getaddrinfo = _getaddrinfo
