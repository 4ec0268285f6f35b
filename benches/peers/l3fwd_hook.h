/* Cadence's hook into DPDK's l3fwd example (built from Debian's dpdk-doc sources by
 * `cargo xtask peers`, which includes this file into l3fwd's main.c just before main()).
 *
 * l3fwd runs one lcore over two `net_ring` ports. A `net_ring` vdev is a loopback: what is sent
 * on queue q comes back on queue q, so frames injected once keep circulating through l3fwd's
 * real LPM path (rx burst, software ptype, rte_lpm_lookupx4, RFC 1812 checks and TTL decrement,
 * MAC rewrite, tx burst) with no allocation and no copy, like testpmd's `--tx-first` over
 * net_ring. cadence_peer_start() injects CADENCE_PEER_INFLIGHT (512) copies of the 64-byte
 * IPv4/TCP frames that core/benches/peers.rs sends (dst 10.1.0.1, src 10.2.x.y, CADENCE_PEER_FLOWS
 * = 500 flows) on port 0 and starts the clock; cadence_peer_stop() (after SIGINT ends the loop)
 * prints TSC cycles per forwarded packet: elapsed cycles / packets transmitted by all ports. */
#ifndef CADENCE_L3FWD_HOOK_H
#define CADENCE_L3FWD_HOOK_H

#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_tcp.h>

static uint64_t cph_tsc0, cph_pkts0;

static uint64_t cph_opackets(void)
{
	uint64_t sum = 0;
	uint16_t p;

	RTE_ETH_FOREACH_DEV(p) {
		struct rte_eth_stats st;

		if (rte_eth_stats_get(p, &st) == 0)
			sum += st.opackets;
	}
	return sum;
}

static unsigned int cph_env(const char *name, unsigned int dflt)
{
	const char *v = getenv(name);

	return v != NULL && atoi(v) > 0 ? (unsigned int)atoi(v) : dflt;
}

/* The 64-byte IPv4/TCP frame of `flow` (10 payload bytes, valid checksums). */
static void cph_frame(uint8_t *f, unsigned int flow)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(f + 34);
	const uint8_t mac[12] = {0x52, 0x54, 0, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 2};

	memset(f, 0, 64);
	memcpy(f, mac, 12);
	f[12] = 0x08;
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16(50);
	ip->time_to_live = 64;
	ip->next_proto_id = 6;
	ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 2, (flow >> 8) & 0xff, flow & 0xff));
	ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(10, 1, 0, 1));
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	tcp->src_port = rte_cpu_to_be_16(1024 + flow);
	tcp->dst_port = rte_cpu_to_be_16(80);
	tcp->sent_seq = rte_cpu_to_be_32(1000);
	tcp->data_off = 5 << 4;
	tcp->tcp_flags = 0x18;
	tcp->rx_win = rte_cpu_to_be_16(8192);
	memcpy(f + 54, "0123456789", 10);
	tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
}

static void cadence_peer_start(void)
{
	unsigned int inflight = cph_env("CADENCE_PEER_INFLIGHT", 512);
	unsigned int flows = cph_env("CADENCE_PEER_FLOWS", 500);
	struct rte_mempool *mp = NULL;
	unsigned int i, sent = 0;
	uint8_t frame[64];

	for (i = 0; i < RTE_MAX_ETHPORTS * NB_SOCKETS && mp == NULL; i++)
		mp = pktmbuf_pool[i / NB_SOCKETS][i % NB_SOCKETS];
	if (mp == NULL)
		rte_exit(EXIT_FAILURE, "cadence peer: no mbuf pool\n");
	for (i = 0; i < inflight; i++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
		uint8_t *f;

		if (m == NULL)
			rte_exit(EXIT_FAILURE, "cadence peer: mbuf pool empty\n");
		f = (uint8_t *)rte_pktmbuf_append(m, 64);
		if (f == NULL)
			rte_exit(EXIT_FAILURE, "cadence peer: mbuf too small\n");
		cph_frame(frame, i % flows);
		memcpy(f, frame, sizeof(frame));
		sent += rte_eth_tx_burst(0, 0, &m, 1);
	}
	printf("cadence peer: injected %u of %u frames on port 0\n", sent, inflight);
	cph_pkts0 = cph_opackets();
	cph_tsc0 = rte_rdtsc();
}

static void cadence_peer_stop(void)
{
	uint64_t cycles = rte_rdtsc() - cph_tsc0;
	uint64_t pkts = cph_opackets() - cph_pkts0;
	double c = pkts ? (double)cycles / (double)pkts : 0.0;

	printf("PEERBENCH impl=l3fwd op=l3fwd_lpm size=- pages=%s cycles=%.2f min=%.2f max=%.2f samples=1 ops=%llu\n",
	       rte_eal_has_hugepages() ? "2M" : "4k", c, c, c, (unsigned long long)pkts);
	fflush(stdout);
}

#endif
