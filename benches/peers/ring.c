/* rte_ring peer: SP/SC, burst 32, one producer lcore and one consumer lcore (the two vCPUs),
 * pointer elements, ring of 2048. Each sample moves PEER_RING_OBJS objects; each side times its
 * own loop (including its waits on the other side), and the figure is cycles per object of the
 * enqueue side plus the dequeue side, as DPDK's ring_perf_autotest reports its 2-lcore case.
 *
 *   peer_ring -l 0,1 <EAL args> -- [--samples S] [--min-ms M]
 *
 * Cadence's counterpart: `peers ring` in core/benches/peers.rs (core::netblaze::handoff, the same
 * ring size, burst, CPUs and figure); `cargo xtask peers` prints the Cadence / rte_ring ratio. */
#include <rte_launch.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include "common.h"

#define PEER_RING_OBJS (1u << 22)
#define PEER_RING_STOP UINT32_MAX

static struct rte_ring *ring;
static volatile uint32_t go_seq;
static volatile uint64_t cons_cycles;
static volatile uint32_t cons_done;

static int consumer(__rte_unused void *arg)
{
	void *objs[PEER_B];
	uint32_t seq = 0;

	for (;;) {
		uint32_t got = 0;
		uint64_t t0;

		while (go_seq == seq)
			rte_pause();
		seq = go_seq;
		if (seq == PEER_RING_STOP)
			return 0;
		t0 = rte_rdtsc();
		while (got < PEER_RING_OBJS)
			got += rte_ring_sc_dequeue_burst(ring, objs, PEER_B, NULL);
		cons_cycles = rte_rdtsc() - t0;
		__atomic_store_n(&cons_done, seq, __ATOMIC_RELEASE);
	}
}

int main(int argc, char **argv)
{
	int ret = rte_eal_init(argc, argv);
	size_t n;
	const char *label;
	int j, more;
	static struct peer_sampler sp;
	void *objs[PEER_B];
	unsigned int worker;
	uint32_t seq = 0;

	if (ret < 0)
		rte_exit(EXIT_FAILURE, "peer_ring: EAL init failed\n");
	peer_args(argc - ret, argv + ret, &n, &label);
	if (rte_lcore_count() < 2)
		rte_exit(EXIT_FAILURE, "peer_ring: needs two lcores (-l 0,1)\n");
	ring = rte_ring_create("peer_ring", 2048, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (ring == NULL)
		rte_exit(EXIT_FAILURE, "peer_ring: rte_ring_create failed\n");
	for (j = 0; j < PEER_B; j++)
		objs[j] = (void *)(uintptr_t)(j + 1);
	worker = rte_get_next_lcore(-1, 1, 0);
	rte_eal_remote_launch(consumer, NULL, worker);
	peer_begin(&sp);
	do {
		uint32_t put = 0;
		uint64_t t0, prod;

		go_seq = ++seq;
		t0 = rte_rdtsc();
		while (put < PEER_RING_OBJS)
			put += rte_ring_sp_enqueue_burst(ring, objs, PEER_B, NULL);
		prod = rte_rdtsc() - t0;
		while (__atomic_load_n(&cons_done, __ATOMIC_ACQUIRE) != seq)
			rte_pause();
		more = peer_more(&sp, (double)(prod + cons_cycles) / PEER_RING_OBJS);
	} while (more);
	go_seq = PEER_RING_STOP;
	rte_eal_wait_lcore(worker);
	peer_report("rte_ring", "ring_spsc_b32", "-", &sp, PEER_RING_OBJS);
	rte_eal_cleanup();
	return 0;
}
