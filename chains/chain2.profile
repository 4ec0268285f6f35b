# NetBlaze capacity profile of chains/chain2.toml (docs/PROTOCOL.md "NetBlaze profile")
# produced 2026-12-01 on this machine by:
#   cargo xtask profile --chain chains/chain2.toml --epoch-us 80 --acl-rules 1500 --reps 31
# frontier: flows:packets one core finishes per epoch (new flows); rate: flows:packets/s
# long term (known flows); service: cycles per packet and per new flow.
version=1
nfs=acl,urlfilter,encrypt
tsc_hz=2596000000
epoch_ns=80000
frontier=1:160,2:160,4:160,8:160,16:128,32:128,64:128,128:128
service=packet_cycles:905,flow_cycles:830
rate=1:1476190,100:1476190,500:1470162,1000:1470162,2000:1470162,3000:1470162,6000:1470162
split.1.head.frontier=1:1280,2:832,4:832,8:832,16:832,32:768,64:768,128:768,256:672,512:672
split.1.head.service=packet_cycles:156,flow_cycles:156
split.1.tail.frontier=1:128,2:128,4:128,8:128,16:128,32:128,64:128,128:128
split.1.tail.service=packet_cycles:815,flow_cycles:457
split.2.head.frontier=1:128,2:96,4:96,8:96,16:96,32:96,64:96,128:96
split.2.head.service=packet_cycles:417,flow_cycles:994
split.2.tail.frontier=1:192,2:192,4:192,8:192,16:192,32:192,64:192,128:192,256:192
split.2.tail.service=packet_cycles:756,flow_cycles:0
