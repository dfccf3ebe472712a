"""The HTTP plumbing the test fakes share: a threaded server on 127.0.0.1, run in a daemon
thread, used as a context manager (:class:`LoopbackHTTP`).

The fakes (:mod:`~rubric_engine.testing.openai_stub`, its Anthropic variant, and
:mod:`~rubric_engine.testing.batch_stub`) differ in what their request handler answers; how
they listen, start and stop is this one piece.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # listen backlog: many clients connect at once
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client killed mid-request (the kill -9 tests): nothing to report
        super().handle_error(request, client_address)


class LoopbackHTTP:
    """A server bound to 127.0.0.1 only; ``base_url`` ends in ``/v1``."""

    def _listen(self, handler: type[BaseHTTPRequestHandler], port: int) -> None:
        """Bind ``handler`` to 127.0.0.1:``port`` (0 picks a free port); :meth:`start` serves."""
        self._server = _Server(("127.0.0.1", port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
