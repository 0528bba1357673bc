"""`attnzoo serve`'s HTTP layer against hostile but legitimate clients (issue 29), on raw loopback sockets: every
size and time a client controls is bounded and answered with its status within a deadline (413 for bodies too large
in either framing, read no further than the headers; 411, 431, 408, 400 for conflicting or malformed framing and
header lines, 404 naming the path as sent, 503 with Retry-After past the connection limits, 429 with Retry-After),
pipelined requests are answered in order, a half-closed client still gets its answer, the resident memory after
1,000 abusive requests stays within 50 MB of before, and normal requests are served throughout. Then the graceful
shutdown: SIGTERM with requests in flight drains (new requests and /health 503), lets them finish, exits 0; past the
grace period what is left is cut with 503 / an error event, never 200 with a cut answer.

The checkpoint is test_serve's tiny random Llama; every server listens on an ephemeral 127.0.0.1 port."""
import json
import os
import signal
import socket
import threading
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("openai")

from test_chat_cli import needs_cli  # noqa: E402
from test_serve import ServerProcess, checkpoint  # noqa: E402,F401  (checkpoint: its session fixture)

pytestmark = needs_cli
DEADLINE = 10.0  # seconds any one answer may take on a loaded 2-core machine; the bounds tested are far tighter
BODY_LIMIT = 65536
HEADER_TIMEOUT = 1.5


@pytest.fixture(scope="module")
def server(checkpoint):  # noqa: F811
    s = ServerProcess(checkpoint, "--max-body-bytes", str(BODY_LIMIT), "--header-timeout-seconds",
                      str(HEADER_TIMEOUT), "--max-connections", "48", "--max-connections-per-client", "40",
                      "--max-num-seqs", "2", "--max-waiting-requests", "2", "--kv-cache-memory", str(64 << 20))
    yield s
    assert s.stop() == 0


def connect(server, source="127.0.0.1", receive_buffer=None):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:  # fixed before connecting: the kernel does not grow it for a client that does not read
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(DEADLINE)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", server.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Reader:
    """HTTP/1.1 responses read off one socket in order (Content-Length or chunked; 1xx interim answers skipped)."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("the server closed the connection")
        self.buf += data

    def _until(self, mark):
        while mark not in self.buf:
            self._more()
        head, self.buf = self.buf.split(mark, 1)
        return head

    def _exactly(self, n):
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self):
        while True:
            lines = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
            if status >= 200:
                break
        if "content-length" in headers:
            body = self._exactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while (size := int(self._until(b"\r\n"), 16)) > 0:
                body += self._exactly(size)
                self._exactly(2)
            self._exactly(2)
        else:
            body = self.buf
            try:
                while True:
                    self._more()
                    body = self.buf
            except (EOFError, OSError):
                pass
        return status, headers, body.decode("utf-8", "replace")

    def closed(self):
        """True once the server closed (EOF or reset) with nothing more to read."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


def ask(server, raw, send_all=True, source="127.0.0.1", deadline=DEADLINE):
    """(status, headers, body) of the answer to the bytes `raw`; sent from a thread (the server may answer, and
    stop reading, long before a large request is all sent)."""
    with connect(server, source) as sock:
        sock.settimeout(deadline)
        def send():
            try:
                sock.sendall(raw)
            except OSError:
                pass
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        start = time.monotonic()
        answer = Reader(sock).response()
        assert time.monotonic() - start < deadline
        return answer


def error_of(body):
    return json.loads(body)["error"]


def completion(server, tokens=4, stream=False):
    body = json.dumps({"model": "tiny", "prompt": [5, 6, 7, 8], "max_tokens": tokens, "temperature": 0,
                       "ignore_eos": True, "stream": stream})
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}").encode()


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_bodies_beyond_the_limit_are_413_in_either_framing(server):
    # 100 MB announced: refused from the header, before a byte of the body is sent.
    status, _, body = ask(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
    assert status == 413 and str(BODY_LIMIT) in error_of(body)["message"]
    # Chunked: counted as the chunks arrive; 6 MiB offered, the answer comes once the limit is passed.
    chunk = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
    status, _, body = ask(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                          + chunk * 384 + b"0\r\n\r\n")
    assert status == 413
    # A chunked body within the limit is read whole and parsed.
    payload = json.dumps({"model": "tiny", "prompt": [5, 6], "max_tokens": 2}).encode()
    status, _, body = ask(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                          + b"%x\r\n" % len(payload) + payload + b"\r\n0\r\n\r\n")
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 2
    status, _, body = ask(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 411


@pytest.mark.parametrize("head, status, words", [
    (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400, "conflicting Content-Length"),
    (b"Content-Length: -5\r\n", 400, "Content-Length"),
    (b"Content-Length: abc\r\n", 400, "Content-Length"),
    (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400, "both"),
    (b"Transfer-Encoding: gzip\r\n", 501, "gzip"),
    (b"Content-Length: 2\r\nX-No-Colon\r\n", 400, "colon"),
    (b"Content-Length: 2\r\nX-Nul: a\x00b\r\n", 400, "NUL"),
    (b"Content-Length: 2\r\n folded\r\n", 400, "folding"),
    (b"Content-Length: 2\r\nX-Big: " + b"a" * 40000 + b"\r\n", 431, "header larger"),
    (b"Content-Length: 2\r\n" + b"X-Many: 1\r\n" * 150, 431, "header fields"),
])
def test_malformed_framing_and_header_lines_are_refused_at_once(server, head, status, words):
    start = time.monotonic()
    got, _, body = ask(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n{}")
    assert got == status and words in error_of(body)["message"]
    assert time.monotonic() - start < 1.0  # no waiting for a body that is not coming


def test_huge_header_section_is_cut_at_the_limit(server):
    # 8 MiB of header lines: answered once 32 KiB have come, the rest is never held.
    status, _, body = ask(server, b"GET /health HTTP/1.1\r\n" + (b"X-F: " + b"c" * 1000 + b"\r\n") * 8192)
    assert status == 431


def test_chat_prompt_filling_the_context_is_refused_without_citing_a_default_max_tokens(server):
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "the sea " * 400}]})
    status, _, text = ask(server, (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}"
                                   f"\r\n\r\n{body}").encode())
    err = error_of(text)
    assert status == 400 and err["param"] == "messages", err
    assert "leaves no room for an answer within max_model_len 512" in err["message"] and "max_tokens" not in err["message"]


def test_404_names_the_path_as_sent_and_methods_are_checked(server):
    status, _, body = ask(server, b"GET /health%00x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 404 and "/health%00x" in error_of(body)["message"]
    status, _, _ = ask(server, b"GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 405
    status, _, _ = ask(server, b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n")
    assert status == 505


def test_pipelined_requests_are_answered_in_order_and_half_close_gets_its_answer(server):
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + completion(server, 3) +
                     b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" + completion(server, 5))
        sock.shutdown(socket.SHUT_WR)  # half-close: nothing more to send, but the answers are still wanted
        r = Reader(sock)
        assert r.response()[0] == 200
        status, _, body = r.response()
        assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 3
        status, _, body = r.response()
        assert status == 200 and json.loads(body)["data"][0]["id"] == "tiny"
        status, _, body = r.response()
        assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 5
        assert r.closed()


def test_slow_and_idle_clients_are_cut_at_the_header_deadline(server):
    slow = [connect(server) for _ in range(12)]
    idle = [connect(server) for _ in range(12)]
    for s in slow:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    start = time.monotonic()
    statuses = []
    while time.monotonic() - start < HEADER_TIMEOUT + 0.3:  # a byte every 0.1 s from each slow client
        for s in slow:
            try:
                s.sendall(b"X")
            except OSError:
                pass
        assert ask(server, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200  # served throughout
        time.sleep(0.1)
    for s in slow:
        statuses.append(Reader(s).response()[0])
        s.close()
    assert statuses == [408] * len(slow)
    for s in idle:
        s.settimeout(DEADLINE)
        assert Reader(s).closed()  # silently: they never began a request
        s.close()
    assert time.monotonic() - start < HEADER_TIMEOUT + DEADLINE


def test_connections_beyond_the_limits_get_503_with_retry_after(server):
    held = []
    try:
        # 40 per client: the 41st from 127.0.0.1 is refused, another address is still admitted up to 48 in all.
        for source, count in (("127.0.0.1", 40), ("127.0.0.2", 8)):
            for _ in range(count):
                s = connect(server, source)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                assert Reader(s).response()[0] == 200  # admitted (and kept open)
                held.append(s)
        for source in ("127.0.0.1", "127.0.0.3"):
            status, headers, body = ask(server, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", source=source)
            assert status == 503 and headers["retry-after"] == "1" and "too many connections" in body
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + DEADLINE
    while ask(server, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")[0] != 200:  # slots come back as sockets close
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_queue_full_is_429_with_retry_after(server):
    answers = []

    def run(_):
        answers.append(ask(server, completion(server, 400)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {a[0] for a in answers} <= {200, 429} and any(a[0] == 429 for a in answers)
    assert all(a[1]["retry-after"] == "1" for a in answers if a[0] == 429)


ABUSE = [
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
    (b"8000\r\n" + b"y" * 0x8000 + b"\r\n") * 3,
    b"GET /health HTTP/1.1\r\n" + (b"X-H: " + b"z" * 4000 + b"\r\n") * 10,
    b"GET /health HTTP/1.1\r\n" + b"A: b\r\n" * 200 + b"\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n" + b"{" * 60000,
]


def test_memory_stays_flat_under_1000_abusive_requests_and_normal_ones_are_served(server):
    def abuse(count):
        for i in range(count):
            assert ask(server, ABUSE[i % len(ABUSE)])[0] in (400, 413, 431)

    abuse(60)  # warm: every thread stack and buffer size the abuse needs has been allocated once
    before = rss_bytes(server.proc.pid)
    normal, stop = [], threading.Event()

    def serve_normally():
        while not stop.is_set():
            status, _, body = ask(server, completion(server, 2))
            normal.append(status == 200 and json.loads(body)["usage"]["completion_tokens"] == 2)
            time.sleep(0.02)

    watcher = threading.Thread(target=serve_normally)
    watcher.start()
    workers = [threading.Thread(target=abuse, args=(125,)) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    watcher.join()
    after = rss_bytes(server.proc.pid)
    assert after - before < 50 << 20, (before, after)
    assert normal and all(normal)


def _start_stream(server, max_tokens, n):
    """A streamed request whose client reads only its status: the rest waits in the socket buffers."""
    body = json.dumps({"model": "tiny", "prompt": list(range(5, 40)), "max_tokens": max_tokens, "n": n,
                       "temperature": 1.0, "seed": 1, "ignore_eos": True, "stream": True, "logprobs": 20})
    sock = connect(server, receive_buffer=4096)
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    return sock


def _stream_events(sock):
    status, _, body = Reader(sock).response()
    events = [line[6:] for line in body.split("\n") if line.startswith("data: ")]
    return status, events


def test_sigterm_drains_lets_in_flight_finish_and_exits_0(checkpoint):  # noqa: F811
    s = ServerProcess(checkpoint, "--shutdown-grace-seconds", "30", "--max-num-seqs", "16")
    try:
        # Streams whose clients do not read: their answers (~1 KiB a token with 20 logprobs) outgrow the socket
        # buffers, so they are still in flight, however fast the engine, until the test reads them.
        streams = [_start_stream(s, 470, 16) for _ in range(2)]
        pending = []
        # 300 tokens beside 32 stalled sequences: 2-3 s alone, over 10 s on a 2-core machine running other suites.
        t = threading.Thread(target=lambda: pending.append(ask(s, completion(s, 300), deadline=4 * DEADLINE)))
        t.start()
        time.sleep(0.3)
        s.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + DEADLINE
        while (health := ask(s, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))[0] != 503:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert health[1]["retry-after"] == "1" and "shutting down" in health[2]
        assert health[1]["connection"] == "close"
        status, headers, body = ask(s, completion(s, 2))
        assert status == 503 and headers["retry-after"] == "1" and error_of(body)["code"] == 503
        for sock in streams:
            status, events = _stream_events(sock)
            assert status == 200 and events[-1] == "[DONE]"
            finished = [json.loads(e)["choices"][0]["finish_reason"] for e in events[:-1]]
            assert finished.count("length") == 16 and "abort" not in finished
            sock.close()
        t.join()
        assert pending[0][0] == 200 and json.loads(pending[0][2])["usage"]["completion_tokens"] == 300
        assert s.proc.wait(timeout=DEADLINE) == 0
    finally:
        s.stop()


def test_past_the_grace_period_cut_requests_get_503_never_a_cut_200(checkpoint):  # noqa: F811
    s = ServerProcess(checkpoint, "--shutdown-grace-seconds", "0", "--max-num-seqs", "16")
    try:
        answers = []
        body = json.dumps({"model": "tiny", "prompt": list(range(5, 40)), "max_tokens": 470, "n": 16,
                           "temperature": 1.0, "seed": 2, "ignore_eos": True})
        raw = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode()
        threads = [threading.Thread(target=lambda: answers.append(ask(s, raw))) for _ in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + DEADLINE
        while s.metrics()["vllm:num_requests_running"] == 0:
            assert time.monotonic() < deadline
        s.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join()
        assert s.proc.wait(timeout=DEADLINE) == 0
        statuses = sorted(a[0] for a in answers)
        assert 503 in statuses and set(statuses) <= {200, 503}
        cut = 0
        for status, _, text in answers:
            if status == 200:
                assert all(c["finish_reason"] == "length" for c in json.loads(text)["choices"])
                continue
            # A request still being read when the signal came is refused as new work; one the engine was
            # running is cut. The one the test waited for was running.
            message = error_of(text)["message"]
            assert "shut down before the request finished" in message or "shutting down" in message, message
            cut += "shut down before the request finished" in message
        assert cut >= 1
    finally:
        s.stop()
