#!/usr/bin/env python3
"""The URL filter evasion suite's raw-frame client (tests/tests/urlfilter_evasion.rs): the
variants a kernel TCP client cannot send — segments out of order, overlapping with other
bytes, inserted with a bad checksum or without ACK, a segment in IP fragments.

Usage: raw.py IFNAME SRC_MAC DST_MAC SRC_IP DST_IP NAME...

Speaks TCP itself from SRC_IP (an address the namespace's kernel does not own, so the kernel
neither answers nor resets the server's segments; the server has a static neighbour for it)
to DST_IP:80 over raw Ethernet frames on IFNAME: for each variant NAME it opens a
connection (SYN, SYN-ACK, ACK), sends the variant's segments, waits for the server's answer,
then resets the connection. Prints one line per variant: its name, the number of HTTP
status lines received, and how the connection ended (`reset` when the server or the filter
reset it, `quiet` otherwise), tab-separated.

Each variant carries a request whose target holds the variant's name, so the server's log
says whether it arrived: `/bad/NAME` on host h.example (banned: `h.example/bad`) for the
must-block variants, `/good?NAME` for the must-pass ones.
"""
import random
import socket
import struct
import sys
import time

ACK, PSH, RST, SYN = 0x10, 0x08, 0x04, 0x02


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class Conn:
    def __init__(self, sock, smac, dmac, sip, dip):
        self.s, self.smac, self.dmac, self.sip, self.dip = sock, smac, dmac, sip, dip
        self.sport = random.randint(20000, 60000)
        self.isn = random.getrandbits(32)
        self.rcv = 0
        self.data = b""
        self.reset = False
        self.ip_id = random.randint(1, 60000)

    def tcp(self, seq, flags, payload=b"", bad=False, ack=None):
        ack = self.rcv if ack is None else ack
        h = struct.pack("!HHIIBBHHH", self.sport, 80, seq & 0xFFFFFFFF, ack, 5 << 4, flags, 65535, 0, 0)
        pseudo = self.sip + self.dip + struct.pack("!BBH", 0, 6, len(h) + len(payload))
        c = csum(pseudo + h + payload)
        if bad:
            c ^= 0x5A5A
        return h[:16] + struct.pack("!H", c) + h[18:] + payload

    def ip(self, body, frag=0, more=False, ident=None):
        ident = self.ip_id if ident is None else ident
        flags = (0x2000 if more else 0) | (frag // 8)
        h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), ident, flags, 64, 6, 0, self.sip, self.dip)
        return h[:10] + struct.pack("!H", csum(h)) + h[12:] + body

    def send_ip(self, packet):
        self.s.send(self.dmac + self.smac + b"\x08\x00" + packet)

    def send(self, off, payload, flags=ACK | PSH, bad=False):
        """A segment at stream offset `off` (0: the first byte after the SYN)."""
        self.ip_id += 1
        self.send_ip(self.ip(self.tcp(self.isn + 1 + off, flags, payload, bad)))

    def send_fragmented(self, off, payload):
        """One segment, in two IP fragments (the first 24 bytes of the TCP segment, then the rest)."""
        self.ip_id += 1
        seg = self.tcp(self.isn + 1 + off, ACK | PSH, payload)
        self.send_ip(self.ip(seg[:24], 0, True))
        self.send_ip(self.ip(seg[24:], 24, False))

    def receive(self, until):
        """Takes the server's segments for this connection until `until` (a monotonic time)."""
        while time.monotonic() < until:
            self.s.settimeout(max(0.01, until - time.monotonic()))
            try:
                f = self.s.recv(65536)
            except socket.timeout:
                return
            if len(f) < 54 or f[12:14] != b"\x08\x00" or f[23] != 6 or f[30:34] != self.sip:
                continue
            ihl = (f[14] & 0x0F) * 4
            t = f[14 + ihl :]
            sport, dport, seq, _ack, off, flags = struct.unpack("!HHIIBB", t[:14])
            if sport != 80 or dport != self.sport:
                continue
            payload = t[(off >> 4) * 4 :]
            total = struct.unpack("!H", f[16:18])[0]
            payload = payload[: max(0, total - ihl - (off >> 4) * 4)]
            if flags & RST:
                self.reset = True
                return
            if flags & SYN:
                self.rcv = (seq + 1) & 0xFFFFFFFF
                return
            if payload:
                self.data += payload
                self.rcv = (seq + len(payload)) & 0xFFFFFFFF

    def connect(self):
        self.send_ip(self.ip(self.tcp(self.isn, SYN, ack=0)))
        self.receive(time.monotonic() + 3)
        if self.rcv == 0:
            raise RuntimeError("no SYN-ACK for port %d" % self.sport)
        self.send_ip(self.ip(self.tcp(self.isn + 1, ACK)))

    def close(self):
        self.send_ip(self.ip(self.tcp(self.isn + 1 + 10000, RST | ACK)))


def request(target):
    return b"GET " + target + b" HTTP/1.1\r\nHost: h.example\r\n\r\n"


def run(c, name):
    n = name.encode()
    banned = request(b"/bad/" + n)
    good = request(b"/good?" + n)
    if name == "raw_in_order_good":
        # Control: the raw client itself works (the server answers it).
        c.send(0, good)
    elif name == "raw_reordered_good":
        # The second half first: the filter must reassemble it and let it pass.
        c.send(12, good[12:])
        time.sleep(0.05)
        c.send(0, good[:12])
    elif name == "raw_out_of_order":
        # The banned request's halves in reverse order, split inside "/bad".
        c.send(6, banned[6:])
        time.sleep(0.05)
        c.send(0, banned[:6])
    elif name == "raw_overlap_first_wins":
        # The server keeps the first copy of bytes it has (Linux); the second copy of bytes
        # 6..20 says something else. A filter that kept the second would read no banned URL.
        c.send(0, banned[:20])
        time.sleep(0.05)
        c.send(6, b"x" * 14 + banned[20:])
    elif name == "raw_overlap_ooo":
        # The overlap the other way: bytes 6.. first (out of order, bytes 6..20 harmless),
        # then bytes 0..20 of the banned request. The server takes the in-order copy of
        # 6..20 and the queued segment's bytes after it: the banned request. A filter that
        # kept the first copy it saw would read none.
        c.send(6, b"x" * 14 + banned[20:])
        time.sleep(0.05)
        c.send(0, banned[:20])
    elif name in ("raw_insert_bad_checksum", "raw_insert_no_ack"):
        # Insertion: after "GET /", a segment the server discards (a bad TCP checksum, or
        # data without ACK) that would complete a harmless request longer than the banned
        # one's rest; then the real rest. A filter that read the inserted segment would allow
        # that request and skip the real bytes (they fall before its next request); the
        # server reads the banned request.
        harmless = b"good?" + b"z" * 40 + b" HTTP/1.1\r\nHost: h.example\r\n\r\n"
        c.send(0, banned[:5])
        if name == "raw_insert_bad_checksum":
            c.send(5, harmless, bad=True)
        else:
            c.send(5, harmless, flags=PSH)
        time.sleep(0.05)
        c.send(5, banned[5:])
    elif name == "raw_ip_fragments":
        # The whole banned request in one TCP segment, carried in two IP fragments.
        c.send_fragmented(0, banned)
    else:
        raise RuntimeError("unknown variant " + name)


def main():
    ifname, smac, dmac, sip, dip = sys.argv[1:6]
    mac = lambda m: bytes.fromhex(m.replace(":", ""))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    s.bind((ifname, 0x0800))
    for name in sys.argv[6:]:
        c = Conn(s, mac(smac), mac(dmac), socket.inet_aton(sip), socket.inet_aton(dip))
        end = "quiet"
        try:
            c.connect()
            run(c, name)
            c.receive(time.monotonic() + 1.5)
            end = "reset" if c.reset else "quiet"
        except RuntimeError as e:
            end = "error: %s" % e
        c.close()
        print("%s\t%d\t%s" % (name, c.data.count(b"HTTP/1."), end), flush=True)


main()
