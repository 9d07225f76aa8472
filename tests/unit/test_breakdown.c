/*
 * test_breakdown.c - the partition of an iteration's wall time (analyzer/breakdown.c):
 * hand-computed cases for each priority rule, and randomised span sets where the
 * expected shares come from a brute-force per-nanosecond walk written here.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "breakdown.h"

static void reset(struct bd_list l[BD__COUNT])
{
	for (int c = 0; c < BD__COUNT; c++)
		bd_list_free(&l[c]);
}

static uint64_t sum7(const uint64_t *o)
{
	uint64_t s = 0;
	for (int c = 0; c < AN_CAT__COUNT; c++)
		s += o[c];
	return s;
}

Test(breakdown, priority_compute_over_h2d_over_input_over_sync)
{
	struct bd_list l[BD__COUNT] = {0};
	uint64_t o[AN_CAT__COUNT], busy;
	/* [0,100): input 0-40, h2d 30-50, compute 45-80, sync 60-95, gpu busy = h2d+compute */
	bd_push(&l[BD_INPUT], 0, 40);
	bd_push(&l[BD_H2D], 30, 50);
	bd_push(&l[BD_COMPUTE], 45, 80);
	bd_push(&l[BD_SYNC], 60, 95);
	bd_push(&l[BD_GPU], 30, 50);
	bd_push(&l[BD_GPU], 45, 80);
	cr_assert_eq(bd_partition(l, 0, 100, o, &busy), 0);
	cr_expect_eq(o[AN_COMPUTE], 35);
	cr_expect_eq(o[AN_H2D], 15);   /* 30-45 */
	cr_expect_eq(o[AN_INPUT], 30); /* 0-30 */
	cr_expect_eq(o[AN_SYNC], 15);  /* 80-95 */
	cr_expect_eq(o[AN_D2H], 0);
	cr_expect_eq(o[AN_OTHER], 5); /* 95-100 */
	cr_expect_eq(busy, 50);
	cr_expect_eq(sum7(o), 100);
	reset(l);
}

Test(breakdown, clips_to_the_iteration_and_merges_unsorted_overlaps)
{
	struct bd_list l[BD__COUNT] = {0};
	uint64_t o[AN_CAT__COUNT];
	bd_push(&l[BD_D2H], 900, 1200); /* beyond the end */
	bd_push(&l[BD_D2H], 50, 150);	/* before the start */
	bd_push(&l[BD_D2H], 120, 130);	/* inside the previous, out of order */
	bd_push(&l[BD_SYNC], 140, 160);
	cr_assert_eq(bd_partition(l, 100, 1000, o, NULL), 0);
	cr_expect_eq(o[AN_D2H], 50 + 100);
	cr_expect_eq(o[AN_SYNC], 10); /* 150-160 */
	cr_expect_eq(o[AN_OTHER], 900 - 160);
	cr_expect_eq(sum7(o), 900);
	reset(l);
}

Test(breakdown, empty_iteration_is_all_other)
{
	struct bd_list l[BD__COUNT] = {0};
	uint64_t o[AN_CAT__COUNT], busy = 7;
	cr_assert_eq(bd_partition(l, 5, 5 + 1234567, o, &busy), 0);
	cr_expect_eq(o[AN_OTHER], 1234567);
	cr_expect_eq(busy, 0);
}

/* Random spans: the partition must equal a per-instant walk and sum to the wall exactly. */
Test(breakdown, random_spans_match_brute_force_and_sum_to_wall)
{
	static const int prio[BD_GPU] = {AN_COMPUTE, AN_COMM, AN_H2D, AN_D2H, AN_INPUT, AN_COMM, AN_SYNC};
	/* schema 1: communication is compute, a sync waiting for it is left to the sync list */
	static const int prio1[BD_GPU] = {AN_COMPUTE, AN_COMPUTE, AN_H2D, AN_D2H, AN_INPUT, -1, AN_SYNC};
	srand(12345);
	for (int round = 0; round < 200; round++) {
		struct bd_list l[BD__COUNT] = {0};
		uint64_t start = 1000 + (uint64_t)(rand() % 50), end = start + 1 + (uint64_t)(rand() % 3000);
		static uint8_t cover[BD__COUNT][5000];
		memset(cover, 0, sizeof(cover));
		for (int c = 0; c < BD__COUNT; c++) {
			int n = rand() % 12;
			for (int k = 0; k < n; k++) {
				uint64_t b = 900 + (uint64_t)(rand() % 3300), e = b + (uint64_t)(rand() % 400);
				bd_push(&l[c], b, e);
				for (uint64_t t = b; t < e; t++)
					if (t >= start && t < end)
						cover[c][t - 900] = 1;
			}
		}
		uint64_t want[AN_CAT__COUNT] = {0}, want1[AN_CAT__COUNT] = {0}, want_busy = 0, want_ov = 0;
		for (uint64_t t = start; t < end; t++) {
			int cat = AN_OTHER, cat1 = AN_OTHER;
			for (int c = 0; c < BD_GPU; c++)
				if (cover[c][t - 900]) {
					cat = prio[c];
					break;
				}
			for (int c = 0; c < BD_GPU; c++)
				if (prio1[c] >= 0 && cover[c][t - 900]) {
					cat1 = prio1[c];
					break;
				}
			want[cat]++;
			want1[cat1]++;
			want_busy += cover[BD_GPU][t - 900];
			want_ov += cover[BD_COMM][t - 900] && cover[BD_COMPUTE][t - 900];
		}
		uint64_t o[AN_CAT__COUNT], busy;
		cr_assert_eq(bd_partition(l, start, end, o, &busy), 0);
		for (int c = 0; c < AN_CAT__COUNT; c++)
			cr_assert_eq(o[c], want[c], "round %d cat %d: %lu != %lu", round, c, (unsigned long)o[c],
				     (unsigned long)want[c]);
		cr_assert_eq(busy, want_busy);
		cr_assert_eq(sum7(o), end - start);
		uint64_t o1[AN_CAT__COUNT];
		cr_assert_eq(bd_partition_v1(l, start, end, o1), 0);
		for (int c = 0; c < AN_CAT__COUNT; c++)
			cr_assert_eq(o1[c], want1[c], "schema 1, round %d cat %d: %lu != %lu", round, c,
				     (unsigned long)o1[c], (unsigned long)want1[c]);
		cr_assert_eq(bd_overlap(&l[BD_COMM], &l[BD_COMPUTE]), want_ov, "round %d overlap", round);
		reset(l);
	}
}

/* A communication kernel alone on the GPU: comm; schema 1 gives it to compute. */
Test(breakdown, comm_alone_is_comm)
{
	struct bd_list l[BD__COUNT] = {0};
	uint64_t o[AN_CAT__COUNT], o1[AN_CAT__COUNT], busy;
	/* [0,100): compute 0-20, comm 30-70 with the training thread synchronising 40-75 */
	bd_push(&l[BD_COMPUTE], 0, 20);
	bd_push(&l[BD_COMM], 30, 70);
	bd_push(&l[BD_GPU], 0, 20);
	bd_push(&l[BD_GPU], 30, 70);
	bd_push(&l[BD_SYNC], 40, 75);
	cr_assert_eq(bd_partition(l, 0, 100, o, &busy), 0);
	cr_expect_eq(o[AN_COMPUTE], 20);
	cr_expect_eq(o[AN_COMM], 40);
	cr_expect_eq(o[AN_SYNC], 5); /* 70-75: the sync awaited no communication */
	cr_expect_eq(o[AN_OTHER], 35);
	cr_expect_eq(busy, 60);
	cr_expect_eq(sum7(o), 100);
	cr_expect_eq(bd_overlap(&l[BD_COMM], &l[BD_COMPUTE]), 0);
	cr_assert_eq(bd_partition_v1(l, 0, 100, o1), 0);
	cr_expect_eq(o1[AN_COMPUTE], 60);
	cr_expect_eq(o1[AN_COMM], 0);
	cr_expect_eq(o1[AN_SYNC], 5);
	cr_expect_eq(sum7(o1), 100);
	reset(l);
}

/* Communication under compute stays compute, and is the overlapped time. */
Test(breakdown, comm_under_compute_is_compute_and_overlapped)
{
	struct bd_list l[BD__COUNT] = {0};
	uint64_t o[AN_CAT__COUNT], o1[AN_CAT__COUNT];
	/* [0,200): compute 0-100 and 150-160, comm 50-130 and 140-170 */
	bd_push(&l[BD_COMPUTE], 0, 100);
	bd_push(&l[BD_COMPUTE], 150, 160);
	bd_push(&l[BD_COMM], 50, 130);
	bd_push(&l[BD_COMM], 140, 170);
	cr_assert_eq(bd_partition(l, 0, 200, o, NULL), 0);
	cr_expect_eq(o[AN_COMPUTE], 110);
	cr_expect_eq(o[AN_COMM], 30 + 20); /* 100-130, 140-150 and 160-170 */
	cr_expect_eq(o[AN_OTHER], 40);
	cr_expect_eq(bd_overlap(&l[BD_COMM], &l[BD_COMPUTE]), 50 + 10);
	cr_assert_eq(bd_partition_v1(l, 0, 200, o1), 0);
	cr_expect_eq(o1[AN_COMPUTE], o[AN_COMPUTE] + o[AN_COMM]);
	cr_expect_eq(o1[AN_OTHER], 40);
	reset(l);
}

/*
 * Communication beside copies: comm comes before h2d and d2h; a sync awaiting it
 * is comm only where it would be sync (the copies it also waits for stay theirs).
 */
Test(breakdown, comm_beside_a_copy_and_a_sync_on_comm)
{
	struct bd_list l[BD__COUNT] = {0};
	uint64_t o[AN_CAT__COUNT], o1[AN_CAT__COUNT];
	/* [0,100): h2d 0-40, comm 20-60, d2h 50-70, a sync on the communication 55-90 (its tail untimed) */
	bd_push(&l[BD_H2D], 0, 40);
	bd_push(&l[BD_COMM], 20, 60);
	bd_push(&l[BD_D2H], 50, 70);
	bd_push(&l[BD_SYNC], 55, 90);
	bd_push(&l[BD_COMM_SYNC], 55, 90);
	cr_assert_eq(bd_partition(l, 0, 100, o, NULL), 0);
	cr_expect_eq(o[AN_H2D], 20);	   /* 0-20 */
	cr_expect_eq(o[AN_COMM], 40 + 20); /* 20-60 on the GPU, 70-90 in the sync */
	cr_expect_eq(o[AN_D2H], 10);	   /* 60-70 */
	cr_expect_eq(o[AN_SYNC], 0);
	cr_expect_eq(o[AN_OTHER], 10);
	cr_expect_eq(sum7(o), 100);
	/* schema 1: as before the category, the kernel in compute, the sync's wait in sync */
	cr_assert_eq(bd_partition_v1(l, 0, 100, o1), 0);
	cr_expect_eq(o1[AN_H2D], 20);
	cr_expect_eq(o1[AN_COMPUTE], 40);
	cr_expect_eq(o1[AN_D2H], 10);
	cr_expect_eq(o1[AN_SYNC], 20);
	cr_expect_eq(o1[AN_COMM], 0);
	cr_expect_eq(sum7(o1), 100);
	reset(l);
}
