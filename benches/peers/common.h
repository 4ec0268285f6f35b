/* Shared by Cadence's DPDK peer programs (`cargo xtask peers`, docs/PERFORMANCE.md "Side by side").
 *
 * Every program measures the same way as Cadence's counterpart (core/benches/peers.rs):
 * one discarded warm-up sample, then samples until there are at least S (--samples) and at
 * least M milliseconds (--min-ms) have passed since the first, so that every figure spans a
 * window the harness's noise guard can judge; each sample is a fixed number of operations
 * timed with rdtsc around every burst; a sample's figure is TSC cycles per operation; the
 * program prints the median, min and max over its samples as one machine-readable line:
 *
 *   PEERBENCH impl=rte_hash op=hit_b32 size=64K pages=4k cycles=33.21 min=32.90 max=35.02 samples=7 ops=32768
 *
 * Keys are the same 16-byte splitmix64 keys the Rust side generates (same seeds, same order),
 * allocated from EAL memory so that they sit on the page size under test, like the tables.
 */
#ifndef CADENCE_PEER_COMMON_H
#define CADENCE_PEER_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#define PEER_B 32          /* burst size */
#define PEER_MAX_SAMPLES 4096

struct peer_key {
	uint64_t w[2];
};

static inline uint64_t peer_splitmix(uint64_t *s)
{
	uint64_t z;
	*s += 0x9E3779B97F4A7C15ULL;
	z = *s;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* n keys from `seed`, exactly as core/benches/peers.rs `keys(n, seed)`. */
static inline struct peer_key *peer_keys(size_t n, uint64_t seed)
{
	struct peer_key *k = rte_malloc("peer_keys", n * sizeof(*k), 64);
	uint64_t s = seed;
	size_t i;

	if (k == NULL)
		rte_exit(EXIT_FAILURE, "peer: no EAL memory for %zu keys\n", n);
	for (i = 0; i < n; i++) {
		k[i].w[0] = peer_splitmix(&s);
		k[i].w[1] = peer_splitmix(&s);
	}
	return k;
}

static inline int peer_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static inline const char *peer_pages(void)
{
	return rte_eal_has_hugepages() ? "2M" : "4k";
}

/* The sampling rule: --samples and --min-ms. */
static struct {
	int samples;
	uint64_t min_cycles;
} peer_cfg = {7, 0};

struct peer_sampler {
	uint64_t t0;
	int seen; /* samples offered, the warm-up included */
	double r[PEER_MAX_SAMPLES];
};

static inline void peer_begin(struct peer_sampler *s)
{
	s->t0 = rte_rdtsc();
	s->seen = 0;
}

/* Records one sample (the first is the warm-up and is dropped); returns whether to take another. */
static inline int peer_more(struct peer_sampler *s, double x)
{
	int kept;

	if (s->seen > 0)
		s->r[s->seen - 1] = x;
	s->seen++;
	kept = s->seen - 1;
	if (kept >= PEER_MAX_SAMPLES)
		return 0;
	return kept < peer_cfg.samples || rte_rdtsc() - s->t0 < peer_cfg.min_cycles;
}

/* Prints one result line: median/min/max of the kept samples of cycles per op. */
static inline void peer_report(const char *impl, const char *op, const char *size, struct peer_sampler *sp,
			       uint64_t ops_per_sample)
{
	double *s = sp->r;
	int n = sp->seen - 1;

	if (n < 1)
		return;
	qsort(s, n, sizeof(double), peer_cmp);
	printf("PEERBENCH impl=%s op=%s size=%s pages=%s cycles=%.2f min=%.2f max=%.2f samples=%d ops=%llu\n",
	       impl, op, size, peer_pages(), n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2, s[0], s[n - 1], n,
	       (unsigned long long)ops_per_sample);
	fflush(stdout);
}

/* Parses the program's own options (after EAL's): --size 64K|1M, --samples S, --min-ms M. */
static inline void peer_args(int argc, char **argv, size_t *n, const char **label)
{
	int i;

	*n = 1 << 16;
	*label = "64K";
	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--size") == 0) {
			if (strcmp(argv[i + 1], "64K") == 0) {
				*n = 1 << 16;
				*label = "64K";
			} else if (strcmp(argv[i + 1], "1M") == 0) {
				*n = 1 << 20;
				*label = "1M";
			} else {
				rte_exit(EXIT_FAILURE, "peer: --size must be 64K or 1M\n");
			}
		} else if (strcmp(argv[i], "--samples") == 0) {
			peer_cfg.samples = atoi(argv[i + 1]);
			if (peer_cfg.samples < 1 || peer_cfg.samples >= PEER_MAX_SAMPLES)
				rte_exit(EXIT_FAILURE, "peer: --samples out of range\n");
		} else if (strcmp(argv[i], "--min-ms") == 0) {
			peer_cfg.min_cycles = (uint64_t)atoi(argv[i + 1]) * (rte_get_tsc_hz() / 1000);
		} else {
			rte_exit(EXIT_FAILURE, "peer: unknown option %s\n", argv[i]);
		}
	}
}

/* The table protocol both sides follow:
 * - `live` = 3/4 of N (a multiple of 32) keys stored: rte_hash's 75 % load at N entries;
 * - hit/miss bursts: 32 consecutive keys of the present/absent list from a position that jumps
 *   by 32 * 7919 (mod live - 32) per burst, so consecutive bursts touch unrelated buckets;
 * - steady add-on-miss/delete: a window of `live` keys slides over a list of N keys: each step
 *   adds the next 32 (burst lookup, all miss, add each) and deletes the 32 oldest. */
#define PEER_STRIDE (PEER_B * 7919)
#define PEER_LOOKUP_BURSTS 1024
#define PEER_STEADY_STEPS 512

static inline size_t peer_live(size_t n)
{
	return (n * 3 / 4) / PEER_B * PEER_B;
}

#endif
