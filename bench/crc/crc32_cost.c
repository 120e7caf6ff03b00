// SPDX-License-Identifier: GPL-2.0
/*
 * What a CRC-32 (the ICRC's) costs per KiB on the CPU this runs on -- under
 * TCG, on the emulated one: the two ways the 6.12 kernel can compute it.
 *
 *  - table: slice-by-8, the algorithm of lib/crc32.c's crc32_le with
 *    CONFIG_CRC32_SLICEBY8 (the kernel's crc32_le, which rroce calls, and
 *    crypto "crc32-generic", which rdma_rxe's "crc32" shash resolves to
 *    without an accelerated driver);
 *  - pclmul: the 64-byte folding loop of arch/x86/crypto/crc32-pclmul_asm.S
 *    (8 PCLMULQDQ and 8 PXOR per 64 bytes), the body of "crc32-pclmul".
 *    Its cost only: no final reduction and no kernel_fpu_begin/end, which
 *    the kernel adds per call, so this is a lower bound for that driver.
 *
 * bench/crc/run.sh runs it on the host and in a plain-kernel VM.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static uint32_t tab[8][256];

static void tab_init(void)
{
	for (int i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xEDB88320 : c >> 1;
		tab[0][i] = c;
	}
	for (int i = 0; i < 256; i++)
		for (int s = 1; s < 8; s++)
			tab[s][i] = (tab[s - 1][i] >> 8) ^ tab[0][tab[s - 1][i] & 0xff];
}

static uint32_t crc_table(uint32_t c, const uint8_t *p, size_t n)
{
	for (; n >= 8; p += 8, n -= 8) {
		uint32_t a, b;

		memcpy(&a, p, 4);
		memcpy(&b, p + 4, 4);
		a ^= c;
		c = tab[7][a & 0xff] ^ tab[6][(a >> 8) & 0xff] ^ tab[5][(a >> 16) & 0xff] ^ tab[4][a >> 24] ^
		    tab[3][b & 0xff] ^ tab[2][(b >> 8) & 0xff] ^ tab[1][(b >> 16) & 0xff] ^ tab[0][b >> 24];
	}
	while (n--)
		c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
	return c;
}

__attribute__((target("pclmul,sse4.1"))) static uint32_t fold_pclmul(const uint8_t *p, size_t n)
{
	const __m128i k = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	__m128i x[4];

	for (int j = 0; j < 4; j++)
		x[j] = _mm_loadu_si128((const void *)(p + 16 * j));
	for (size_t i = 64; i + 64 <= n; i += 64)
		for (int j = 0; j < 4; j++)
			x[j] = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x[j], k, 0x00),
							   _mm_clmulepi64_si128(x[j], k, 0x11)),
					     _mm_loadu_si128((const void *)(p + i + 16 * j)));
	return _mm_extract_epi32(_mm_xor_si128(_mm_xor_si128(x[0], x[1]), _mm_xor_si128(x[2], x[3])), 0);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void)
{
	static uint8_t buf[1024];
	const int n = 20000;
	uint32_t sink = 0;
	double t, table, pclmul;

	for (int i = 0; i < 1024; i++)
		buf[i] = i * 7;
	tab_init();
	/* the check value of CRC-32: the table is the kernel's */
	if (~crc_table(~0u, (const uint8_t *)"123456789", 9) != 0xCBF43926) {
		fprintf(stderr, "crc_table: wrong check value\n");
		return 1;
	}
	t = now();
	for (int i = 0; i < n; i++) {
		buf[0] = i;
		sink += crc_table(~0u, buf, sizeof(buf));
	}
	table = (now() - t) / n * 1e6;
	t = now();
	for (int i = 0; i < n; i++) {
		buf[0] = i;
		sink += fold_pclmul(buf, sizeof(buf));
	}
	pclmul = (now() - t) / n * 1e6;
	printf("per KiB: table (slice-by-8) %.2f us, pclmul folding loop %.2f us: pclmul/table %.2f (%u)\n", table,
	       pclmul, pclmul / table, sink & 1);
	return 0;
}
