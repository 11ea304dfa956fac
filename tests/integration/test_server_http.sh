#!/usr/bin/env bash
# The controller's HTTP/1.1 engine (src/server/httpd.c) on the wire, over raw sockets and
# curl: Expect: 100-continue (curl's bodies over 1 KiB must not stall), chunked request
# bodies cut anywhere, pipelined requests answered in order, a head that arrives in
# pieces, HTTP/1.0 (closed after the answer unless keep-alive was asked), Connection:
# close, HEAD (no body), percent-decoded paths and query values, the body limits (a
# declared 2 MiB body read and answered 413 on a kept connection; 20 MiB answered at
# once and closed; a chunked body over 1 MiB 413), an oversized head 431, a bad request
# line 400 and another HTTP version 505 (each closed), and a clean stop afterwards. Also
# that the server ran itself again with glibc.malloc.hugetlb=1 (src/server/main.c).
set -euo pipefail
BIN=${1:?usage: test_server_http.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start test_server_http "$BIN" --insecure-fast-password-hash --rate-limit 0 \
    --threads 2
# it ran itself again, same pid, with transparent huge pages for its heap (main.c)
tr '\0' '\n' <"/proc/$server_pid/environ" | grep -q '^GLIBC_TUNABLES=.*glibc.malloc.hugetlb=1' ||
    { echo "the server did not run itself again with glibc.malloc.hugetlb=1" >&2; exit 1; }
server_admin alice a@x alice-password >/dev/null
token=$(curl -fsS -X POST "$url/v1/sessions" -d '{"username":"alice","password":"alice-password"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')

# curl sends Expect: 100-continue for a body over 1 KiB and waits 1 s for the 100
pad=$(python3 -c 'print("x" * 3000)')
body="{\"name\":\"$pad\",\"command\":[\"true\"],\"gpus\":1}"
out=$(curl -sS -o "$tmp/big.json" -w '%{http_code} %{time_total}' -X POST "$url/v1/jobs" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body")
read -r code secs <<<"$out"
[ "$code" = 400 ] || [ "$code" = 201 ] || { echo "curl big body: $out $(cat "$tmp/big.json")" >&2; exit 1; }
python3 -c "import sys; sys.exit(0 if float('$secs') < 0.8 else 1)" ||
    { echo "curl big body took $secs s: no 100 Continue?" >&2; exit 1; }
# curl with a chunked body
code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$url/v1/jobs" -H "Authorization: Bearer $token" \
    -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' \
    -d '{"name":"chunky","command":["true"],"gpus":1}')
[ "$code" = 201 ] || { echo "curl chunked body: $code" >&2; exit 1; }

python3 - "$port" "$token" <<'PY'
import json, socket, sys, time
PORT, TOKEN = int(sys.argv[1]), sys.argv[2]
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, file=sys.stderr)
def conn():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
class Reader:
    """Reads answers off a socket: status, headers, body (Content-Length or chunked)."""
    def __init__(self, s):
        self.s, self.buf = s, b""
    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError
        self.buf += d
    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l
    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d
    def answer(self, head=False):
        st = self.line().split(b" ", 2)
        h = {}
        while True:
            l = self.line()
            if not l:
                break
            k, v = l.split(b":", 1)
            h[k.decode().lower()] = v.strip().decode()
        body = b""
        if head:
            pass
        elif h.get("transfer-encoding") == "chunked":
            while True:
                n = int(self.line().split(b";")[0], 16)
                if n == 0:
                    self.line()
                    break
                body += self.take(n)
                self.take(2)
        elif "content-length" in h:
            body = self.take(int(h["content-length"]))
        return int(st[1]), h, body
    def closed(self):
        try:
            self.s.settimeout(3)
            return self.s.recv(1) == b"" and not self.buf
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
AUTH = "Authorization: Bearer %s\r\n" % TOKEN
JOB = json.dumps({"name": "raw", "command": ["true"], "gpus": 1}).encode()

# Expect: 100-continue by hand: the 100 comes before the body is sent
s = conn(); r = Reader(s)
s.sendall(("POST /v1/jobs HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\n"
           "Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (AUTH, len(JOB))).encode())
st, h, _ = r.answer(head=True)
check(st == 100, "100 Continue first: %s" % st)
s.sendall(JOB)
st, h, b = r.answer()
check(st == 201 and json.loads(b)["name"] == "raw", "then the answer: %s %s" % (st, b[:100]))
JOB_ID = json.loads(b)["id"]
s.close()

# a chunked body, cut into pieces that split sizes, data and CRLFs, with a trailer
s = conn(); r = Reader(s)
chunked = b"".join(b"%x\r\n%s\r\n" % (len(JOB[i:i + 7]), JOB[i:i + 7]) for i in range(0, len(JOB), 7))
chunked += b"0\r\nX-Trailer: yes\r\n\r\n"
msg = ("POST /v1/jobs HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: chunked\r\n\r\n" % AUTH).encode() + chunked
for i in range(0, len(msg), 5):
    s.sendall(msg[i:i + 5]); time.sleep(0.002)
st, h, b = r.answer()
check(st == 201 and json.loads(b)["command"] == ["true"], "chunked body in pieces: %s %s" % (st, b[:100]))
# bad chunked framing: 400, closed
s.sendall(("POST /v1/jobs HTTP/1.1\r\n%sTransfer-Encoding: chunked\r\n\r\nzz\r\n" % AUTH).encode())
st, h, b = r.answer()
check(st == 400 and r.closed(), "bad chunk size: 400 and closed (%s)" % st)
s.close()

# pipelining: three requests in one write, answered in order on one connection
s = conn(); r = Reader(s)
s.sendall(("GET /v1/jobs/%s HTTP/1.1\r\n%s\r\n"
           "POST /v1/jobs HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s"
           "GET /healthz HTTP/1.1\r\n\r\n" % (JOB_ID, AUTH, AUTH, len(JOB), JOB.decode())).encode())
a1, a2, a3 = r.answer(), r.answer(), r.answer()
check(a1[0] == 200 and json.loads(a1[2])["id"] == JOB_ID, "pipelined 1: %s" % (a1[:2],))
check(a2[0] == 201, "pipelined 2: %s" % (a2[:2],))
check(a3[0] == 200 and json.loads(a3[2])["status"] == "ok", "pipelined 3: %s" % (a3[:2],))
# a head that arrives byte by byte
for ch in ("GET /v1/jobs/%s HTTP/1.1\r\n%s\r\n" % (JOB_ID, AUTH)).encode():
    s.send(bytes([ch]))
st, h, b = r.answer()
check(st == 200, "a head in pieces: %s" % st)
# HEAD: the headers, no body (the next answer follows at once)
s.sendall(b"HEAD /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n")
st, h, b = r.answer(head=True)
check(st == 405 and "allow" in h, "HEAD answered 405 with Allow: %s %s" % (st, h))
st, h, b = r.answer()
check(st == 200 and json.loads(b)["status"] == "ok", "after HEAD, no stray body: %s %r" % (st, b[:60]))
# percent-decoding: the path and query values
s.sendall(("GET /v1/jobs/%%%x HTTP/1.1\r\n%s\r\n" % (ord(JOB_ID[0]), AUTH)).encode()
          if len(JOB_ID) == 1 else ("GET /v1/jobs/%s HTTP/1.1\r\n%s\r\n" % (JOB_ID, AUTH)).encode())
st, h, b = r.answer()
check(st == 200 and json.loads(b)["id"] == JOB_ID, "percent-encoded path: %s" % st)
s.sendall(("GET /v1/events?since=%%30&limit=%%32 HTTP/1.1\r\n%s\r\n" % AUTH).encode())
st, h, b = r.answer()
check(st == 200 and len(json.loads(b)["items"]) == 2, "percent-encoded query values: %s %s" % (st, b[:100]))
s.sendall(("GET /v1/events?since=%%2D1 HTTP/1.1\r\n%s\r\n" % AUTH).encode())
st, h, b = r.answer()
check(st == 400 and json.loads(b)["error"]["field"] == "since", "decoded -1 refused: %s" % st)
# Connection: close: answered, then closed
s.sendall(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
st, h, b = r.answer()
check(st == 200 and h.get("connection") == "close" and r.closed(), "Connection: close")
s.close()

# HTTP/1.0: closed after the answer, unless keep-alive is asked for
s = conn(); r = Reader(s)
s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
st, h, b = r.answer()
check(st == 200 and r.closed(), "HTTP/1.0 closes: %s %s" % (st, h))
s.close()
s = conn(); r = Reader(s)
s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
st, h, b = r.answer()
check(st == 200 and h.get("connection", "").lower() == "keep-alive", "HTTP/1.0 keep-alive: %s" % h)
s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
st, h, b = r.answer()
check(st == 200 and r.closed(), "HTTP/1.0 second request on the kept connection")
s.close()

# a declared 2 MiB body is read, dropped and answered 413; the connection stays usable
s = conn(); r = Reader(s)
big = b"x" * (2 * 1024 * 1024)
s.sendall(("POST /v1/jobs HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (AUTH, len(big))).encode() + big)
st, h, b = r.answer()
check(st == 413 and json.loads(b)["error"]["code"] == "payload_too_large", "2 MiB body: %s" % st)
s.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
st, h, b = r.answer()
check(st == 200, "the connection after a 413: %s" % st)
# a chunked body over 1 MiB: 413 as well
s.sendall(("POST /v1/jobs HTTP/1.1\r\n%sTransfer-Encoding: chunked\r\n\r\n" % AUTH).encode())
piece = b"y" * 65536
for _ in range(20):
    s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
s.sendall(b"0\r\n\r\n")
st, h, b = r.answer()
check(st == 413, "chunked over 1 MiB: %s" % st)
s.close()
# declared 20 MiB: answered at once (nothing sent), then closed
s = conn(); r = Reader(s)
s.sendall(("POST /v1/jobs HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (AUTH, 20 << 20)).encode())
st, h, b = r.answer()
check(st == 413 and r.closed(), "20 MiB declared: 413 and closed (%s)" % st)
s.close()

# an oversized head: 431 and closed
s = conn(); r = Reader(s)
s.sendall(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
try:
    st, h, b = r.answer()
    check(st == 431 and r.closed(), "oversized head: %s" % st)
except (ConnectionResetError, EOFError):
    check(False, "oversized head: no answer")
s.close()
# a bad request line and another HTTP version: 400 / 505, closed
for line, want in ((b"GARBAGE\r\n\r\n", 400), (b"GET /healthz HTTP/2.0\r\n\r\n", 505),
                   (b"GET healthz HTTP/1.1\r\n\r\n", 400), (b"GET /a b HTTP/1.1\r\n\r\n", 400),
                   (b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
                   (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400)):
    s = conn(); r = Reader(s)
    s.sendall(line)
    st, h, b = r.answer()
    check(st == want and r.closed() and json.loads(b)["error"]["code"], "%r: %s (want %s)" % (line[:30], st, want))
    s.close()
# an idle connection that sends half a request and goes away does not disturb others
s = conn(); s.sendall(b"GET /heal"); s.close()
s = conn(); r = Reader(s)
s.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
check(r.answer()[0] == 200, "still serving")
s.close()
if fails:
    sys.exit("%d failures" % len(fails))
print("test_server_http: every check passed")
PY
server_stop test_server_http 30
echo "test_server_http: OK"
