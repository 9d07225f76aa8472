/*
 * findings.c - evaluation of the findings (findings.def) on the per-iteration
 * results and the run-level evidence of the streaming pass.
 *
 * Divided into: helpers (top tables, file-size buckets, evidence), then one
 * function per finding, then an_findings_eval(). Each finding states why it fired
 * in numbers (evidence), where (iterations, call sites) and what to do (advice).
 * The advice paraphrases ../shared/background/ (two field articles on why GPU
 * jobs stall: "Dix mythes GPU" and "Optimiser et monitorer son hardware IA");
 * docs/definitions.md quotes which passage grounds each paragraph.
 */
#include "findings.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- helpers */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

void an_top_add(struct an_top *t, const char *key, uint64_t count, uint64_t bytes, uint64_t ns)
{
	uint64_t h = hash_str(key);
	size_t min = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->e[i].hash == h && !strncmp(t->e[i].key, key, sizeof(t->e[i].key) - 1)) {
			t->e[i].count += count;
			t->e[i].bytes += bytes;
			t->e[i].ns += ns;
			return;
		}
		if (t->e[i].count < t->e[min].count)
			min = i;
	}
	struct an_top_entry *e;
	if (t->n < AN_TOP_CAP) {
		e = &t->e[t->n++];
		memset(e, 0, sizeof(*e));
	} else {
		e = &t->e[min]; /* space-saving: the newcomer inherits the evicted count */
	}
	e->hash = h;
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->count += count;
	e->bytes += bytes;
	e->ns += ns;
}

static int top_by_count(const void *a, const void *b)
{
	const struct an_top_entry *x = a, *y = b;
	return x->count > y->count ? -1 : x->count < y->count;
}

static int top_by_bytes(const void *a, const void *b)
{
	const struct an_top_entry *x = a, *y = b;
	return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

void an_top_sort(struct an_top *t, int by_bytes)
{
	qsort(t->e, t->n, sizeof(t->e[0]), by_bytes ? top_by_bytes : top_by_count);
}

unsigned an_fsize_bucket(uint64_t n)
{
	if (!n)
		return 0;
	unsigned b = 64 - (unsigned)__builtin_clzll(n); /* n in [2^(b-1), 2^b) */
	return b < AN_FSIZE_BUCKETS ? b : AN_FSIZE_BUCKETS - 1;
}

/* The bucket of the (lower) median of a bucket histogram, -1 when it is empty. */
static int fsize_median_bucket(const uint32_t *hist)
{
	uint64_t total = 0, acc = 0;
	for (unsigned b = 0; b < AN_FSIZE_BUCKETS; b++)
		total += hist[b];
	for (unsigned b = 0; total && b < AN_FSIZE_BUCKETS; b++) {
		acc += hist[b];
		if (acc * 2 >= total)
			return (int)b;
	}
	return -1;
}

void an_evidence_num(struct an_result_finding *f, const char *key, double v)
{
	if (f->nev >= AN_MAX_EVIDENCE)
		return;
	f->ev[f->nev].key = key;
	f->ev[f->nev].is_str = 0;
	f->ev[f->nev].num = v;
	f->nev++;
}

void an_evidence_str(struct an_result_finding *f, const char *key, const char *v)
{
	if (f->nev >= AN_MAX_EVIDENCE)
		return;
	f->ev[f->nev].key = key;
	f->ev[f->nev].is_str = 1;
	snprintf(f->ev[f->nev].str, sizeof(f->ev[f->nev].str), "%s", v);
	f->nev++;
}

static void add_site(struct an_result_finding *f, const char *site)
{
	if (!site || !*site || f->nsites >= AN_MAX_SITES)
		return;
	for (int i = 0; i < f->nsites; i++)
		if (!strcmp(f->sites[i], site))
			return;
	snprintf(f->sites[f->nsites++], sizeof(f->sites[0]), "%s", site);
}

/* The sites of a table, most bytes first; a copy is sorted, the table stays as collected. */
static void add_top_sites(struct an_result_finding *f, const struct an_top *t)
{
	struct an_top sites = *t;
	an_top_sort(&sites, 1);
	for (size_t i = 0; i < sites.n; i++)
		add_site(f, sites.e[i].key);
}

static struct an_result_finding *new_finding(struct an_analysis *a, int kind)
{
	struct an_result_finding *v = realloc(a->fnd, (a->nfnd + 1) * sizeof(*v));
	if (!v)
		return NULL;
	a->fnd = v;
	struct an_result_finding *f = &v[a->nfnd++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->first_iteration = f->last_iteration = -1;
	return f;
}

static void flag_iteration(struct an_result_finding *f, long i)
{
	if (i < 0)
		return;
	if (f->first_iteration < 0 || i < f->first_iteration)
		f->first_iteration = i;
	if (i > f->last_iteration)
		f->last_iteration = i;
	f->iterations++;
	/* the list, for the HTML strip: increasing, each once; on no memory the strip shows first..last */
	if (f->niter && f->iter[f->niter - 1] >= i)
		return;
	if (f->niter == f->iter_cap) {
		size_t cap = f->iter_cap ? 2 * f->iter_cap : 16;
		long *v = realloc(f->iter, cap * sizeof(*v));
		if (!v) {
			free(f->iter);
			f->iter = NULL;
			f->niter = f->iter_cap = 0;
			return;
		}
		f->iter = v;
		f->iter_cap = cap;
	}
	f->iter[f->niter++] = i;
}

static uint64_t iter_wall(const struct an_iter *it)
{
	return it->end_ns - it->start_ns;
}

/* ------------------------------------------------------ small_file_storm */

/*
 * Is the median of the bytes read per opened file (the lower median of an even
 * count) under max? Half the files or more are under it; files opened and
 * closed without a read (written, as a checkpoint's) are not in it, and when
 * only such files were closed there is no read storm; when no file was
 * closed, the mean.
 */
static int iter_files_small(const struct an_iter *it, double max)
{
	if (it->files_sized)
		return 2 * (uint64_t)it->files_small >= it->files_sized;
	if (it->files_unread)
		return 0;
	return (double)(it->files_opened ? it->bytes_read / it->files_opened : 0) < max;
}

/*
 * The evidence's median file size: the mean of the median's bucket, exact when
 * the files there have one size (a data set of 16 KiB samples reports 16384, not
 * the bucket's bound 32767). 0 when no file was sized.
 */
static uint64_t run_file_median(const struct an_collect *c)
{
	int b = fsize_median_bucket(c->fsize_hist);
	return b < 0 ? 0 : c->fsize_sum[b] / c->fsize_hist[b];
}

static int small_file_storm(struct an_analysis *a, const struct an_collect *c)
{
	const double *th = a->opt.threshold;
	uint64_t wall = 0, input = 0, meta = 0, meta_ns = 0, data_ns = 0, files = 0, bytes = 0;
	uint64_t split[AN_SPLIT__COUNT] = {0}, unsampled = 0;
	size_t nflag = 0;
	uint64_t *per = malloc((a->nit + 1) * sizeof(*per));
	if (!per)
		return -1;
	struct an_result_finding tmp = {.kind = AN_F_SMALL_FILE_STORM, .first_iteration = -1, .last_iteration = -1};
	/* no iterations: the whole run is one span (a CPU-only job, a job without a training loop) */
	int whole = !a->nit;
	const struct an_iter *its = whole ? &a->run_input : a->it;
	for (size_t i = 0; i < (whole ? 1 : a->nit); i++) {
		const struct an_iter *it = &its[i];
		if ((double)(it->opens + it->stats) < th[AN_T_SFS_MIN_META] ||
		    !iter_files_small(it, th[AN_T_SFS_MAX_FILE]))
			continue;
		if (!whole)
			flag_iteration(&tmp, (long)i);
		per[nflag++] = it->files_opened;
		wall += iter_wall(it);
		input += it->bd[AN_INPUT];
		meta += it->metadata_ops;
		for (int k = 0; k < AN_SPLIT__COUNT; k++)
			split[k] += it->split[k];
		unsampled += it->split_unsampled;
		meta_ns += it->meta_ns;
		data_ns += it->data_ns;
		files += it->files_opened;
		bytes += it->bytes_read;
	}
	if (!nflag) {
		free(per);
		return 0;
	}
	struct an_result_finding *f = new_finding(a, AN_F_SMALL_FILE_STORM);
	if (!f) {
		free(per);
		free(tmp.iter);
		return -1;
	}
	*f = tmp;
	f->cost_ns = input;
	double share = wall ? (double)input / (double)wall : 0;
	f->severity = share >= th[AN_T_SFS_CRIT] ? 2 : share >= th[AN_T_SFS_WARN] ? 1 : 0;
	/*
	 * The files are the cause only when file I/O is the largest part of the exposed
	 * input (the split): workers busy decoding, or idle, are another finding's.
	 * Not known when most of the input has no sampled worker to explain it (a
	 * trace before 1.5, STEPPROF_CPU_SAMPLES=0): the rule stays the size rule.
	 */
	uint64_t wait_known = split[AN_SPLIT_WAIT] - unsampled;
	int known = 2 * unsampled < input;
	if (known && (split[AN_SPLIT_IO] < split[AN_SPLIT_CPU] || split[AN_SPLIT_IO] < wait_known))
		f->severity = 0;
	if (whole)
		an_evidence_str(f, "scope", "whole_run");
	an_evidence_num(f, "files_per_iteration", (double)an_quantile_u64(per, nflag, 0.5));
	an_evidence_num(f, "metadata_ops_per_s", wall ? (double)meta / ((double)wall / 1e9) : 0);
	uint64_t med = run_file_median(c);
	an_evidence_num(f, "median_file_bytes", (double)(med ? med : files ? bytes / files : 0));
	an_evidence_num(f, "metadata_ns", (double)meta_ns);
	an_evidence_num(f, "data_ns", (double)data_ns);
	an_evidence_num(f, "input_share", share);
	if (!whole && input)
		an_evidence_num(f, "input_io_fraction", (double)split[AN_SPLIT_IO] / (double)input);
	struct an_top dirs = c->dirs;
	an_top_sort(&dirs, 0);
	char top[256] = "";
	size_t used = 0;
	for (size_t i = 0; i < dirs.n && i < 3; i++) {
		int w = snprintf(top + used, sizeof(top) - used, "%s%s (%llu opens)", i ? ", " : "", dirs.e[i].key,
				 (unsigned long long)dirs.e[i].count);
		if (w < 0 || (size_t)w >= sizeof(top) - used)
			break;
		used += (size_t)w;
	}
	an_evidence_str(f, "top_directories", top);
	snprintf(f->advice, sizeof(f->advice),
		 "The training thread waits for input while the loaders spend their time opening and stat-ing many "
		 "small files (a metadata storm) rather than reading bytes: the GPU is starved, not slow. Pack the "
		 "samples into larger shards (record formats such as TFRecord or WebDataset), stage the data set on "
		 "local NVMe instead of shared storage, prefer sequential reads and prefetch with enough DataLoader "
		 "workers so that a batch is ready before the step needs it.");
	free(per);
	return 0;
}

/* --------------------------------------------------------- unpinned_copy */

static const char upc_advice[] =
    "Host-to-device and device-to-host copies use pageable host memory: the driver stages them through "
    "a bounce buffer, they run at a fraction of the link's bandwidth and an Async copy from pageable "
    "memory silently becomes synchronous, so the host blocks instead of overlapping the transfer with "
    "compute. Allocate the buffers that feed the GPU as pinned (page-locked) memory (DataLoader "
    "pin_memory=True, cudaHostAlloc or cudaHostRegister) and copy with non_blocking/async copies; pin the "
    "loader's buffers, not everything, since locked memory is taken from the host.";

static const char upc_small_advice[] =
    "Most of this copy time is in copies of a few bytes from the GPU to pageable memory: values read "
    "back one at a time (loss.item(), .cpu() or printing a scalar, Python control flow on a tensor), "
    "each of which waits for the work queued before it, so the host stops queuing work ahead of the GPU. "
    "Their cost is the synchronisation, not the bandwidth, and pinning does not remove it: read values "
    "back less often (accumulate losses and metrics on the GPU and fetch them every N steps), keep "
    "tensors on the GPU rather than moving them back and forth, and drop synchronisations the step does "
    "not need.";

static const char upc_also_pin[] =
    " The larger copies from pageable memory: allocate their host buffers pinned (DataLoader "
    "pin_memory=True, cudaHostAlloc or cudaHostRegister) and copy them with non_blocking/async copies.";

static int unpinned_copy(struct an_analysis *a, const struct an_collect *c)
{
	const double *th = a->opt.threshold;
	uint64_t copies = 0, bytes = 0, ns = 0, async = 0, pbytes = 0, pns = 0, wall = 0, small = 0, small_ns = 0;
	struct an_result_finding tmp = {.kind = AN_F_UNPINNED_COPY, .first_iteration = -1, .last_iteration = -1};
	for (size_t i = 0; i < a->nit; i++) {
		const struct an_iter *it = &a->it[i];
		wall += iter_wall(it);
		pbytes += it->pinned_bytes;
		pns += it->pinned_ns;
		if (!it->pageable_copies)
			continue;
		flag_iteration(&tmp, (long)i);
		copies += it->pageable_copies;
		bytes += it->pageable_bytes;
		ns += it->pageable_ns;
		async += it->pageable_async;
		small += it->pageable_small;
		small_ns += it->pageable_small_ns;
	}
	struct an_result_finding *f = NULL;
	if (copies && (double)copies >= th[AN_T_UPC_MIN_COPIES])
		f = new_finding(a, AN_F_UNPINNED_COPY);
	if (!f) {
		free(tmp.iter);
		return copies && (double)copies >= th[AN_T_UPC_MIN_COPIES] ? -1 : 0;
	}
	*f = tmp;
	f->cost_ns = ns;
	double share = wall ? (double)ns / (double)wall : 0;
	f->severity = share >= th[AN_T_UPC_CRIT] ? 2 : (share >= th[AN_T_UPC_WARN] || async) ? 1 : 0;
	double n = a->nit ? (double)a->nit : 1;
	an_evidence_num(f, "copies", (double)copies);
	an_evidence_num(f, "bytes", (double)bytes);
	an_evidence_num(f, "copies_per_iteration", (double)copies / n);
	an_evidence_num(f, "bytes_per_iteration", (double)bytes / n);
	an_evidence_num(f, "ns_per_iteration", (double)ns / n);
	an_evidence_num(f, "time_share", share);
	an_evidence_num(f, "async_copies", (double)async);
	an_evidence_num(f, "achieved_gbps", ns ? (double)bytes / (double)ns : 0);
	if (pns)
		an_evidence_num(f, "pinned_gbps", (double)pbytes / (double)pns);
	if (c->link_gbps > 0)
		an_evidence_num(f, "link_gbps", c->link_gbps);
	an_evidence_num(f, "small_copies", (double)small);
	an_evidence_num(f, "small_copies_time_share", ns ? (double)small_ns / (double)ns : 0);
	add_top_sites(f, &c->copy_sites);
	/*
	 * Copies of a few bytes holding half the copies' time or more: scalars read
	 * back (loss.item(), printing a value), each a synchronisation; pinning is
	 * no remedy there (PyTorch's .item() has no pinned form), fewer reads are.
	 */
	if (small && small_ns * 2 >= ns)
		snprintf(f->advice, sizeof(f->advice), "%s%s", upc_small_advice, copies > small ? upc_also_pin : "");
	else
		snprintf(f->advice, sizeof(f->advice), "%s", upc_advice);
	return 0;
}

/* --------------------------------------------------- alloc_fragmentation */

static const char frag_advice[] =
    "Free device memory exists but not in one piece: tensors of varying sizes fragment the allocator's "
    "segments, so a large request fails (or forces the cache to be released and the allocation retried, which "
    "stalls the step) although the total free looks sufficient. Prefer constant shapes and batch sizes (pad or "
    "bucket variable lengths), allocate large long-lived buffers first, use the allocator's controls (PyTorch: "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True or max_split_size_mb) and watch the per-iteration peak, "
    "not only whether the model fits in VRAM.";

static int alloc_fragmentation(struct an_analysis *a, const struct an_collect *c)
{
	const double *th = a->opt.threshold;
	/* (a) a failed allocation while free memory >= the request */
	if (c->nfail_with_free) {
		struct an_result_finding *f = new_finding(a, AN_F_ALLOC_FRAGMENTATION);
		if (!f)
			return -1;
		f->signal = "failed_with_free_memory";
		f->severity = 2;
		const struct an_alloc_failure *first = NULL;
		for (size_t i = 0; i < c->nfail; i++) {
			const struct an_alloc_failure *x = &c->fail[i];
			if (x->free < x->request)
				continue;
			if (!first)
				first = x;
			flag_iteration(f, x->iteration);
			add_site(f, x->site);
		}
		an_evidence_num(f, "failures", (double)c->nfail_with_free);
		if (first) {
			an_evidence_num(f, "iteration", (double)first->iteration);
			an_evidence_num(f, "request_bytes", (double)first->request);
			an_evidence_num(f, "free_bytes_at_failure", (double)first->free);
			an_evidence_num(f, "total_bytes", (double)first->total);
		}
		snprintf(f->advice, sizeof(f->advice), "%s", frag_advice);
	}
	/* (b) an allocator flush: a burst of frees, then allocations again */
	if (c->nflush_total) {
		struct an_result_finding *f = new_finding(a, AN_F_ALLOC_FRAGMENTATION);
		if (!f)
			return -1;
		f->signal = "allocator_flush";
		f->severity = 1;
		for (size_t i = 0; i < c->nflush; i++)
			flag_iteration(f, c->flush[i].iteration);
		an_evidence_num(f, "flushes", (double)c->nflush_total);
		if (c->nflush) {
			an_evidence_num(f, "iteration", (double)c->flush[0].iteration);
			an_evidence_num(f, "frees", (double)c->flush[0].frees);
			an_evidence_num(f, "freed_bytes", (double)c->flush[0].freed_bytes);
			an_evidence_num(f, "live_bytes_before", (double)c->flush[0].live_before);
			an_evidence_num(f, "after_failed_allocation", c->flush[0].after_failure);
		}
		snprintf(f->advice, sizeof(f->advice), "%s", frag_advice);
	}
	/* (c) a fragmentation peak: an iteration far above the steady peak while sizes churn */
	if (a->nit) {
		uint64_t *peaks = malloc(a->nit * sizeof(*peaks));
		if (!peaks)
			return -1;
		for (size_t i = 0; i < a->nit; i++)
			peaks[i] = a->it[i].device_bytes_peak;
		uint64_t steady = an_quantile_u64(peaks, a->nit, 0.5);
		free(peaks);
		struct an_result_finding tmp = {
		    .kind = AN_F_ALLOC_FRAGMENTATION, .first_iteration = -1, .last_iteration = -1};
		uint64_t worst = 0;
		uint32_t worst_sizes = 0;
		for (size_t i = 0; steady && i < a->nit; i++) {
			const struct an_iter *it = &a->it[i];
			if ((double)it->device_bytes_peak < th[AN_T_AF_PEAK_RATIO] * (double)steady ||
			    (double)it->nsizes < th[AN_T_AF_CHURN_SIZES])
				continue;
			flag_iteration(&tmp, (long)i);
			if (it->device_bytes_peak > worst) {
				worst = it->device_bytes_peak;
				worst_sizes = it->nsizes;
			}
		}
		if (tmp.iterations) {
			struct an_result_finding *f = new_finding(a, AN_F_ALLOC_FRAGMENTATION);
			if (!f) {
				free(tmp.iter);
				return -1;
			}
			*f = tmp;
			f->signal = "fragmentation_peak";
			f->severity = 1;
			an_evidence_num(f, "steady_peak_bytes", (double)steady);
			an_evidence_num(f, "peak_bytes", (double)worst);
			an_evidence_num(f, "ratio", (double)worst / (double)steady);
			an_evidence_num(f, "distinct_sizes", worst_sizes > AN_SIZESET ? AN_SIZESET + 1 : worst_sizes);
			snprintf(f->advice, sizeof(f->advice), "%s", frag_advice);
		}
	}
	return 0;
}

/* --------------------------------------------------------- memory_growth */

void an_growth_evidence(struct an_result_finding *f, const double *th, double slope, double r2, double growth,
			double start, double end, double x_last, uint64_t capacity)
{
	double exhaust = -1;
	if (capacity)
		exhaust = (double)capacity > end ? x_last + ((double)capacity - end) / slope : x_last;
	f->severity = exhaust >= 0 && exhaust - x_last <= th[AN_T_MG_HORIZON] ? 2 : 1;
	an_evidence_num(f, "slope_bytes_per_iteration", slope);
	an_evidence_num(f, "r2", r2);
	an_evidence_num(f, "growth_bytes", growth);
	an_evidence_num(f, "start_bytes", start);
	an_evidence_num(f, "end_bytes", end);
	an_evidence_num(f, "device_capacity_bytes", (double)capacity);
	an_evidence_num(f, "projected_exhaustion_iteration", exhaust >= 0 ? floor(exhaust) : -1);
}

/* A per-iteration peak: the trainer's total (dev < 0) or one device's. */
static double iter_peak(const struct an_iter *it, int dev)
{
	return (double)(dev < 0 ? it->device_bytes_peak : it->dev_peak[dev]);
}

/* Least squares of the peaks over the iteration index: 0, or -1 when x or y does not vary. */
static int fit_peaks(const struct an_analysis *a, int dev, double *slope, double *icpt, double *r2)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, dn = (double)a->nit;
	for (size_t i = 0; i < a->nit; i++) {
		double x = (double)i, y = iter_peak(&a->it[i], dev);
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
	}
	double mx = sx / dn, my = sy / dn;
	double vxx = sxx - dn * mx * mx, vxy = sxy - dn * mx * my;
	if (vxx <= 0)
		return -1;
	*slope = vxy / vxx;
	*icpt = my - *slope * mx;
	double ss_tot = 0, ss_res = 0;
	for (size_t i = 0; i < a->nit; i++) {
		double y = iter_peak(&a->it[i], dev), fit = *icpt + *slope * (double)i;
		ss_tot += (y - my) * (y - my);
		ss_res += (y - fit) * (y - fit);
	}
	if (ss_tot <= 0)
		return -1;
	*r2 = 1.0 - ss_res / ss_tot;
	return 0;
}

/*
 * A trainer on several devices: the fit is of their summed peaks, but memory
 * runs out on one device. The projected exhaustion is the earliest of the
 * growing devices' own (each device's peaks fitted alike against its own
 * capacity), -1 when none of them has a known capacity; the severity follows.
 */
static void growth_per_device(const struct an_analysis *a, struct an_result_finding *f, double x_last)
{
	if (__builtin_popcount(a->dev_used) < 2)
		return;
	double first = -1;
	for (int d = 0; d < SP_MAX_DEVICES; d++) {
		double slope, icpt, r2, cap = (double)a->dev_capacity[d];
		if (!(a->dev_used >> d & 1) || !cap || fit_peaks(a, d, &slope, &icpt, &r2) || slope <= 0)
			continue;
		double end = icpt + slope * x_last, x = cap > end ? x_last + (cap - end) / slope : x_last;
		if (first < 0 || x < first)
			first = x;
	}
	f->severity = first >= 0 && first - x_last <= a->opt.threshold[AN_T_MG_HORIZON] ? 2 : 1;
	for (int k = 0; k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "projected_exhaustion_iteration"))
			f->ev[k].num = first >= 0 ? floor(first) : -1;
}

static int memory_growth(struct an_analysis *a, const struct an_collect *c)
{
	const double *th = a->opt.threshold;
	size_t n = a->nit;
	double slope, icpt, r2;
	if (n < 2 || (double)n < th[AN_T_MG_MIN_ITERS] || fit_peaks(a, -1, &slope, &icpt, &r2) || slope <= 0)
		return 0;
	double dn = (double)n;
	double growth = slope * (dn - 1), start = icpt > 0 ? icpt : (double)a->it[0].device_bytes_peak;
	if (r2 < th[AN_T_MG_MIN_R2] || growth < th[AN_T_MG_MIN_BYTES] || growth < th[AN_T_MG_MIN_FRACTION] * start)
		return 0;
	struct an_result_finding *f = new_finding(a, AN_F_MEMORY_GROWTH);
	if (!f)
		return -1;
	f->first_iteration = 0;
	f->last_iteration = (long)n - 1;
	f->iterations = (long)n;
	an_growth_evidence(f, th, slope, r2, growth, start, icpt + slope * (dn - 1), dn - 1, a->device_capacity);
	growth_per_device(a, f, dn - 1);
	add_top_sites(f, &c->live_sites);
	snprintf(f->advice, sizeof(f->advice),
		 "Peak device memory rises with every iteration: something keeps tensors alive, such as a Python list "
		 "of losses that holds their graphs (append loss.item(), not loss), gradients accumulated without "
		 "zero_grad(), or a cache that only grows. Log torch.cuda.memory_allocated() and "
		 "max_memory_allocated() per step and find what the sites above still hold; left alone this ends in "
		 "an out-of-memory error hours into the run.");
	return 0;
}

/* -------------------------------------------------------- worker_restart */

static const char wr_advice[] =
    "The data loader's worker processes are created anew at every epoch (a PyTorch DataLoader without "
    "persistent_workers=True starts and joins its workers with each iterator): every epoch begins with "
    "workers that are forked, import and build their dataset again, and have no batch ready, so the first "
    "iterations of each epoch wait for input. Keep the workers alive across epochs "
    "(DataLoader(..., persistent_workers=True), which keeps their memory too), or make epochs larger so "
    "that they restart less often, and keep what a worker does at start-up (worker_init_fn, the "
    "Dataset's constructor) cheap.";

struct wproc {
	uint64_t b, e;
};

static int cmp_wproc(const void *x, const void *y)
{
	const struct wproc *p = x, *q = y;
	return p->b < q->b ? -1 : p->b > q->b;
}

/* The iteration that holds t, else the first that begins after it; -1 when none. */
static long iter_of(const struct an_analysis *a, uint64_t t)
{
	for (size_t i = 0; i < a->nit; i++) /* iterations are sorted; a run has few restarts */
		if (a->it[i].end_ns > t)
			return (long)i;
	return -1;
}

/*
 * Generations of the trainer's loader workers: a worker that starts when no
 * worker of the trainer is alive any more (every earlier one has written its
 * last record), or more than one iteration after the worker started before it
 * (a new iterator's workers forked before the old one's are shut down: an
 * iterator not run to its end), begins a new generation, the next epoch's. A
 * generation's workers are forked together, when its iterator is created.
 * A restart's cost is
 * the wall time the iteration where it happens takes beyond the median
 * iteration (the new workers' start-up and their first batches).
 */
static int worker_restart(struct an_analysis *a, const struct an_collect *c)
{
	(void)c;
	const double *th = a->opt.threshold;
	if (a->nit < 3 || !a->trainer_pid)
		return 0;
	size_t nw = 0;
	for (size_t k = 0; k < a->nprocs; k++)
		nw += a->procs[k].role == AN_ROLE_WORKER && a->procs[k].trainer == a->trainer_pid;
	if (nw < 2)
		return 0;
	struct wproc *w = malloc(nw * sizeof(*w));
	long *rit = malloc(nw * sizeof(*rit));
	uint64_t *walls = malloc(a->nit * sizeof(*walls)), *extra = malloc(nw * sizeof(*extra));
	if (!w || !rit || !walls || !extra) {
		free(w);
		free(rit);
		free(walls);
		free(extra);
		return -1;
	}
	nw = 0;
	for (size_t k = 0; k < a->nprocs; k++)
		if (a->procs[k].role == AN_ROLE_WORKER && a->procs[k].trainer == a->trainer_pid)
			w[nw++] = (struct wproc){a->procs[k].begin_ns, a->procs[k].end_ns};
	qsort(w, nw, sizeof(*w), cmp_wproc);
	size_t gens = 1, nr = 0;
	uint64_t alive_until = w[0].e;
	long prev = iter_of(a, w[0].b);
	for (size_t k = 1; k < nw; k++) {
		long i = iter_of(a, w[k].b);
		/* none alive, or born more than an iteration after the worker before it: a new generation */
		if (w[k].b > alive_until || (i >= 0 && prev >= 0 && i > prev + 1)) {
			gens++;
			if (i >= 0 && (!nr || rit[nr - 1] != i))
				rit[nr++] = i;
		}
		prev = i;
		if (w[k].e > alive_until)
			alive_until = w[k].e;
	}
	int rc = 0;
	if (gens < 2 || !nr)
		goto out;
	uint64_t wall = 0;
	for (size_t i = 0; i < a->nit; i++) {
		walls[i] = iter_wall(&a->it[i]);
		wall += walls[i];
	}
	uint64_t med = an_quantile_u64(walls, a->nit, 0.5), cost = 0;
	for (size_t r = 0; r < nr; r++) {
		uint64_t x = walls[rit[r]];
		extra[r] = x > med ? x - med : 0;
		cost += extra[r];
	}
	struct an_result_finding *f = new_finding(a, AN_F_WORKER_RESTART);
	if (!f) {
		rc = -1;
		goto out;
	}
	double share = wall ? (double)cost / (double)wall : 0;
	f->severity = share >= th[AN_T_WR_CRIT] ? 2 : share >= th[AN_T_WR_WARN] ? 1 : 0;
	f->cost_ns = cost;
	char list[256] = "";
	size_t len = 0;
	for (size_t r = 0; r < nr; r++) {
		flag_iteration(f, rit[r]);
		int n = snprintf(list + len, sizeof(list) - len, "%s%ld", r ? "," : "", rit[r]);
		if (n < 0 || (size_t)n >= sizeof(list) - len) { /* the list is long: the first ones, then ... */
			snprintf(list + (len < sizeof(list) - 4 ? len : sizeof(list) - 4), 4, "...");
			break;
		}
		len += (size_t)n;
	}
	an_evidence_num(f, "epochs", (double)gens);
	an_evidence_num(f, "restarts", (double)(gens - 1));
	an_evidence_num(f, "workers_per_epoch", (double)nw / (double)gens);
	an_evidence_num(f, "startup_ms", (double)an_quantile_u64(extra, nr, 0.5) / 1e6);
	an_evidence_num(f, "median_iteration_ms", (double)med / 1e6);
	an_evidence_num(f, "time_share", share);
	an_evidence_str(f, "restart_iterations", list);
	snprintf(f->advice, sizeof(f->advice), "%s", wr_advice);
out:
	free(w);
	free(rit);
	free(walls);
	free(extra);
	return rc;
}

/* ------------------------------------------ loader_cpu_bound, loader_starved */

static const char lcb_more_workers[] =
    "The training step waits for batches while the loader workers spend their time on the CPU, outside "
    "file I/O: decoding and augmenting samples, not reading them. Cores are left idle: raise the number "
    "of workers (DataLoader num_workers) towards the cores the job may use, keeping one or two for the "
    "training process, and check that each worker runs one thread (torch.set_num_threads(1) in a "
    "worker_init_fn) so that workers do not fight over the cores.";
static const char lcb_cheaper[] =
    "The training step waits for batches while the loader workers spend their time on the CPU, outside "
    "file I/O: decoding and augmenting samples, not reading them, and the job's cores are already busy, "
    "so more workers would not help. Make each sample cheaper: lighter or fewer CPU augmentations, "
    "decode and augment on the GPU (NVIDIA DALI, torchvision.io.decode_jpeg on the device), cache decoded "
    "or pre-resized samples instead of decoding full-size images every epoch, and run one thread per "
    "worker (torch.set_num_threads(1)) rather than oversubscribing the cores.";
static const char ls_advice[] =
    "The training step waits for batches while the loader workers are mostly neither reading files nor "
    "computing: idle, or blocked on something else. Too few batches are in flight, or the bottleneck is "
    "outside the workers. Keep more batches queued (DataLoader prefetch_factor, more workers when they "
    "block on remote storage, a network or a lock rather than the CPU), make sure every worker gets "
    "work (a batch sampler that leaves workers idle, an IterableDataset not sharded across workers), "
    "and look at the main process: collation, a pin_memory thread or large batches sent through pipes "
    "can starve the step while the workers wait.";

/*
 * The exposed input of the iterations outside the worker restarts'
 * (worker_restart explains those): its total, its split, the wall time.
 */
static void loader_input(const struct an_analysis *a, uint64_t *input, uint64_t split[AN_SPLIT__COUNT],
			 uint64_t *unsampled, uint64_t *waited, uint64_t *wall, const struct an_result_finding **fi)
{
	*unsampled = *waited = 0;
	const struct an_result_finding *wr = NULL;
	for (size_t k = 0; k < a->nfnd; k++)
		if (a->fnd[k].kind == AN_F_WORKER_RESTART)
			wr = &a->fnd[k];
	*input = *wall = 0;
	memset(split, 0, AN_SPLIT__COUNT * sizeof(split[0]));
	size_t r = 0;
	for (size_t i = 0; i < a->nit; i++) {
		const struct an_iter *it = &a->it[i];
		*wall += iter_wall(it);
		while (wr && wr->iter && r < wr->niter && wr->iter[r] < (long)i)
			r++;
		if (wr && wr->iter && r < wr->niter && wr->iter[r] == (long)i)
			continue;
		*input += it->bd[AN_INPUT];
		*unsampled += it->split_unsampled;
		*waited += it->split_waited;
		for (int k = 0; k < AN_SPLIT__COUNT; k++)
			split[k] += it->split[k];
	}
	*fi = wr;
}

static int loader_findings(struct an_analysis *a)
{
	const double *th = a->opt.threshold;
	const struct an_loaders *l = &a->loaders;
	if (!a->nit || !l->workers)
		return 0;
	uint64_t input, wall, split[AN_SPLIT__COUNT], unsampled, waited;
	const struct an_result_finding *wr;
	loader_input(a, &input, split, &unsampled, &waited, &wall, &wr);
	/* the shares of what the sampled workers and the thread's own file calls explain, half the input at least */
	if (!input || !wall || 2 * unsampled >= input)
		return 0;
	uint64_t known = input - unsampled;
	double share = (double)input / (double)wall;
	double cpu = (double)split[AN_SPLIT_CPU] / (double)known;
	double wait = (double)(split[AN_SPLIT_WAIT] - unsampled) / (double)known;
	double busy = an_cores_busy(a);
	/*
	 * Workers on shared cores: outside their file calls and their own waits they
	 * compute when they run, and are runnable but not running (neither) the rest of
	 * the time. A worker blocked on something unrecorded (a sleep, a lock, page
	 * faults of a mapped file) gets no CPU there: a third of that time on the CPU,
	 * with CPU work ahead of file I/O, is CPU-bound on cores shared three ways.
	 */
	uint64_t wbusy = known - (waited < known ? waited : known);
	double running =
	    wbusy > split[AN_SPLIT_IO] ? (double)split[AN_SPLIT_CPU] / (double)(wbusy - split[AN_SPLIT_IO]) : 0;
	int kind = -1;
	if ((cpu >= th[AN_T_LCB_MIN_SPLIT] ||
	     (split[AN_SPLIT_CPU] >= split[AN_SPLIT_IO] && running >= th[AN_T_LCB_RUNNING])) &&
	    share >= th[AN_T_LCB_WARN])
		kind = AN_F_LOADER_CPU_BOUND;
	else if (wait >= th[AN_T_LS_MIN_SPLIT] && share >= th[AN_T_LS_WARN])
		kind = AN_F_LOADER_STARVED;
	if (kind < 0)
		return 0;
	struct an_result_finding *f = new_finding(a, kind);
	if (!f)
		return -1;
	if (kind == AN_F_LOADER_CPU_BOUND)
		f->severity = share >= th[AN_T_LCB_CRIT] ? 2 : 1;
	else
		f->severity = share >= th[AN_T_LS_CRIT] ? 2 : 1;
	f->cost_ns = split[kind == AN_F_LOADER_CPU_BOUND ? AN_SPLIT_CPU : AN_SPLIT_WAIT];
	for (size_t i = 0; i < a->nit; i++) {
		const struct an_iter *it = &a->it[i];
		uint64_t part = it->split[kind == AN_F_LOADER_CPU_BOUND ? AN_SPLIT_CPU : AN_SPLIT_WAIT];
		if (part && 3 * (double)part >= (double)it->bd[AN_INPUT] &&
		    (double)it->bd[AN_INPUT] >= th[kind == AN_F_LOADER_CPU_BOUND ? AN_T_LCB_WARN : AN_T_LS_WARN] *
						   (double)iter_wall(it))
			flag_iteration(f, (long)i);
	}
	an_evidence_num(f, "workers", (double)l->workers);
	an_evidence_num(f, "input_share", share);
	an_evidence_num(f, "input_io_fraction", (double)split[AN_SPLIT_IO] / (double)known);
	an_evidence_num(f, "input_cpu_fraction", cpu);
	an_evidence_num(f, "input_wait_fraction", wait);
	an_evidence_num(f, "input_waited_fraction", (double)waited / (double)known);
	an_evidence_num(f, "worker_running_fraction", running);
	an_evidence_num(f, "worker_cpu_utilisation", l->seg_ns ? (double)l->cpu_time_ns / (double)l->seg_ns : 0);
	an_evidence_num(f, "worker_busy_fraction",
			l->seg_ns ? (double)(l->io_ns + l->cpu_ns) / (double)l->seg_ns : 0);
	an_evidence_num(f, "online_cpus", (double)l->online_cpus);
	an_evidence_num(f, "affinity_cpus", (double)l->affinity_cpus);
	an_evidence_num(f, "cores_busy", busy);
	an_evidence_num(f, "cpu_ms_per_batch", (double)l->cpu_time_ns / 1e6 / (double)a->nit);
	if (wr)
		an_evidence_str(f, "excluded", "worker_restart iterations");
	if (kind == AN_F_LOADER_CPU_BOUND)
		snprintf(f->advice, sizeof(f->advice), "%s",
			 busy >= th[AN_T_LCB_BUSY] || running < th[AN_T_LCB_BUSY] || !(l->affinity_cpus || l->online_cpus)
			     ? lcb_cheaper
			     : lcb_more_workers);
	else
		snprintf(f->advice, sizeof(f->advice), "%s", ls_advice);
	return 0;
}

int an_findings_eval(struct an_analysis *a, const struct an_collect *c)
{
	/* worker_restart before the loader findings: the iterations it explains are not theirs */
	if (small_file_storm(a, c) || unpinned_copy(a, c) || alloc_fragmentation(a, c) || memory_growth(a, c) ||
	    worker_restart(a, c) || loader_findings(a))
		return -1;
	return 0;
}

/* ------------------------------------------------------------ stragglers */

static const char sr_advice[] =
    "The other ranks wait for this one at the collectives: a data-parallel step is as slow as its slowest "
    "rank. Its own breakdown (stepprof analyze --rank N) says why it is late: input (its loader workers, "
    "its share of the data on slower storage), compute (uneven work: unbalanced batches or sequence "
    "lengths, a slower or throttled GPU, another job on its GPU or node) or host overhead. Fix that rank "
    "first; speeding up the others only makes them wait longer.";

int an_findings_straggler(struct an_analysis *a)
{
	const double *th = a->opt.threshold;
	const struct cm_result *m = &a->comm;
	if (m->collectives < th[AN_T_SR_MIN_COLL] || m->nranks < 2)
		return 0;
	/* the others' wall: the median of the ranks' total walls */
	uint64_t *w = malloc((a->nranks ? a->nranks : 1) * sizeof(*w));
	if (!w)
		return -1;
	for (size_t i = 0; i < a->nranks; i++)
		w[i] = a->ranks[i].wall_total;
	uint64_t wall = a->nranks ? an_quantile_u64(w, a->nranks, 0.5) : 0;
	free(w);
	for (size_t k = 0; k < m->nranks; k++) {
		const struct cm_rank *r = &m->ranks[k];
		if (!r->matched || !r->last)
			continue;
		double last = (double)r->last / (double)r->matched;
		uint64_t wait = r->caused_ns / (m->nranks - 1); /* each other rank's wait for it */
		double share = wall ? (double)wait / (double)wall : 0;
		if (last < th[AN_T_SR_MIN_LAST] || share < th[AN_T_SR_WARN])
			continue;
		struct an_result_finding *f = new_finding(a, AN_F_STRAGGLER_RANK);
		if (!f)
			return -1;
		f->severity = share >= th[AN_T_SR_CRIT] ? 2 : 1;
		f->cost_ns = wait;
		an_evidence_num(f, "rank", (double)r->rank);
		an_evidence_num(f, "collectives", (double)r->matched);
		an_evidence_num(f, "last_share", last);
		an_evidence_num(f, "lateness_ms_mean", (double)r->late_mean_ns / 1e6);
		an_evidence_num(f, "lateness_ms_p95", (double)r->late_p95_ns / 1e6);
		an_evidence_num(f, "others_wait_share", share);
		for (size_t i = 0; i < a->nranks; i++) {
			const struct an_rank *x = &a->ranks[i];
			if (x->rank != r->rank)
				continue;
			int top = AN_OTHER;
			for (int c = 0; c < AN_CAT__COUNT; c++)
				if (x->bd_total[c] > x->bd_total[top])
					top = c;
			an_evidence_str(f, "its_largest_category", an_cat_name[top]);
			if (x->top_finding >= 0)
				an_evidence_str(f, "its_top_finding", an_finding_name[x->top_finding]);
			break;
		}
		snprintf(f->advice, sizeof(f->advice), "%s", sr_advice);
	}
	return 0;
}

/* -------------------------------------------------------------- ordering */

static int fix_first(const struct an_result_finding *x, const struct an_result_finding *y)
{
	if (x->severity != y->severity)
		return x->severity > y->severity;
	return x->cost_ns > y->cost_ns;
}

void an_findings_order(struct an_analysis *a)
{
	/* an insertion sort: stable (equal findings keep findings.def's order), and they are few */
	for (size_t i = 1; i < a->nfnd; i++) {
		struct an_result_finding x = a->fnd[i];
		size_t k = i;
		for (; k > 0 && fix_first(&x, &a->fnd[k - 1]); k--)
			a->fnd[k] = a->fnd[k - 1];
		a->fnd[k] = x;
	}
}
