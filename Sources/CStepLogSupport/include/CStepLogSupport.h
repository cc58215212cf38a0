// Hot loops that need CPU instructions Swift cannot name directly.
// Everything here is a pure function over caller-owned memory.
#ifndef CSTEPLOG_SUPPORT_H
#define CSTEPLOG_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), continuing from `crc`
/// (pass 0 to start). Uses SSE4.2 `crc32` on x86-64 or the ARMv8 CRC
/// instructions when the CPU has them, a slicing-by-8 table otherwise; all paths
/// return identical values.
uint32_t steplog_crc32c_extend(uint32_t crc, const void *data, size_t length);

/// 1 when `steplog_crc32c_extend` runs on hardware instructions, 0 otherwise.
int steplog_crc32c_is_hardware(void);

/// Hints the CPU to fetch the cache line holding `address` (no effect on results).
static inline void steplog_prefetch(const void *address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address, 0, 3);
#else
    (void)address;
#endif
}

#endif
