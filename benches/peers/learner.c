/* SWX learner peer (rte_swx_table_learner, DPDK's add-on-miss table): burst-32 lookup hit/miss,
 * learn (add-on-miss) and delete at a steady 75 % of n_keys_max, rearm after a hit; 16-byte keys,
 * 8-byte action data, default hash, n_keys_max = N (64K or 1M), one 3600 s timeout.
 *
 *   peer_learner <EAL args> -- --size 64K|1M [--samples S] [--min-ms M]
 *
 * A burst interleaves 32 lookups through 32 mailboxes: the first call of each hashes the key and
 * prefetches its bucket, later calls finish it (the table's own 2-phase design). learn = burst
 * lookup (all miss) + rte_swx_table_learner_add per miss; delete = burst lookup (hit) +
 * rte_swx_table_learner_delete per hit (the learner deletes only the key its mailbox last looked
 * up); rearm = burst lookup (hit) + rte_swx_table_learner_rearm per hit. */
#include <rte_swx_table_learner.h>

#include "common.h"

static volatile uint64_t sink;
static uint8_t *mb[PEER_B];
static uint64_t now;

/* Looks up keys[0..32) through the 32 mailboxes; hit[j] says which hit. */
static inline void burst(void *t, uint8_t **keys, int *hit)
{
	int done[PEER_B], left, j;
	uint64_t aid;
	uint8_t *ad;
	size_t eid;

	for (j = 0; j < PEER_B; j++) {
		done[j] = rte_swx_table_learner_lookup(t, mb[j], now, &keys[j], &aid, &ad, &eid, &hit[j]);
		if (done[j] && hit[j])
			sink += *(uint64_t *)ad;
	}
	do {
		left = 0;
		for (j = 0; j < PEER_B; j++) {
			if (done[j])
				continue;
			done[j] = rte_swx_table_learner_lookup(t, mb[j], now, &keys[j], &aid, &ad, &eid, &hit[j]);
			if (done[j] && hit[j])
				sink += *(uint64_t *)ad;
			left += !done[j];
		}
	} while (left);
}

static void *make(size_t n)
{
	uint32_t timeout[1] = {3600};
	struct rte_swx_table_learner_params p = {
		.key_size = sizeof(struct peer_key),
		.key_offset = 0,
		.key_mask0 = NULL,
		.action_data_size = 8,
		.hash_func = NULL,
		.n_keys_max = (uint32_t)n,
		.key_timeout = timeout,
		.n_key_timeouts = 1,
	};
	void *t = rte_swx_table_learner_create(&p, (int)rte_socket_id());

	if (t == NULL)
		rte_exit(EXIT_FAILURE, "peer_learner: create(%zu) failed\n", n);
	return t;
}

static uint64_t learn(void *t, struct peer_key *k, uint64_t data, int *hit, uint8_t **kp)
{
	uint64_t fail = 0, ad = data;
	int j;

	for (j = 0; j < PEER_B; j++)
		kp[j] = (uint8_t *)&k[j];
	burst(t, kp, hit);
	for (j = 0; j < PEER_B; j++)
		if (!hit[j])
			fail += rte_swx_table_learner_add(t, mb[j], now, 1, (uint8_t *)&ad, 0) != 0;
	return fail;
}

enum kind { HIT, MISS, REARM };

static double lookups(void *t, struct peer_key *keys, size_t live, size_t *cur, enum kind kind, uint64_t *bad)
{
	uint8_t *kp[PEER_B];
	int hit[PEER_B], i, j;
	uint64_t spent = 0;

	for (i = 0; i < PEER_LOOKUP_BURSTS; i++) {
		size_t s = *cur % (live - PEER_B);
		uint64_t t0;

		*cur += PEER_STRIDE;
		for (j = 0; j < PEER_B; j++)
			kp[j] = (uint8_t *)&keys[s + j];
		t0 = rte_rdtsc();
		burst(t, kp, hit);
		if (kind == REARM)
			for (j = 0; j < PEER_B; j++)
				if (hit[j])
					rte_swx_table_learner_rearm(t, mb[j], now);
		spent += rte_rdtsc() - t0;
		for (j = 0; j < PEER_B; j++)
			*bad += hit[j] != (kind != MISS);
	}
	return (double)spent / (PEER_LOOKUP_BURSTS * PEER_B);
}

int main(int argc, char **argv)
{
	int ret = rte_eal_init(argc, argv);
	size_t n, live, cur = 0, head, tail, i;
	const char *label;
	int j, hit[PEER_B];
	static struct peer_sampler sp;
	uint64_t bad = 0, fill_fail = 0, add_fail = 0, adds = 0;
	uint8_t *kp[PEER_B];

	if (ret < 0)
		rte_exit(EXIT_FAILURE, "peer_learner: EAL init failed\n");
	peer_args(argc - ret, argv + ret, &n, &label);
	live = peer_live(n);
	now = rte_rdtsc();
	for (j = 0; j < PEER_B; j++) {
		mb[j] = rte_zmalloc("peer_mailbox", rte_swx_table_learner_mailbox_size_get(), 64);
		if (mb[j] == NULL)
			rte_exit(EXIT_FAILURE, "peer_learner: no memory for mailboxes\n");
	}

	/* ---- lookups and rearm on a table holding `live` keys ---- */
	struct peer_key *present = peer_keys(n, 1), *absent = peer_keys(n, 2), *all = peer_keys(n, 3);
	void *t = make(n);
	for (i = 0; i < live; i += PEER_B)
		fill_fail += learn(t, &present[i], i + 1, hit, kp);
	peer_begin(&sp);
	while (peer_more(&sp, lookups(t, present, live, &cur, HIT, &bad)))
		;
	peer_report("learner", "hit_b32", label, &sp, PEER_LOOKUP_BURSTS * PEER_B);
	peer_begin(&sp);
	while (peer_more(&sp, lookups(t, absent, live, &cur, MISS, &bad)))
		;
	peer_report("learner", "miss_b32", label, &sp, PEER_LOOKUP_BURSTS * PEER_B);
	peer_begin(&sp);
	while (peer_more(&sp, lookups(t, present, live, &cur, REARM, &bad)))
		;
	peer_report("learner", "rearm", label, &sp, PEER_LOOKUP_BURSTS * PEER_B);
	rte_swx_table_learner_free(t);

	/* ---- learn (add-on-miss) and delete at a steady 75 % ---- */
	t = make(n);
	for (i = 0; i < live; i += PEER_B)
		fill_fail += learn(t, &all[i], i + 1, hit, kp);
	head = live;
	tail = 0;
	for (int phase = 0, more; phase < 2; phase++) {
		peer_begin(&sp);
		do {
			uint64_t spent = 0;

			for (int step = 0; step < PEER_STEADY_STEPS; step++) {
				struct peer_key *hk = &all[head % n], *dk = &all[tail % n];
				uint64_t t0, t1, t2;

				head += PEER_B;
				tail += PEER_B;
				t0 = rte_rdtsc();
				add_fail += learn(t, hk, head, hit, kp);
				t1 = rte_rdtsc();
				for (j = 0; j < PEER_B; j++)
					bad += hit[j];
				for (j = 0; j < PEER_B; j++)
					kp[j] = (uint8_t *)&dk[j];
				burst(t, kp, hit);
				for (j = 0; j < PEER_B; j++)
					if (hit[j])
						rte_swx_table_learner_delete(t, mb[j]);
				t2 = rte_rdtsc();
				adds += PEER_B;
				spent += phase == 0 ? t1 - t0 : t2 - t1;
			}
			more = peer_more(&sp, (double)spent / (PEER_STEADY_STEPS * PEER_B));
		} while (more);
		peer_report("learner", phase == 0 ? "add_on_miss" : "delete", label, &sp, PEER_STEADY_STEPS * PEER_B);
	}
	rte_swx_table_learner_free(t);
	printf("PEERINFO impl=learner size=%s fill_fail=%llu add_fail=%llu adds=%llu bad=%llu\n", label,
	       (unsigned long long)fill_fail, (unsigned long long)add_fail, (unsigned long long)adds,
	       (unsigned long long)bad);
	rte_eal_cleanup();
	return 0;
}
