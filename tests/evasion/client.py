#!/usr/bin/env python3
"""The URL filter evasion suite's client (tests/tests/urlfilter_evasion.rs).

Reads variants from argv[1] (one per line: the name, then its chunks as hex strings,
separated by spaces), opens one kernel TCP
connection per variant to argv[2]:argv[3], sends each chunk with TCP_NODELAY and a pause
between them (so that each chunk leaves as its own segment), then reads what the server
answers until it closes, resets or goes quiet. Prints one line per variant: its name, the
number of HTTP status lines received and how the connection ended, tab-separated. Variants run in
parallel (each waits on its own timeouts).
"""
import concurrent.futures
import socket
import sys
import time


def run(v, host, port):
    out = {"name": v["name"], "statuses": 0, "end": "", "first": ""}
    data = b""
    try:
        s = socket.create_connection((host, port), timeout=3)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for chunk in v["chunks"]:
            s.sendall(bytes.fromhex(chunk))
            time.sleep(0.05)
        s.settimeout(1.5)
        while True:
            d = s.recv(65536)
            if not d:
                out["end"] = "closed"
                break
            data += d
    except ConnectionResetError:
        out["end"] = "reset"
    except socket.timeout:
        out["end"] = "quiet"
    except OSError as e:
        out["end"] = "error: %s" % e
    out["statuses"] = data.count(b"HTTP/1.")
    out["first"] = data.split(b"\r\n", 1)[0].decode("latin-1")
    return out


def main():
    variants = []
    for line in open(sys.argv[1]):
        words = line.split()
        if words:
            variants.append({"name": words[0], "chunks": words[1:]})
    host, port = sys.argv[2], int(sys.argv[3])
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        for r in pool.map(lambda v: run(v, host, port), variants):
            print("%s\t%d\t%s\t%s" % (r["name"], r["statuses"], r["end"], r["first"]), flush=True)


main()
