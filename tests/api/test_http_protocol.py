"""What a real `rebill serve` answers to bytes its HTTP parser refuses (http/protocol.py): the
error shape with a request id, never uvicorn's plain-text 400, and the server goes on serving.
Raw sockets: an HTTP client would refuse to send most of these."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from rebill.errors import HEAD_TOO_LARGE, NOT_READABLE_HTTP, ONE_HOST, REQUEST_TIMEOUT
from tests.served import Server, serve

BAD = {
    "a request target over 64 KiB": b"GET /customers?ids=" + b"1," * 40_000 + b"1 HTTP/1.1\r\nHost: x\r\n\r\n",
    "a header line without a colon": b"GET /customers HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    "a space inside the method": b"G ET /customers HTTP/1.1\r\nHost: x\r\n\r\n",
    "a method HTTP does not know": b"FROB /customers HTTP/1.1\r\nHost: x\r\n\r\n",
    "a control character in the target": b"GET /cust\x01omers HTTP/1.1\r\nHost: x\r\n\r\n",
    "not HTTP at all": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) + b"\r\n\r\n",
    "a chunk size that is no number": (b"POST /customers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                       b"Content-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("protocol")) as running:
        yield running


def _exchange(server: Server, sent: bytes) -> bytes:
    """Everything the server answers before it closes the connection."""
    where = urlsplit(server.base_url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        try:
            conn.sendall(sent)
        except OSError:
            pass  # it may answer and close before reading everything sent
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize("what", list(BAD))
def test_bytes_the_parser_refuses_answer_400_in_the_error_shape(server, what):
    head, _, body = _exchange(server, BAD[what]).partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    assert status == "HTTP/1.1 400 Bad Request", (what, head)
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert len(headers["x-request-id"]) == 32 and int(headers["content-length"]) == len(body)
    # decisions §2.8: every response names a version; no store is known here (app.py's fallback).
    assert headers["x-service-version"] == "2021-01"
    assert json.loads(body) == {"errors": NOT_READABLE_HTTP}
    # The server goes on: the next request is answered as usual.
    assert server.request("GET", "/store")[0] == 200


def _answer_to_pieces(server: Server, pieces: Iterator[bytes]) -> bytes:
    """The server's answer to a request sent piece by piece, each piece its own segment."""
    where = urlsplit(server.base_url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for piece in pieces:
                conn.sendall(piece)
        except OSError:
            pass  # answered and closed before everything was sent
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_header_fields_past_64_kib_answer_431_in_the_error_shape_and_hold_up_nobody(server):
    """Found by an audit: header fields had no bound, and httptools gathers a header sent in
    pieces by concatenation (a 120 MB header held every client for 18 s)."""
    def pieces() -> Iterator[bytes]:
        yield b"GET /store HTTP/1.1\r\nHost: x\r\nX-Padding: "
        for _ in range(2_000):  # 16 MB, if it were all read
            yield b"a" * 8192
        yield b"\r\n\r\n"

    head, _, body = _answer_to_pieces(server, pieces()).partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    assert status == "HTTP/1.1 431 Request Header Fields Too Large"
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert json.loads(body) == {"errors": HEAD_TOO_LARGE}
    assert server.request("GET", "/store")[0] == 200


def test_a_request_target_read_in_many_pieces_answers_the_same_400(server):
    """Found by an audit: one past ~200 KB (read in more pieces) answered 431, header fields
    too large, where a shorter one answered the parser's 400."""
    def pieces() -> Iterator[bytes]:
        yield b"GET /customers?x="
        for _ in range(40):  # 320 KB
            yield b"a" * 8192
        yield b" HTTP/1.1\r\nHost: x\r\n\r\n"

    status, headers, body = _status_and_body(_answer_to_pieces(server, pieces()))
    assert status == "HTTP/1.1 400 Bad Request" and json.loads(body) == {"errors": NOT_READABLE_HTTP}
    assert server.request("GET", "/store")[0] == 200


def test_ordinary_heads_and_pipelined_bodies_are_not_counted_as_header_fields(server):
    """A large head in one piece, and a request whose body runs into the next request's head,
    are read as usual: only pieces that continue an unfinished head count."""
    body = json.dumps({"email": "x" * 200_000}).encode()
    first = (b"POST /customers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: %d\r\n\r\n" % len(body)) + body
    second = b"GET /store HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 30_000 + b"\r\nConnection: close\r\n\r\n"
    answer = _answer_to_pieces(server, iter([first + second[:100], second[100:]]))
    assert answer.count(b"HTTP/1.1 ") == 2 and b" 431 " not in answer


def _status_and_body(answer: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, dict(line.lower().split(": ", 1) for line in lines), body


def test_one_header_field_past_64_kib_in_one_piece_answers_431(server):
    """Found by an audit: only pieces continuing a head were counted, so 150 KB sent at once passed."""
    sent = b"GET /store HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 150_000 + b"\r\n\r\n"
    status, headers, body = _status_and_body(_exchange(server, sent))
    assert status == "HTTP/1.1 431 Request Header Fields Too Large"
    assert json.loads(body) == {"errors": HEAD_TOO_LARGE} and len(headers["x-request-id"]) == 32
    assert server.request("GET", "/store")[0] == 200


@pytest.mark.parametrize("hosts", [b"", b"Host: a.example\r\nHost: b.example\r\n"])
def test_an_http_1_1_request_needs_exactly_one_host(server, hosts):
    """RFC 9112 §3.2 (found by an audit: both were served, the 2021-01 Link built from the first)."""
    sent = (b"GET /store HTTP/1.1\r\n" + hosts + b"X-Service-Access-Token: " + server.token.encode()
            + b"\r\nConnection: close\r\n\r\n")
    status, headers, body = _status_and_body(_exchange(server, sent))
    assert status == "HTTP/1.1 400 Bad Request"
    assert json.loads(body) == {"errors": ONE_HOST} and headers["x-service-version"] == "2021-01"
    # HTTP/1.0 needs none.
    old = b"GET /store HTTP/1.0\r\nX-Service-Access-Token: " + server.token.encode() + b"\r\n\r\n"
    assert _status_and_body(_exchange(server, old))[0] == "HTTP/1.1 200 OK"


def test_trailer_fields_of_a_chunked_body_are_not_header_fields(server):
    """RFC 9110 §6.5.1 (found by an audit: a token sent as a trailer in the same packet as the
    body authenticated the request)."""
    body = b'{"first_name":"Trailer"}'
    sent = (b"PUT /customers/1 HTTP/1.1\r\nHost: x\r\nX-Service-Version: 2021-11\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n" % len(body) + body + b"\r\n0\r\nX-Service-Access-Token: " + server.token.encode() + b"\r\n\r\n")
    status, _, answer = _status_and_body(_exchange(server, sent))
    assert status == "HTTP/1.1 401 Unauthorized", answer


def test_a_websocket_upgrade_is_an_ordinary_request_answered_in_the_error_shape(server):
    """Found by an audit: uvicorn took upgrades and answered a plain-text 403 without a request id."""
    sent = (b"GET /customers HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    status, headers, body = _status_and_body(_exchange(server, sent))
    assert status == "HTTP/1.1 401 Unauthorized"
    assert headers["content-type"] == "application/json" and len(headers["x-request-id"]) == 32
    assert "errors" in json.loads(body)


def test_a_content_length_with_leading_zeros_is_its_number(server):
    """RFC 9110 §8.6, `1*DIGIT` (found by an audit: a 413 "too large")."""
    body = b'{"first_name":"Zeros"}'
    sent = (b"PUT /customers/1 HTTP/1.1\r\nHost: x\r\nX-Service-Version: 2021-11\r\nConnection: close\r\n"
            b"X-Service-Access-Token: " + server.token.encode() + b"\r\nContent-Type: application/json\r\n"
            b"Content-Length: 000000000000000000000%d\r\n\r\n" % len(body) + body)
    status, _, answer = _status_and_body(_exchange(server, sent))
    assert status in ("HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found"), answer  # read, not refused as too large


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("impatient"), env={"REBILL_CLIENT_READ_SECONDS": "1"}) as running:
        yield running


def _held(server: Server, sent: bytes, *, pause: float = 0.0, then: bytes = b"") -> tuple[bytes, float]:
    """What the server answers to ``sent`` (and ``then`` after ``pause``) before it closes, and
    how long it kept the connection."""
    import time
    where = urlsplit(server.base_url)
    began = time.monotonic()
    with socket.create_connection((where.hostname, where.port), timeout=15) as conn:
        conn.sendall(sent)
        if then:
            for byte in then:
                time.sleep(pause)
                conn.sendall(bytes([byte]))
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer, time.monotonic() - began


def test_a_client_silent_in_the_middle_of_a_request_is_let_go(impatient):
    """Found by an audit: half a head, a body shorter than its Content-Length, or a connection
    with nothing sent were held for good (400 s and counting); a few thousand such sockets
    would exhaust a process. REBILL_CLIENT_READ_SECONDS without a byte closes them."""
    half_head, held = _held(impatient, b"GET /customers HTTP/1.1\r\nHost: x\r\nX-Serv")
    status, headers, body = _status_and_body(half_head)
    assert status == "HTTP/1.1 408 Request Timeout" and held < 5
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert json.loads(body) == {"errors": REQUEST_TIMEOUT} and len(headers["x-request-id"]) == 32
    short_body, held = _held(impatient, b"POST /customers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                        b"X-Service-Access-Token: " + impatient.token.encode() +
                                        b"\r\nContent-Length: 100\r\n\r\n{\"em")
    assert held < 5 and b" 5" not in short_body.split(b"\r\n", 1)[0]  # closed; never a 5xx
    nothing, held = _held(impatient, b"")
    assert nothing == b"" and held < 5
    # Slow is not silent: a byte every 0.4 s keeps a head coming for four seconds.
    head = (b"GET /store HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Service-Access-Token: "
            + impatient.token.encode())
    slow, held = _held(impatient, head, pause=0.4, then=b"\r\nX: y\r\n\r\n")
    assert slow.startswith(b"HTTP/1.1 200 ") and held > 3, slow[:200]
    assert impatient.request("GET", "/store")[0] == 200
    assert "Traceback" not in impatient.log.read_text(errors="replace")


def test_the_client_read_time_is_a_positive_number_of_seconds():
    from rebill.settings import Settings
    assert Settings.from_env({}).client_read_seconds == 30.0
    assert Settings.from_env({"REBILL_CLIENT_READ_SECONDS": "2.5"}).client_read_seconds == 2.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(ValueError, match="REBILL_CLIENT_READ_SECONDS must be"):
            Settings.from_env({"REBILL_CLIENT_READ_SECONDS": bad})
