#!/usr/bin/env python3
"""The URL filter evasion suite's server: Python's http.server speaking HTTP/1.1
(keep-alive), serving argv[1] on argv[2]:argv[3], one line per request it parsed on stderr
(the request line as received, then the path it resolved)."""
import http.server
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def __init__(self, *a, **kw):
        super().__init__(*a, directory=sys.argv[1], **kw)

    def do_POST(self):
        """Reads the body as RFC 9112 frames it (Content-Length, or chunked), answers 200."""
        if self.headers.get("Transfer-Encoding", "").lower().endswith("chunked"):
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                self.rfile.read(size)
                self.rfile.readline()
        else:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b"posted\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code="-", size="-"):
        sys.stderr.write("REQ %r -> %s %s\n" % (self.requestline, self.translate_path(self.path), code))
        sys.stderr.flush()


http.server.ThreadingHTTPServer((sys.argv[2], int(sys.argv[3])), Handler).serve_forever()
