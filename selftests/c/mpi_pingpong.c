// SPDX-License-Identifier: GPL-2.0
/*
 * MPI over rroce (selftests/rdma/mpi.sh): a data-checked ping-pong between
 * two ranks for sizes 1 B .. 4 MiB, then an MPI_Allreduce (sum) checked
 * element by element.  Prints "ok"/"not ok" lines; exits 1 on a mismatch.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pat(size_t i, int round, int who)
{
	return (unsigned char)(i * 31 + round * 7 + who * 101);
}

int main(int argc, char **argv)
{
	int rank, n, bad = 0;
	size_t max = 4u << 20;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	unsigned char *buf = malloc(max);

	if (!buf || n != 2)
		MPI_Abort(MPI_COMM_WORLD, 2);
	int round = 0;
	for (size_t len = 1; len <= max; len *= 4, round++) {
		for (int it = 0; it < 10; it++) {
			if (rank == 0) {
				for (size_t i = 0; i < len; i++)
					buf[i] = pat(i, round + it, 0);
				MPI_Send(buf, (int)len, MPI_BYTE, 1, it, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (size_t i = 0; i < len; i++)
					bad += buf[i] != pat(i, round + it, 1);
			} else {
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (size_t i = 0; i < len; i++)
					bad += buf[i] != pat(i, round + it, 0);
				for (size_t i = 0; i < len; i++)
					buf[i] = pat(i, round + it, 1);
				MPI_Send(buf, (int)len, MPI_BYTE, 0, it, MPI_COMM_WORLD);
			}
		}
	}
	int total;
	MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s - ping-pong 1 B .. 4 MiB x 10 per size, every byte checked (%d bad)\n",
		       total ? "not ok" : "ok", total);
	/* the figures: 20 round trips of 4 MiB and of 8 B, unchecked, timed */
	for (size_t len = max; len >= 8; len = len == max ? 8 : 0) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int it = 0; it < 20; it++) {
			if (rank == 0) {
				MPI_Send(buf, (int)len, MPI_BYTE, 1, 99, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(buf, (int)len, MPI_BYTE, 0, 99, MPI_COMM_WORLD);
			}
		}
		double t = MPI_Wtime() - t0;
		if (rank == 0 && len == max)
			printf("# ping-pong 4 MiB x 20: %.1f MB/s (2 x 80 MiB in %.2f s)\n",
			       2.0 * 20 * len / t / 1e6, t);
		else if (rank == 0)
			printf("# ping-pong 8 B x 20: %.1f us half round trip\n", t / 40 * 1e6);
	}
	/* allreduce of 1 Mi doubles: element i of rank r is r * 1e6 + i */
	int cnt = 1 << 20, abad = 0;
	double *in = malloc(cnt * sizeof(double)), *out = malloc(cnt * sizeof(double));

	for (int i = 0; i < cnt; i++)
		in[i] = rank * 1e6 + i;
	MPI_Allreduce(in, out, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < cnt; i++)
		abad += out[i] != 1e6 + 2.0 * i;
	MPI_Allreduce(MPI_IN_PLACE, &abad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s - allreduce (sum) of 1 Mi doubles, every element checked (%d bad)\n",
		       abad ? "not ok" : "ok", abad);
	free(in);
	free(out);
	free(buf);
	MPI_Finalize();
	return total || abad;
}
