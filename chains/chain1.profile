# NetBlaze capacity profile of chains/chain1.toml (docs/PROTOCOL.md "NetBlaze profile")
# produced 2026-12-01 on this machine by:
#   cargo xtask profile --chain chains/chain1.toml --epoch-us 80 --acl-rules 1500 --reps 31
# frontier: flows:packets one core finishes per epoch (new flows); rate: flows:packets/s
# long term (known flows); service: cycles per packet and per new flow.
version=1
nfs=acl,lb,accounting
tsc_hz=2596000000
epoch_ns=80000
frontier=1:544,2:512,4:480,8:480,16:480,32:288,64:288,128:224
service=packet_cycles:611,flow_cycles:642
rate=1:6353620,100:3903874,500:3903874,1000:3903874,2000:3903874,3000:3903874,6000:3903874
split.1.head.frontier=1:1248,2:1216,4:1120,8:1088,16:1088,32:1088,64:1024,128:832,256:832,512:576
split.1.head.service=packet_cycles:228,flow_cycles:295
split.1.tail.frontier=1:1056,2:960,4:736,8:640,16:640,32:608,64:576,128:544,256:416
split.1.tail.service=packet_cycles:365,flow_cycles:85
split.2.head.frontier=1:832,2:704,4:704,8:704,16:704,32:704,64:704,128:704,256:544,512:544
split.2.head.service=packet_cycles:228,flow_cycles:125
split.2.tail.frontier=1:1184,2:1184,4:1184,8:1184,16:864,32:448,64:448,128:416,256:416,512:416
split.2.tail.service=packet_cycles:294,flow_cycles:64
