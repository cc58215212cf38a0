// CRC-32C with a hardware path and a portable slicing-by-8 fallback.
#include "CStepLogSupport.h"
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static int table_ready = 0;

static void build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xff] ^ (c >> 8);
            table[k][n] = c;
        }
    }
    __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc32c_software(uint32_t crc, const uint8_t *p, size_t n) {
    if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) build_table();
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) { crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
              table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8; n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>
__attribute__((target("sse4.2")))
static uint32_t crc32c_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    while (n >= 8) { uint64_t w; memcpy(&w, p, 8); c = _mm_crc32_u64(c, w); p += 8; n -= 8; }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
static int detect(void) { __builtin_cpu_init(); return __builtin_cpu_supports("sse4.2"); }
#elif defined(__aarch64__) && (defined(__ARM_FEATURE_CRC32) || defined(__APPLE__))
#include <arm_acle.h>
__attribute__((target("crc")))
static uint32_t crc32c_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = __crc32cb(c, *p++); n--; }
    while (n >= 8) { uint64_t w; memcpy(&w, p, 8); c = __crc32cd(c, w); p += 8; n -= 8; }
    while (n--) c = __crc32cb(c, *p++);
    return ~c;
}
static int detect(void) { return 1; }
#else
static uint32_t crc32c_hardware(uint32_t crc, const uint8_t *p, size_t n) { return crc32c_software(crc, p, n); }
static int detect(void) { return 0; }
#endif

static int hw_state = -1; // -1 unknown, 0 software, 1 hardware

int steplog_crc32c_is_hardware(void) {
    int s = __atomic_load_n(&hw_state, __ATOMIC_ACQUIRE);
    if (s < 0) { s = detect() ? 1 : 0; __atomic_store_n(&hw_state, s, __ATOMIC_RELEASE); }
    return s;
}

uint32_t steplog_crc32c_extend(uint32_t crc, const void *data, size_t length) {
    if (steplog_crc32c_is_hardware()) return crc32c_hardware(crc, (const uint8_t *)data, length);
    return crc32c_software(crc, (const uint8_t *)data, length);
}
