/* swx_run: DPDK 22.11's SWX pipeline as a reference runner, one frame at a time.
 *
 *   swx_run <EAL args> -- --spec SPEC --include DIR --ports N --in IN.pcap --out OUT
 *           [--table NAME FILE]... [--in-ports FILE] [--out-pcap PREFIX] [--work DIR]
 *           [--mirror SESSION PORT fast|slow TRUNCATE]... [--fresh] [--max-steps K]
 *
 * What it does, in order (each failure exits non-zero with a line naming what failed):
 *  1. rte_swx_pipeline_codegen(): SPEC to C (`WORK/pipeline.c`); a refused spec is reported with
 *     DPDK's line and message ("spec S line L: MSG").
 *  2. gcc -c -O3 -fpic -Wno-deprecated-declarations -I DIR $(pkg-config --cflags libdpdk), then
 *     gcc -shared: the C to `WORK/pipeline.so` (DIR holds DPDK's two internal headers that the
 *     generated code includes, rte_swx_pipeline_internal.h and rte_swx_pipeline_spec.h).
 *  3. rte_swx_pipeline_build_from_lib() with an I/O spec of ring ports (`bsz 1`): P input ports
 *     (P = N rounded up to a power of two, which the pipeline requires) and N output ports.
 *     DPDK adds its drop port after them (output port N): frames sent there are not reported.
 *  4. Every `--table NAME FILE`, in the order given, through rte_swx_ctl_pipeline_*, then one
 *     commit. NAME decides the syntax of FILE's lines:
 *       table:    `match KEY... [priority P] action ACTION [ARG VALUE]...` (DPDK's table-file
 *                 syntax, read by rte_swx_ctl_pipeline_table_entry_read);
 *       selector: `group G member M weight W` (groups 0..max G are created first);
 *       learner:  `action ACTION [ARG VALUE]...`, the learner's new default entry.
 *     Blank lines and comments (`;`, `#`, `//`) are skipped; any other line that is refused stops
 *     the run with the file, the line number and the line.
 *     Every `--mirror` sets a packet mirroring session (rte_swx_ctl_pipeline_mirroring_session_set):
 *     the output port of its copies, fast (shared buffer) or slow (copied) clone, and the length
 *     a copy is truncated to (0: not truncated). A spec that mirrors needs its sessions set: an
 *     unset session sends 0-byte copies to port 0.
 *  5. The frames of IN.pcap (classic pcap, Ethernet, micro- or nanosecond) one at a time: frame i
 *     is put on input port 0, or on the port of line i of `--in-ports FILE` (one decimal port a
 *     line), then rte_swx_pipeline_run(p, 1) is called until the frame has left its ring and
 *     every pipeline thread is back at `rx` with nothing to recirculate (at most K calls, default
 *     1000000: a spec that loops is reported, not waited for); then the output rings are drained
 *     in port order, so each frame's outputs are known before the next frame enters.
 *     With `--fresh`, before each frame every pipeline thread's metadata and header storage are
 *     zeroed and every header points at its own storage again, as in a newly built pipeline;
 *     without it, as in DPDK, a frame can see what earlier frames left there. Running both ways
 *     tells the frames whose output depends on earlier frames (undefined for a comparison).
 *
 * Exit status: 0 done; 1 a failure named on stderr (spec, table file, EAL, input, …); 3 the pipeline
 * crashed while running a frame, named on stderr (a `tx` to a port beyond DPDK's drop port reads
 * past its port array: DPDK does not check).
 *
 * OUT, a text file, one line per output frame, in input order, then output port order, then the
 * order the pipeline sent them (a mirrored copy comes before or after its original as DPDK sends
 * it); a frame that was dropped has no line:
 *
 *   INPUT_INDEX OUTPUT_PORT HEX_BYTES
 *
 * e.g. `0 1 aabbcc...` (input index from 0, lowercase hex, no spaces inside the bytes). A frame
 * whose length runs past its buffer — DPDK's `extract` does not check a frame's length, so a
 * runt's length wraps — is not read: its line is `INPUT_INDEX OUTPUT_PORT !LENGTH`. The frame
 * buffers are zeroed before each frame, so what a spec extracts past a runt's end is zeros. With
 * `--out-pcap PREFIX`, every output port also gets PREFIX.portJ.pcap, each frame stamped with its
 * input index as the seconds (microseconds 0), for Wireshark. Same inputs, same output bytes:
 * nothing here reads the clock (DPDK's learner and meters do read the TSC; see the report of
 * bench/src/swx for what that leaves undefined).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_swx_ctl.h>
#include <rte_swx_pipeline.h>

/* The pipeline's own layout (threads, their instruction pointers): DPDK's internal header. */
#include "rte_swx_pipeline_internal.h"

#define MAX_TABLES 64
#define MAX_MIRRORS 64
#define MAX_PORTS 64
#define RING_SIZE 1024
/* --bench: burst size, bursts per sample, at most this many samples (see bench()). */
#define BENCH_B 32
#define BENCH_BURSTS 2048
#define BENCH_MAX_SAMPLES 4096
#define N_MBUFS 4095
#define MBUF_DATA (RTE_PKTMBUF_HEADROOM + 16384)
#define LINE_MAX_LEN 4096

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("swx_run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_FAILURE);
}

struct frame {
	uint8_t *data;
	uint32_t len;
	uint32_t port;
};

struct table_file {
	const char *name;
	const char *file;
};

struct mirror {
	uint32_t session;
	struct rte_swx_pipeline_mirroring_session_params params;
};

struct args {
	const char *spec;
	const char *include;
	const char *in;
	const char *in_ports;
	const char *out;
	const char *out_pcap;
	const char *work;
	uint32_t n_ports;
	uint64_t max_steps;
	struct table_file tables[MAX_TABLES];
	uint32_t n_tables;
	struct mirror mirrors[MAX_MIRRORS];
	uint32_t n_mirrors;
	int fresh;
	/* --bench MS: time the pipeline instead of recording outputs (see bench()). */
	uint64_t bench_ms;
	uint32_t samples;
	const char *label;
};

static uint64_t parse_u64(const char *what, const char *s)
{
	char *end = NULL;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		die("%s: not a number: '%s'", what, s);
	return v;
}

static void parse_args(int argc, char **argv, struct args *a)
{
	int i;

	memset(a, 0, sizeof(*a));
	a->max_steps = 1000000;
	a->samples = 7;
	for (i = 0; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--fresh")) {
			a->fresh = 1;
			continue;
		}
		if (!v)
			die("option %s needs a value", o);
		if (!strcmp(o, "--spec"))
			a->spec = v;
		else if (!strcmp(o, "--include"))
			a->include = v;
		else if (!strcmp(o, "--in"))
			a->in = v;
		else if (!strcmp(o, "--in-ports"))
			a->in_ports = v;
		else if (!strcmp(o, "--out"))
			a->out = v;
		else if (!strcmp(o, "--out-pcap"))
			a->out_pcap = v;
		else if (!strcmp(o, "--work"))
			a->work = v;
		else if (!strcmp(o, "--ports"))
			a->n_ports = (uint32_t)parse_u64("--ports", v);
		else if (!strcmp(o, "--max-steps"))
			a->max_steps = parse_u64("--max-steps", v);
		else if (!strcmp(o, "--bench"))
			a->bench_ms = parse_u64("--bench", v);
		else if (!strcmp(o, "--samples"))
			a->samples = (uint32_t)parse_u64("--samples", v);
		else if (!strcmp(o, "--label"))
			a->label = v;
		else if (!strcmp(o, "--table")) {
			if (i + 2 >= argc)
				die("--table needs NAME and FILE");
			if (a->n_tables == MAX_TABLES)
				die("more than %d --table options", MAX_TABLES);
			a->tables[a->n_tables].name = argv[i + 1];
			a->tables[a->n_tables].file = argv[i + 2];
			a->n_tables++;
			i++;
		} else if (!strcmp(o, "--mirror")) {
			struct mirror *m = &a->mirrors[a->n_mirrors];

			if (i + 4 >= argc)
				die("--mirror needs SESSION PORT fast|slow TRUNCATE");
			if (a->n_mirrors == MAX_MIRRORS)
				die("more than %d --mirror options", MAX_MIRRORS);
			m->session = (uint32_t)parse_u64("--mirror SESSION", argv[i + 1]);
			m->params.port_id = (uint32_t)parse_u64("--mirror PORT", argv[i + 2]);
			if (!strcmp(argv[i + 3], "fast"))
				m->params.fast_clone = 1;
			else if (!strcmp(argv[i + 3], "slow"))
				m->params.fast_clone = 0;
			else
				die("--mirror: '%s' is neither fast nor slow", argv[i + 3]);
			m->params.truncation_length = (uint32_t)parse_u64("--mirror TRUNCATE", argv[i + 4]);
			a->n_mirrors++;
			i += 3;
		} else
			die("unknown option %s", o);
		i++;
	}
	if (!a->spec || !a->include || !a->in || (!a->out && !a->bench_ms) || !a->n_ports)
		die("usage: swx_run <EAL args> -- --spec SPEC --include DIR --ports N --in IN.pcap --out OUT "
		    "[--table NAME FILE]... [--in-ports FILE] [--out-pcap PREFIX] [--work DIR] "
		    "[--mirror SESSION PORT fast|slow TRUNCATE]... [--fresh] [--max-steps K]\n"
		    "       swx_run <EAL args> -- --spec SPEC --include DIR --ports N --in IN.pcap --bench MS "
		    "[--samples S] [--label L] [--table NAME FILE]...");
	if (a->bench_ms && (!a->samples || a->samples > BENCH_MAX_SAMPLES))
		die("--samples must be 1..%d", BENCH_MAX_SAMPLES);
	if (a->n_ports > MAX_PORTS)
		die("--ports %u: at most %d", a->n_ports, MAX_PORTS);
	if (!a->max_steps)
		die("--max-steps must be at least 1");
}

/* ---- pcap (classic libpcap format: a 24-byte file header, a 16-byte header per record) ---- */

static uint32_t swap32(uint32_t x)
{
	return __builtin_bswap32(x);
}

static struct frame *read_pcap(const char *path, uint32_t *n_frames)
{
	FILE *f = fopen(path, "rb");
	uint32_t hdr[6], rec[4], n = 0, cap = 0;
	struct frame *frames = NULL;
	int swapped;

	if (!f)
		die("%s: %s", path, strerror(errno));
	if (fread(hdr, 4, 6, f) != 6)
		die("%s: not a pcap file (shorter than its 24-byte header)", path);
	if (hdr[0] == 0xa1b2c3d4 || hdr[0] == 0xa1b23c4d)
		swapped = 0;
	else if (hdr[0] == 0xd4c3b2a1 || hdr[0] == 0x4d3cb2a1)
		swapped = 1;
	else
		die("%s: not a pcap file (magic 0x%08x)", path, hdr[0]);
	if ((swapped ? swap32(hdr[5]) : hdr[5]) != 1)
		die("%s: link type %u, not Ethernet (1)", path, swapped ? swap32(hdr[5]) : hdr[5]);
	for (;;) {
		size_t got = fread(rec, 4, 4, f);
		uint32_t len;

		if (got == 0 && feof(f))
			break;
		if (got != 4)
			die("%s: frame %u: truncated record header", path, n);
		len = swapped ? swap32(rec[2]) : rec[2];
		if (len > MBUF_DATA - RTE_PKTMBUF_HEADROOM)
			die("%s: frame %u: %u bytes, more than the runner's %u", path, n, len,
			    MBUF_DATA - RTE_PKTMBUF_HEADROOM);
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			frames = realloc(frames, cap * sizeof(*frames));
			if (!frames)
				die("out of memory reading %s", path);
		}
		frames[n].len = len;
		frames[n].port = 0;
		frames[n].data = malloc(len ? len : 1);
		if (!frames[n].data)
			die("out of memory reading %s", path);
		if (fread(frames[n].data, 1, len, f) != len)
			die("%s: frame %u: truncated (%u bytes announced)", path, n, len);
		n++;
	}
	if (ferror(f))
		die("%s: read error", path);
	fclose(f);
	*n_frames = n;
	return frames;
}

static FILE *pcap_create(const char *path)
{
	uint32_t hdr[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1}; /* v2.4, snaplen, Ethernet */
	FILE *f = fopen(path, "wb");

	if (!f)
		die("%s: %s", path, strerror(errno));
	if (fwrite(hdr, 4, 6, f) != 6)
		die("%s: write error", path);
	return f;
}

static void pcap_write(FILE *f, const char *path, uint32_t ts_sec, const uint8_t *data, uint32_t len)
{
	uint32_t rec[4] = {ts_sec, 0, len, len};

	if (fwrite(rec, 4, 4, f) != 4 || fwrite(data, 1, len, f) != len)
		die("%s: write error", path);
}

static void read_in_ports(const char *path, struct frame *frames, uint32_t n_frames, uint32_t n_ports)
{
	FILE *f = fopen(path, "r");
	char line[64];
	uint32_t i = 0;

	if (!f)
		die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *end = NULL;
		unsigned long v;

		line[strcspn(line, "\r\n")] = 0;
		if (i == n_frames)
			die("%s: more lines than the %u frames of the input", path, n_frames);
		errno = 0;
		v = strtoul(line, &end, 10);
		if (errno || end == line || *end || v >= n_ports)
			die("%s line %u: '%s' is not an input port below %u", path, i + 1, line, n_ports);
		frames[i++].port = (uint32_t)v;
	}
	if (ferror(f))
		die("%s: read error", path);
	fclose(f);
	if (i != n_frames)
		die("%s: %u lines for %u frames", path, i, n_frames);
}

/* ---- codegen and the shared object ---- */

/* Without --work: the temporary directory and its three files, removed however the run ends
 * (exit, die, or the crash handler: unlink and rmdir are async-signal-safe). */
static char tmp_dir[4096], tmp_files[3][4200];

static void remove_tmp_work(void)
{
	int k;

	if (!tmp_dir[0])
		return;
	for (k = 0; k < 3; k++)
		unlink(tmp_files[k]);
	rmdir(tmp_dir);
}

static void run_cmd(char *const argv[])
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "swx_run: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		int i;

		fprintf(stderr, "swx_run: command failed (status 0x%x):", st);
		for (i = 0; argv[i]; i++)
			fprintf(stderr, " %s", argv[i]);
		fputc('\n', stderr);
		die("building the pipeline's shared object failed");
	}
}

static void codegen(const char *spec, const char *c_file)
{
	FILE *in = fopen(spec, "r"), *out;
	const char *msg = NULL;
	uint32_t line = 0;
	int status;

	if (!in)
		die("spec %s: %s", spec, strerror(errno));
	out = fopen(c_file, "w");
	if (!out)
		die("%s: %s", c_file, strerror(errno));
	status = rte_swx_pipeline_codegen(in, out, &line, &msg);
	fclose(in);
	if (fclose(out))
		die("%s: write error", c_file);
	if (status)
		die("spec %s line %u: %s (codegen refused the spec: %s)", spec, line, msg ? msg : "no message",
		    strerror(-status));
}

static void build_lib(const struct args *a, const char *c_file, const char *o_file, const char *so_file)
{
	char *argv[256], *flags = NULL, *save = NULL, *tok;
	size_t cap = 0;
	ssize_t got;
	FILE *pc = popen("pkg-config --cflags libdpdk", "r");
	int n = 0;

	if (!pc)
		die("pkg-config: %s", strerror(errno));
	got = getline(&flags, &cap, pc);
	if (pclose(pc) != 0 || got < 0)
		die("pkg-config --cflags libdpdk failed (is libdpdk-dev installed?)");
	argv[n++] = "gcc";
	argv[n++] = "-c";
	argv[n++] = "-O3";
	argv[n++] = "-fpic";
	argv[n++] = "-Wno-deprecated-declarations";
	argv[n++] = "-DALLOW_EXPERIMENTAL_API";
	argv[n++] = "-I";
	argv[n++] = (char *)a->include;
	for (tok = strtok_r(flags, " \t\n", &save); tok && n < 240; tok = strtok_r(NULL, " \t\n", &save))
		argv[n++] = tok;
	argv[n++] = "-o";
	argv[n++] = (char *)o_file;
	argv[n++] = (char *)c_file;
	argv[n] = NULL;
	run_cmd(argv);
	{
		char *link[] = {"gcc", "-shared", "-o", (char *)so_file, (char *)o_file, NULL};

		run_cmd(link);
	}
	free(flags);
}

/* ---- tables ---- */

enum kind { KIND_NONE, KIND_TABLE, KIND_SELECTOR, KIND_LEARNER };

static enum kind table_kind(struct rte_swx_pipeline *p, const char *name)
{
	struct rte_swx_ctl_pipeline_info info;
	uint32_t i;

	if (rte_swx_ctl_pipeline_info_get(p, &info))
		die("rte_swx_ctl_pipeline_info_get failed");
	for (i = 0; i < info.n_tables; i++) {
		struct rte_swx_ctl_table_info t;

		if (rte_swx_ctl_table_info_get(p, i, &t))
			die("rte_swx_ctl_table_info_get(%u) failed", i);
		if (!strcmp(t.name, name))
			return KIND_TABLE;
	}
	for (i = 0; i < info.n_selectors; i++) {
		struct rte_swx_ctl_selector_info s;

		if (rte_swx_ctl_selector_info_get(p, i, &s))
			die("rte_swx_ctl_selector_info_get(%u) failed", i);
		if (!strcmp(s.name, name))
			return KIND_SELECTOR;
	}
	for (i = 0; i < info.n_learners; i++) {
		struct rte_swx_ctl_learner_info l;

		if (rte_swx_ctl_learner_info_get(p, i, &l))
			die("rte_swx_ctl_learner_info_get(%u) failed", i);
		if (!strcmp(l.name, name))
			return KIND_LEARNER;
	}
	return KIND_NONE;
}

/* An entry from rte_swx_ctl_pipeline_*_entry_read: the caller owns it and its three arrays. */
static void entry_free(struct rte_swx_table_entry *e)
{
	if (!e)
		return;
	free(e->key);
	free(e->key_mask);
	free(e->action_data);
	free(e);
}

/* Whether a line holds nothing but blanks and a comment (`;`, `#`, `//`). */
static int blank_or_comment(const char *s)
{
	s += strspn(s, " \t\r\n\f\v");
	return !*s || *s == ';' || *s == '#' || (s[0] == '/' && s[1] == '/');
}

static void selector_line(struct rte_swx_ctl_pipeline *ctl, const struct table_file *tf, uint32_t line_no,
			  const char *line, uint32_t *n_groups)
{
	char copy[LINE_MAX_LEN], *tok[8], *save = NULL, *t;
	uint32_t n = 0, group, member, weight;
	int status;

	snprintf(copy, sizeof(copy), "%s", line);
	for (t = strtok_r(copy, " \t\r\n", &save); t && n < 8; t = strtok_r(NULL, " \t\r\n", &save))
		tok[n++] = t;
	if (n != 6 || strcmp(tok[0], "group") || strcmp(tok[2], "member") || strcmp(tok[4], "weight"))
		die("%s line %u: selector %s: not 'group G member M weight W': %s", tf->file, line_no, tf->name, line);
	group = (uint32_t)parse_u64(tf->file, tok[1]);
	member = (uint32_t)parse_u64(tf->file, tok[3]);
	weight = (uint32_t)parse_u64(tf->file, tok[5]);
	/* Groups are numbered by DPDK as they are added: add them up to this one. */
	while (*n_groups <= group) {
		uint32_t id = UINT32_MAX;

		status = rte_swx_ctl_pipeline_selector_group_add(ctl, tf->name, &id);
		if (status)
			die("%s line %u: selector %s: adding group %u failed: %s", tf->file, line_no, tf->name,
			    *n_groups, strerror(-status));
		if (id != *n_groups)
			die("%s line %u: selector %s: DPDK gave group %u, expected %u", tf->file, line_no, tf->name, id,
			    *n_groups);
		(*n_groups)++;
	}
	status = rte_swx_ctl_pipeline_selector_group_member_add(ctl, tf->name, group, member, weight);
	if (status)
		die("%s line %u: selector %s refused the member: %s (%s)", tf->file, line_no, tf->name, line,
		    strerror(-status));
}

static void load_table_file(struct rte_swx_pipeline *p, struct rte_swx_ctl_pipeline *ctl, const struct table_file *tf)
{
	enum kind kind = table_kind(p, tf->name);
	FILE *f;
	char line[LINE_MAX_LEN];
	uint32_t line_no = 0, n_groups = 0;

	if (kind == KIND_NONE)
		die("--table %s %s: the spec has no table, selector or learner named %s", tf->name, tf->file, tf->name);
	f = fopen(tf->file, "r");
	if (!f)
		die("table file %s: %s", tf->file, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		struct rte_swx_table_entry *e = NULL;
		int blank = 0, status = 0;

		line_no++;
		if (!strchr(line, '\n') && !feof(f))
			die("%s line %u: longer than %d characters", tf->file, line_no, LINE_MAX_LEN - 2);
		line[strcspn(line, "\r\n")] = 0;
		if (blank_or_comment(line))
			continue;
		switch (kind) {
		case KIND_TABLE:
			e = rte_swx_ctl_pipeline_table_entry_read(ctl, tf->name, line, &blank);
			if (!e)
				die("%s line %u: table %s refused the entry: %s", tf->file, line_no, tf->name, line);
			status = rte_swx_ctl_pipeline_table_entry_add(ctl, tf->name, e);
			break;
		case KIND_LEARNER:
			e = rte_swx_ctl_pipeline_learner_default_entry_read(ctl, tf->name, line, &blank);
			if (!e)
				die("%s line %u: learner %s refused the default entry: %s", tf->file, line_no, tf->name,
				    line);
			status = rte_swx_ctl_pipeline_learner_default_entry_add(ctl, tf->name, e);
			break;
		case KIND_SELECTOR:
			selector_line(ctl, tf, line_no, line, &n_groups);
			break;
		case KIND_NONE:
			break;
		}
		entry_free(e);
		if (status)
			die("%s line %u: %s refused to add the entry: %s (%s)", tf->file, line_no, tf->name, line,
			    strerror(-status));
	}
	if (ferror(f))
		die("table file %s: read error", tf->file);
	fclose(f);
}

/* ---- running ---- */

/* The frame in the pipeline, for the crash report: DPDK does not check a `tx` port against the
 * configured ones, and a port beyond its drop port reads past its port array. */
static volatile sig_atomic_t current_frame = -1;

/* Async-signal-safe pieces of the crash report. */
static size_t put_str(char *buf, size_t n, size_t cap, const char *str)
{
	while (*str && n < cap)
		buf[n++] = *str++;
	return n;
}

static size_t put_num(char *buf, size_t n, size_t cap, long x)
{
	char d[24];
	size_t k = 0;

	if (x < 0)
		return put_str(buf, n, cap, "?");
	do {
		d[k++] = (char)('0' + x % 10);
		x /= 10;
	} while (x);
	while (k && n < cap)
		buf[n++] = d[--k];
	return n;
}

static void crashed(int sig)
{
	char msg[256];
	size_t n = 0;

	n = put_str(msg, n, sizeof(msg), "swx_run: the pipeline crashed (signal ");
	n = put_num(msg, n, sizeof(msg), sig);
	n = put_str(msg, n, sizeof(msg), ") at frame ");
	n = put_num(msg, n, sizeof(msg), current_frame);
	n = put_str(msg, n, sizeof(msg),
		    ": a tx to a port beyond the configured ones, or another behaviour DPDK leaves undefined\n");
	remove_tmp_work();
	if (write(STDERR_FILENO, msg, n) < 0)
		_exit(4);
	_exit(3);
}

static void on_crash(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = crashed;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL))
			die("sigaction: %s", strerror(errno));
}

/* Whether the pipeline holds no packet: every thread waits at `rx` with nothing to recirculate. */
static int pipeline_idle(const struct rte_swx_pipeline *p)
{
	uint32_t i;

	for (i = 0; i < RTE_SWX_PIPELINE_THREADS_MAX; i++)
		if (p->threads[i].ip != p->instructions || p->threads[i].recirculate)
			return 0;
	return 1;
}

/* --fresh: every thread's metadata and header storage zeroed, every header back on its own storage
 * (an extracted header's struct points into the last packet's buffer until the thread validates or
 * extracts it again). */
static void pipeline_fresh(struct rte_swx_pipeline *p)
{
	uint32_t i;

	for (i = 0; i < RTE_SWX_PIPELINE_THREADS_MAX; i++) {
		struct thread *t = &p->threads[i];
		struct header *h;

		if (p->metadata_st && t->metadata)
			memset(t->metadata, 0, p->metadata_st->n_bits / 8);
		TAILQ_FOREACH(h, &p->headers, node) {
			memset(t->headers[h->id].ptr0, 0, t->headers[h->id].n_bytes);
			t->structs[h->struct_id] = t->headers[h->id].ptr0;
		}
	}
}

static void hex_line(FILE *f, const char *path, uint32_t index, uint32_t port, const uint8_t *d, uint32_t len)
{
	static const char digits[] = "0123456789abcdef";
	uint32_t i;

	if (fprintf(f, "%u %u ", index, port) < 0)
		die("%s: write error", path);
	for (i = 0; i < len; i++) {
		if (fputc(digits[d[i] >> 4], f) == EOF || fputc(digits[d[i] & 15], f) == EOF)
			die("%s: write error", path);
	}
	if (fputc('\n', f) == EOF)
		die("%s: write error", path);
}

/* ---- --bench: cycles per packet, measured as Cadence's forwarding benches measure ----
 *
 * The frames of IN.pcap, cycled, go to input port 0 in bursts of BENCH_B: outside the timed
 * region each burst's mbufs are allocated and the frames copied in (a NIC's DMA, as Cadence's
 * software NIC delivers a batch outside its timing); timed, with rte_rdtsc() around each burst:
 * the burst enqueued on the input ring, the pipeline run until that ring is empty and every
 * thread is back at `rx`, flushed, and every output ring drained and its mbufs freed (the
 * transmit side). The ports are ring ports of burst size BENCH_B. A sample is BENCH_BURSTS
 * bursts; its figure is TSC cycles per packet the pipeline received (its input port's count).
 * One warm-up sample is dropped, then samples until there are at least S and MS milliseconds
 * have passed. Printed as Cadence's peers bench prints, with the op `p4`:
 *
 *   PEERBENCH impl=swx op=p4 size=LABEL pages=4k|2M cycles=MEDIAN min=MIN max=MAX samples=N ops=PKTS
 */

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

static uint64_t port_in_packets(struct rte_swx_pipeline *p)
{
	struct rte_swx_port_in_stats st;

	memset(&st, 0, sizeof(st));
	if (rte_swx_ctl_pipeline_port_in_stats_read(p, 0, &st))
		die("reading input port 0's counters failed");
	return st.n_pkts;
}

static void bench(struct rte_swx_pipeline *p, struct rte_mempool *pool, struct rte_ring *in,
		  struct rte_ring **outs, uint32_t n_out, const struct frame *frames, uint32_t n_frames,
		  const struct args *a)
{
	static double r[BENCH_MAX_SAMPLES];
	struct rte_mbuf *ms[BENCH_B];
	void *o[BENCH_B];
	uint64_t min_cycles = a->bench_ms * (rte_get_tsc_hz() / 1000), start = rte_rdtsc();
	uint64_t out_pkts = 0, in_total = 0;
	uint32_t next = 0, seen = 0, b, i, j, k, n;

	if (!n_frames)
		die("--bench: %s holds no frame", a->in);
	for (;;) {
		uint64_t cycles = 0, before = port_in_packets(p), got;

		for (b = 0; b < BENCH_BURSTS; b++) {
			uint64_t t0;

			for (i = 0; i < BENCH_B; i++) {
				const struct frame *f = &frames[next];
				char *d;

				next = (next + 1) % n_frames;
				ms[i] = rte_pktmbuf_alloc(pool);
				if (!ms[i])
					die("--bench: no mbuf");
				d = rte_pktmbuf_append(ms[i], (uint16_t)f->len);
				if (!d && f->len)
					die("--bench: a %u-byte frame does not fit an mbuf", f->len);
				if (f->len)
					memcpy(d, f->data, f->len);
			}
			t0 = rte_rdtsc();
			n = rte_ring_sp_enqueue_burst(in, (void **)ms, BENCH_B, NULL);
			while (!rte_ring_empty(in) || !pipeline_idle(p))
				rte_swx_pipeline_run(p, 16);
			rte_swx_pipeline_flush(p);
			for (j = 0; j < n_out; j++)
				while ((k = rte_ring_sc_dequeue_burst(outs[j], o, BENCH_B, NULL)) > 0) {
					rte_pktmbuf_free_bulk((struct rte_mbuf **)o, k);
					out_pkts += k;
				}
			cycles += rte_rdtsc() - t0;
			if (n < BENCH_B)
				rte_pktmbuf_free_bulk(ms + n, BENCH_B - n);
		}
		got = port_in_packets(p) - before;
		in_total += got;
		if (!got)
			die("--bench: the pipeline received nothing");
		if (seen > 0)
			r[seen - 1] = (double)cycles / (double)got;
		seen++;
		if (seen - 1 >= BENCH_MAX_SAMPLES ||
		    (seen - 1 >= a->samples && rte_rdtsc() - start >= min_cycles))
			break;
	}
	n = seen - 1;
	qsort(r, n, sizeof(double), cmp_double);
	printf("PEERBENCH impl=swx op=p4 size=%s pages=%s cycles=%.2f min=%.2f max=%.2f samples=%u ops=%u\n",
	       a->label ? a->label : "-", rte_eal_has_hugepages() ? "2M" : "4k",
	       n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2, r[0], r[n - 1], n, BENCH_B * BENCH_BURSTS);
	printf("PEERINFO impl=swx op=p4 size=%s rx=%" PRIu64 " tx=%" PRIu64 "\n", a->label ? a->label : "-",
	       in_total, out_pkts);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct args a;
	struct frame *frames;
	uint32_t n_frames, n_in, i, j, n_out_frames = 0, n_dropped = 0, n_overruns = 0;
	struct rte_ring *in_rings[MAX_PORTS], *out_rings[MAX_PORTS];
	struct rte_mempool *pool;
	struct rte_swx_pipeline *p = NULL;
	struct rte_swx_ctl_pipeline *ctl;
	FILE *out, *pcaps[MAX_PORTS] = {0}, *io;
	char *pcap_paths[MAX_PORTS] = {0};
	char work[4096], c_file[4200], o_file[4200], so_file[4200], iospec[8192];
	size_t io_len = 0;
	int eal, status;

	eal = rte_eal_init(argc, argv);
	if (eal < 0)
		die("EAL initialisation failed: %s", rte_strerror(rte_errno));
	/* rte_eal_init took the EAL arguments and the `--`, and put the program's name before the rest. */
	parse_args(argc - eal - 1, argv + eal + 1, &a);

	for (n_in = 1; n_in < a.n_ports; n_in <<= 1)
		;
	frames = read_pcap(a.in, &n_frames);
	if (a.in_ports)
		read_in_ports(a.in_ports, frames, n_frames, a.n_ports);

	/* 1, 2: the spec to C to a shared object. */
	if (a.work) {
		snprintf(work, sizeof(work), "%s", a.work);
		if (mkdir(work, 0755) && errno != EEXIST)
			die("--work %s: %s", work, strerror(errno));
	} else {
		snprintf(work, sizeof(work), "/tmp/swx_run.XXXXXX");
		if (!mkdtemp(work))
			die("mkdtemp: %s", strerror(errno));
	}
	snprintf(c_file, sizeof(c_file), "%s/pipeline.c", work);
	snprintf(o_file, sizeof(o_file), "%s/pipeline.o", work);
	snprintf(so_file, sizeof(so_file), "%s/pipeline.so", work);
	if (!a.work) {
		snprintf(tmp_files[0], sizeof(tmp_files[0]), "%s", c_file);
		snprintf(tmp_files[1], sizeof(tmp_files[1]), "%s", o_file);
		snprintf(tmp_files[2], sizeof(tmp_files[2]), "%s", so_file);
		snprintf(tmp_dir, sizeof(tmp_dir), "%s", work);
		if (atexit(remove_tmp_work))
			die("atexit failed");
	}
	codegen(a.spec, c_file);
	build_lib(&a, c_file, o_file, so_file);

	/* 3: rings, the I/O spec and the pipeline. */
	for (i = 0; i < n_in; i++) {
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), "swx_in%u", i);
		in_rings[i] = rte_ring_create(name, RING_SIZE, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (!in_rings[i])
			die("rte_ring_create(%s): %s", name, rte_strerror(rte_errno));
		io_len += snprintf(iospec + io_len, sizeof(iospec) - io_len, "port in %u ring %s bsz %u\n", i, name,
				   a.bench_ms ? BENCH_B : 1);
		if (io_len >= sizeof(iospec))
			die("I/O spec too long");
	}
	for (j = 0; j < a.n_ports; j++) {
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), "swx_out%u", j);
		out_rings[j] = rte_ring_create(name, RING_SIZE, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (!out_rings[j])
			die("rte_ring_create(%s): %s", name, rte_strerror(rte_errno));
		io_len += snprintf(iospec + io_len, sizeof(iospec) - io_len, "port out %u ring %s bsz %u\n", j, name,
				   a.bench_ms ? BENCH_B : 1);
		if (io_len >= sizeof(iospec))
			die("I/O spec too long");
	}
	io = fmemopen(iospec, io_len, "r");
	if (!io)
		die("fmemopen: %s", strerror(errno));
	status = rte_swx_pipeline_build_from_lib(&p, "swx_run", so_file, io, (int)rte_socket_id());
	fclose(io);
	if (status)
		die("building the pipeline from %s (spec %s) failed: %s", so_file, a.spec, strerror(-status));

	/* 4: the tables. */
	ctl = rte_swx_ctl_pipeline_create(p);
	if (!ctl)
		die("rte_swx_ctl_pipeline_create failed");
	for (i = 0; i < a.n_tables; i++)
		load_table_file(p, ctl, &a.tables[i]);
	status = rte_swx_ctl_pipeline_commit(ctl, 1);
	if (status)
		die("committing the table entries failed: %s", strerror(-status));
	for (i = 0; i < a.n_mirrors; i++) {
		status = rte_swx_ctl_pipeline_mirroring_session_set(p, a.mirrors[i].session, &a.mirrors[i].params);
		if (status)
			die("--mirror %u %u: DPDK refused the session: %s", a.mirrors[i].session,
			    a.mirrors[i].params.port_id, strerror(-status));
	}

	/* 5: the frames, one at a time. */
	/* A per-lcore cache when timing, as a DPDK application has one; none otherwise. */
	pool = rte_pktmbuf_pool_create("swx_pool", N_MBUFS, a.bench_ms ? 256 : 0, 0, MBUF_DATA, (int)rte_socket_id());
	if (!pool)
		die("rte_pktmbuf_pool_create: %s", rte_strerror(rte_errno));
	if (a.bench_ms) {
		on_crash();
		bench(p, pool, in_rings[0], out_rings, a.n_ports, frames, n_frames, &a);
		rte_swx_ctl_pipeline_free(ctl);
		rte_eal_cleanup();
		return 0;
	}
	out = fopen(a.out, "w");
	if (!out)
		die("%s: %s", a.out, strerror(errno));
	if (a.out_pcap) {
		for (j = 0; j < a.n_ports; j++) {
			if (asprintf(&pcap_paths[j], "%s.port%u.pcap", a.out_pcap, j) < 0)
				die("out of memory");
			pcaps[j] = pcap_create(pcap_paths[j]);
		}
	}
	on_crash();
	for (i = 0; i < n_frames; i++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
		uint64_t steps = 0;
		uint32_t sent = 0;
		char *dst;

		if (!m)
			die("frame %u: no mbuf", i);
		/* The whole buffer zeroed: a spec that extracts past a runt's end reads zeros, not what an
		 * earlier frame left in this buffer. */
		memset(m->buf_addr, 0, m->buf_len);
		dst = rte_pktmbuf_append(m, (uint16_t)frames[i].len);
		if (!dst && frames[i].len)
			die("frame %u: %u bytes do not fit an mbuf", i, frames[i].len);
		if (frames[i].len)
			memcpy(dst, frames[i].data, frames[i].len);
		if (a.fresh)
			pipeline_fresh(p);
		current_frame = (sig_atomic_t)i;
		if (rte_ring_sp_enqueue(in_rings[frames[i].port], m))
			die("frame %u: input ring %u full", i, frames[i].port);
		while (!rte_ring_empty(in_rings[frames[i].port]) || !pipeline_idle(p)) {
			if (steps++ == a.max_steps)
				die("frame %u: not done after %" PRIu64 " pipeline steps (does the spec loop?)", i,
				    a.max_steps);
			rte_swx_pipeline_run(p, 1);
		}
		rte_swx_pipeline_flush(p);
		for (j = 0; j < a.n_ports; j++) {
			void *o;

			while (rte_ring_sc_dequeue(out_rings[j], &o) == 0) {
				struct rte_mbuf *om = o;
				const uint8_t *d;
				uint8_t *copy = NULL;

				if (om->nb_segs == 1 && (uint64_t)om->data_off + om->pkt_len > om->buf_len) {
					/* A length that runs past the buffer: a runt whose extracted headers were
					 * longer than it (DPDK does not check), its length wrapped. */
					if (fprintf(out, "%u %u !%u\n", i, j, om->pkt_len) < 0)
						die("%s: write error", a.out);
					rte_pktmbuf_free(om);
					sent++;
					n_overruns++;
					continue;
				}
				if (om->nb_segs == 1)
					d = rte_pktmbuf_mtod(om, const uint8_t *);
				else {
					copy = malloc(om->pkt_len ? om->pkt_len : 1);
					if (!copy)
						die("out of memory");
					d = rte_pktmbuf_read(om, 0, om->pkt_len, copy);
					if (!d)
						die("frame %u: cannot read a %u-byte output on port %u", i, om->pkt_len, j);
				}
				hex_line(out, a.out, i, j, d, om->pkt_len);
				if (pcaps[j])
					pcap_write(pcaps[j], pcap_paths[j], i, d, om->pkt_len);
				free(copy);
				rte_pktmbuf_free(om);
				sent++;
			}
		}
		n_out_frames += sent;
		n_dropped += !sent;
	}
	if (fclose(out))
		die("%s: write error", a.out);
	for (j = 0; j < a.n_ports; j++) {
		if (pcaps[j] && fclose(pcaps[j]))
			die("%s: write error", pcap_paths[j]);
		free(pcap_paths[j]);
	}
	fprintf(stderr, "swx_run: %s: %u frames in, %u frames out (%u past their buffer), %u inputs with no output\n",
		a.spec, n_frames, n_out_frames, n_overruns, n_dropped);

	/* The pipeline is left to the process's exit: DPDK 22.11's rte_swx_pipeline_free() reports
	 * "EAL: Error: Invalid memory" when it frees fib.spec's pipeline (an rte_free of memory that
	 * did not come from rte_malloc), which would read like a failure of the run. */
	rte_swx_ctl_pipeline_free(ctl);
	for (i = 0; i < n_frames; i++)
		free(frames[i].data);
	free(frames);
	rte_eal_cleanup();
	return 0;
}
