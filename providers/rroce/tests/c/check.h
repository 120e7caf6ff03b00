/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The checks of the mock-kernel test clients (datapath.c,
 * parent_domain.c): a failed check prints "FAIL <line>: <expression>" and
 * counts in `failures`; the client goes on.
 */
#ifndef RROCE_TEST_CHECK_H
#define RROCE_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(e)                                                              \
	do {                                                                  \
		if (!(e)) {                                                   \
			printf("FAIL %d: %s\n", __LINE__, #e);                \
			failures++;                                           \
		}                                                             \
	} while (0)
#define CHECK_EQ(a, b)                                                        \
	do {                                                                  \
		long long _a = (long long)(a), _b = (long long)(b);           \
		if (_a != _b) {                                               \
			printf("FAIL %d: %s == %s (%lld != %lld)\n", __LINE__, \
			       #a, #b, _a, _b);                               \
			failures++;                                           \
		}                                                             \
	} while (0)

#endif
