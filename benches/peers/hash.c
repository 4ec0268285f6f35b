/* rte_hash peer: bulk lookup hit/miss (burst 32), add-on-miss and delete at a steady 75 %
 * occupancy, 16-byte keys, 8-byte data, CRC32 hash, `entries` = N (64K or 1M), no flags.
 *
 *   peer_hash <EAL args> -- --size 64K|1M [--samples S] [--min-ms M]
 *
 * add-on-miss hashes the 32 keys once (rte_hash_hash), looks them up with
 * rte_hash_lookup_with_hash_bulk_data and adds each miss with rte_hash_add_key_with_hash_data,
 * so the hash is computed once per key, as Cadence's lookup_burst + add_on_miss does.
 * delete is rte_hash_del_key by key. */
#include <rte_hash.h>
#include <rte_hash_crc.h>

#include "common.h"

static volatile uint64_t sink;

static struct rte_hash *make(const char *name, size_t n)
{
	struct rte_hash_parameters p = {
		.name = name,
		.entries = (uint32_t)n,
		.key_len = sizeof(struct peer_key),
		.hash_func = rte_hash_crc,
		.hash_func_init_val = 0,
		.socket_id = (int)rte_socket_id(),
		.extra_flag = 0,
	};
	struct rte_hash *h = rte_hash_create(&p);

	if (h == NULL)
		rte_exit(EXIT_FAILURE, "peer_hash: rte_hash_create(%zu) failed\n", n);
	return h;
}

static uint64_t fill(struct rte_hash *h, const struct peer_key *k, size_t n)
{
	uint64_t fail = 0;
	size_t i;

	for (i = 0; i < n; i++)
		fail += rte_hash_add_key_data(h, &k[i], (void *)(uintptr_t)(i + 1)) < 0;
	return fail;
}

/* Cycles per key of PEER_LOOKUP_BURSTS bulk lookups from `keys`; `want` = expected hits. */
static double lookups(struct rte_hash *h, const struct peer_key *keys, size_t live, size_t *cur,
		      uint64_t want_mask, uint64_t *bad)
{
	const void *kp[PEER_B];
	void *data[PEER_B];
	uint64_t spent = 0, mask;
	int i, j;

	for (i = 0; i < PEER_LOOKUP_BURSTS; i++) {
		size_t s = *cur % (live - PEER_B);
		uint64_t t0;

		*cur += PEER_STRIDE;
		for (j = 0; j < PEER_B; j++)
			kp[j] = &keys[s + j];
		t0 = rte_rdtsc();
		rte_hash_lookup_bulk_data(h, kp, PEER_B, &mask, data);
		spent += rte_rdtsc() - t0;
		*bad += mask != want_mask;
		sink += mask + (uintptr_t)data[0];
	}
	return (double)spent / (PEER_LOOKUP_BURSTS * PEER_B);
}

int main(int argc, char **argv)
{
	int ret = rte_eal_init(argc, argv);
	size_t n, live, cur = 0, head, tail;
	const char *label;
	int i, j;
	static struct peer_sampler sp;
	uint64_t bad = 0, fill_fail, add_fail = 0, adds = 0, del_fail = 0;

	if (ret < 0)
		rte_exit(EXIT_FAILURE, "peer_hash: EAL init failed\n");
	peer_args(argc - ret, argv + ret, &n, &label);
	live = peer_live(n);

	/* ---- lookups on a table holding `live` keys ---- */
	struct peer_key *present = peer_keys(n, 1), *absent = peer_keys(n, 2), *all = peer_keys(n, 3);
	struct rte_hash *h = make("peer_lookup", n);
	fill_fail = fill(h, present, live);
	peer_begin(&sp);
	while (peer_more(&sp, lookups(h, present, live, &cur, (1ULL << PEER_B) - 1, &bad)))
		;
	peer_report("rte_hash", "hit_b32", label, &sp, PEER_LOOKUP_BURSTS * PEER_B);
	peer_begin(&sp);
	while (peer_more(&sp, lookups(h, absent, live, &cur, 0, &bad)))
		;
	peer_report("rte_hash", "miss_b32", label, &sp, PEER_LOOKUP_BURSTS * PEER_B);
	rte_hash_free(h);

	/* ---- add-on-miss and delete at a steady 75 % ---- */
	h = make("peer_steady", n);
	fill_fail += fill(h, all, live);
	head = live;
	tail = 0;
	for (int phase = 0, more; phase < 2; phase++) {
		peer_begin(&sp);
		do {
			uint64_t spent = 0;

			for (i = 0; i < PEER_STEADY_STEPS; i++) {
				const struct peer_key *hk = &all[head % n], *dk = &all[tail % n];
				const void *kp[PEER_B];
				hash_sig_t sig[PEER_B];
				void *data[PEER_B];
				uint64_t mask, t0, t1, t2;

				head += PEER_B;
				tail += PEER_B;
				for (j = 0; j < PEER_B; j++)
					kp[j] = &hk[j];
				t0 = rte_rdtsc();
				for (j = 0; j < PEER_B; j++)
					sig[j] = rte_hash_hash(h, kp[j]);
				rte_hash_lookup_with_hash_bulk_data(h, kp, sig, PEER_B, &mask, data);
				for (j = 0; j < PEER_B; j++) {
					if (!(mask & (1ULL << j))) {
						int rc = rte_hash_add_key_with_hash_data(h, kp[j], sig[j],
											 (void *)(uintptr_t)(head + j));
						add_fail += rc < 0;
					}
				}
				t1 = rte_rdtsc();
				for (j = 0; j < PEER_B; j++)
					del_fail += rte_hash_del_key(h, &dk[j]) < 0;
				t2 = rte_rdtsc();
				adds += PEER_B;
				bad += mask != 0;
				spent += phase == 0 ? t1 - t0 : t2 - t1;
			}
			more = peer_more(&sp, (double)spent / (PEER_STEADY_STEPS * PEER_B));
		} while (more);
		peer_report("rte_hash", phase == 0 ? "add_on_miss" : "delete", label, &sp, PEER_STEADY_STEPS * PEER_B);
	}
	rte_hash_free(h);
	printf("PEERINFO impl=rte_hash size=%s fill_fail=%llu add_fail=%llu adds=%llu del_fail=%llu bad=%llu\n",
	       label, (unsigned long long)fill_fail, (unsigned long long)add_fail, (unsigned long long)adds,
	       (unsigned long long)del_fail, (unsigned long long)bad);
	rte_eal_cleanup();
	return 0;
}
