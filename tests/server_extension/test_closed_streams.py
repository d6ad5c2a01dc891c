"""A browser tab closed while it follows the events or a log ends its stream quietly:
no traceback in the server's log (which a hub gathers from every user's server), one
debug line.

A real jupyter-server forwarding to a stand-in job service that streams as the real one
does (an event every 50 ms); the stream is read with a raw socket and dropped midway,
as a closed tab drops it.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

HUB_TOKEN = "hub-token-of-adas-server"


@pytest.fixture
def streaming_service() -> Iterator[tuple[str, threading.Event]]:
    """A stand-in job service whose events and logs never end; ``ended`` is set when the
    server extension hung up on it (the browser's close passed on)."""
    ended = threading.Event()

    class Stream(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            events = self.path.endswith("/events")
            self.send_response(200)
            kind = "text/event-stream" if events else "text/plain; charset=utf-8"
            self.send_header("Content-Type", kind)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for n in range(2400):  # two minutes at most
                    frame = f'event: job\ndata: {{"n": {n}}}\n\n' if events else f"line {n}\n"
                    data = frame.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                    time.sleep(0.05)  # the stand-in's pace: a stream that keeps coming
            except OSError:
                ended.set()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stream)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/services/nbjobs/", ended
    httpd.shutdown()
    httpd.server_close()


def open_stream(server, path: str) -> socket.socket:
    """A GET of ``path`` on a socket of its own, read into its body."""
    url = urlsplit(server.url + path)
    sock = socket.create_connection((url.hostname, url.port), timeout=30)
    sock.sendall(
        f"GET {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Authorization: token {server.token}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


@pytest.mark.parametrize("path", ["nbjobs/api/events", "nbjobs/api/jobs/ab12/logs"])
def test_a_closed_tab_ends_its_stream_without_a_traceback(
    start_server, streaming_service, tmp_path, path
):
    url, ended = streaming_service
    # the server's debug lines too: the closed stream is said there, once
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "jupyter_server_config.json").write_text('{"ServerApp": {"log_level": "DEBUG"}}')
    server = start_server({"JUPYTERHUB_API_TOKEN": HUB_TOKEN, "NBJOBS_URL": url})
    tab = open_stream(server, path)
    tab.close()  # the tab closes while the service is still sending
    # the server stops reading from the service (whatever it logs is written by then)
    assert ended.wait(30), "the server went on reading a stream nobody reads"
    log = server.log.read_text()
    assert "Traceback" not in log
    assert "StreamClosedError" not in log
    assert "Uncaught exception" not in log
    said = [line for line in log.splitlines() if "went away" in line]
    assert len(said) == 1, said
    assert said[0].startswith("[D ")
    assert path in said[0]
