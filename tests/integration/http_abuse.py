#!/usr/bin/env python3
# http_abuse.py - hostile HTTP clients for the controller's defence tests: each mode
# plays one attack over real sockets and prints what it saw as one JSON line.
#
#   flood PORT SECS CONNS         CONNS keep-alive connections, each from its own
#                                 loopback address 127.0.1.N, send POST /v1/sessions
#                                 with unknown users as fast as answered
#   slowloris PORT SECS CONNS SRC CONNS connections from address SRC trickle a request
#                                 head one byte a second; reports when each was closed
#   bigbody PORT CONNS PIDFILE    CONNS connections (from 127.0.2.N, 20 each) send a
#                                 head declaring a 1 MiB body with a bad token, and all
#                                 but the body's last byte; reports the server's VmRSS
#                                 before and while they hang, and the answers read
#   hold PORT SECS CONNS SRC      CONNS connections from SRC that send nothing
#   logreaders PORT TOKEN JOB N PID  N connections ask for the job's log and never
#                                 read; reports the server's VmRSS before and after 4 s
import json
import os
import select
import socket
import sys
import threading
import time


def rss_kb(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def connect(port, src=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return s


def read_answer(s):
    """Reads one answer with a Content-Length: (status, body) or (0, b'') when closed."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return 0, b""
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    n = 0
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        if k.strip().lower() == "content-length":
            n = int(v.strip())
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    return status, rest[:n]


def flood(port, secs, conns):
    counts = {}
    lock = threading.Lock()
    end = time.time() + secs

    def one(i):
        src = "127.0.1.%d" % (i % 250 + 1)
        k = 0
        while time.time() < end:
            try:
                s = connect(port, src)
                while time.time() < end:
                    k += 1
                    body = json.dumps({"username": "flood%d-%d" % (i, k),
                                       "password": "wrong-password-%d" % k}).encode()
                    s.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                              % len(body) + body)
                    st, _ = read_answer(s)
                    with lock:
                        counts[st] = counts.get(st, 0) + 1
                    if st == 0:
                        break
                s.close()
            except OSError:
                with lock:
                    counts["error"] = counts.get("error", 0) + 1
                time.sleep(0.05)

    th = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    print(json.dumps({str(k): v for k, v in counts.items()}))


def slowloris(port, secs, conns, src):
    socks, opened, closed_after = [], [], []
    refused = 0
    t0 = time.time()
    for _ in range(conns):
        try:
            s = connect(port, src)
            s.setblocking(False)
            socks.append(s)
            opened.append(time.time())
        except OSError:
            refused += 1
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000
    pos = [0] * len(socks)
    alive = set(range(len(socks)))
    while alive and time.time() - t0 < secs:
        for i in list(alive):
            s = socks[i]
            try:
                r, _, _ = select.select([s], [], [], 0)
                if r and not s.recv(4096):
                    raise ConnectionResetError
                s.send(head[pos[i] % len(head):pos[i] % len(head) + 1])
                pos[i] += 1
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                alive.discard(i)
                closed_after.append(round(time.time() - opened[i], 1))
        time.sleep(1)
    for s in socks:
        s.close()
    closed_after.sort()
    print(json.dumps({"opened": len(socks), "refused": refused, "still_open": len(alive),
                      "closed": len(closed_after),
                      "closed_within_3s": len([t for t in closed_after if t < 3]),
                      "max_life_s": closed_after[-1] if closed_after else None}))


def hold(port, secs, conns, src):
    socks = [connect(port, src) for _ in range(conns)]
    time.sleep(secs)
    for s in socks:
        s.close()


def bigbody(port, conns, pid):
    before = rss_kb(pid)
    body = b"x" * (1024 * 1024)
    head = (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fg_not-a-token\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    socks = []
    sent = [0] * conns
    lock = threading.Lock()

    def one(i):
        try:
            s = connect(port, "127.0.2.%d" % (i // 20 + 1))
            with lock:
                socks.append((i, s))
            s.sendall(head)
            s.sendall(body[:-1])
            sent[i] = 1
        except OSError:
            pass

    th = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
    for t in th:
        t.start()
    for t in th:
        t.join(timeout=20)
    time.sleep(1.5)
    during = rss_kb(pid)
    answers = {}
    for i, s in socks:
        try:
            s.settimeout(5)
            try:
                s.sendall(body[-1:])
            except OSError:
                pass
            st, _ = read_answer(s)
        except OSError:
            st = "reset"
        answers[str(st)] = answers.get(str(st), 0) + 1
        s.close()
    print(json.dumps({"rss_before_kb": before, "rss_during_kb": during,
                      "growth_mb": round((during - before) / 1024.0, 1),
                      "bodies_sent": sum(sent), "answers": answers}))


def logreaders(port, token, job, n, pid):
    before = rss_kb(pid)
    socks = []
    for _ in range(n):
        s = connect(port)
        s.sendall(("GET /v1/jobs/%s/logs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                   % (job, token)).encode())
        socks.append(s)
    time.sleep(4)
    after = rss_kb(pid)
    # then one reader reads its log whole: the stream is complete (chunked, so the
    # bytes counted include the chunk framing)
    socks[0].settimeout(5)
    total, tail = 0, b""
    while not tail.endswith(b"\r\n0\r\n\r\n"):
        try:
            d = socks[0].recv(1 << 20)
        except OSError:  # (a timeout: an answer with a Content-Length ends so)
            break
        if not d:
            break
        total += len(d)
        tail = (tail + d)[-16:]
    for s in socks:
        s.close()
    print(json.dumps({"rss_before_kb": before, "rss_after_kb": after,
                      "growth_mb": round((after - before) / 1024.0, 1),
                      "first_reader_bytes": total}))


def main():
    mode, a = sys.argv[1], sys.argv[2:]
    if mode == "flood":
        flood(int(a[0]), float(a[1]), int(a[2]))
    elif mode == "slowloris":
        slowloris(int(a[0]), float(a[1]), int(a[2]), a[3])
    elif mode == "hold":
        hold(int(a[0]), float(a[1]), int(a[2]), a[3])
    elif mode == "bigbody":
        bigbody(int(a[0]), int(a[1]), a[2])
    elif mode == "logreaders":
        logreaders(int(a[0]), a[1], a[2], int(a[3]), a[4])
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
