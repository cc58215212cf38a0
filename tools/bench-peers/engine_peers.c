/*
 * engine_peers: the storage-engine peers of `tools/bench engine` — RocksDB,
 * LevelDB and LMDB through their C libraries — doing the job stepbench's
 * engine bench does to StepLog, with the same keys, values, batches and
 * sync policy. tools/bench compiles it with cc (-lrocksdb -lleveldb -llmdb);
 * the Swift package never links these libraries.
 *
 *   engine_peers ENGINE DIR N [--batch B]      ENGINE: rocksdb | leveldb | lmdb
 *
 * Prints one JSON object on stdout (figures), progress on stderr. Exit 1 with
 * a one-line message when an engine call fails, 2 on a usage error.
 *
 * Keys and values (the same as stepbench's BenchSampleSource, seed 42):
 * sample i takes two draws of SplitMix64 (state += 0x9E3779B97F4A7C15, then
 * the usual mix): high = (a & ~0xF000) | 0x4000, low = (b & 0x3FFF…) | 0x8000…,
 * the key is their 16 big-endian bytes (a random v4 UUID). The value is the
 * record StepLog writes for the sample — length u32, type u8, masked CRC-32C
 * u32, then the payload (uuid, start, end, count, fetchedAt, flags, bundle,
 * device; see Sources/StepLog/Format/SamplePayload.swift): 72 or 85 bytes,
 * 81.75 on average.
 *
 * Phases (as stepbench engine): N upserts in batches of B, each batch durable
 * before the next (the timer covers the write and its sync, not generating
 * the batch); the 10% of samples with i % 10 == 3 again with count + 1
 * (re-upserts); close and reopen (open time); every key deleted, same
 * batches. Writes are blind puts (no read before the write): what these
 * engines are built for, and less work than StepLog's upsert, which reads
 * the stored version to skip unchanged samples.
 *
 * Durability, as each engine's documentation recommends for small durable
 * batches:
 *   RocksDB  WriteBatch + WriteOptions.sync = true (WAL fsynced per batch);
 *            options as its tuning guide's first steps: increase_parallelism(cores),
 *            optimize_level_style_compaction with the C++ API's default
 *            memtable budget (512 MiB; the C example's 0 flushes a table per batch)
 *   LevelDB  WriteBatch + WriteOptions.sync = true; default options
 *   LMDB     one write transaction per batch, default flags (commit fsyncs)
 *
 * Memory: the growth of the process's resident set over the upsert phase
 * (none of these keeps an index the way StepLog does: block caches, memtables,
 * mapped pages). Disk: the bytes of the files in DIR after the upserts.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <leveldb/c.h>
#include <lmdb.h>
#include <rocksdb/c.h>

#ifndef ROCKSDB_VERSION_STRING
#define ROCKSDB_VERSION_STRING "?"
#endif

enum { KEY_SIZE = 16, MAX_VALUE = 96 };

static void die(const char *what, const char *detail) {
    fprintf(stderr, "engine_peers: %s: %s\n", what, detail ? detail : "failed");
    exit(1);
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long resident_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024;
}

static long long directory_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    long long total = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) total += st.st_size;
    }
    closedir(d);
    return total;
}

/* ---- the samples (BenchSampleSource) ---- */

typedef struct { uint64_t state; } splitmix64;

static uint64_t splitmix64_next(splitmix64 *r) {
    r->state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = r->state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint32_t crc_table[256];

static void crc32c_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

/* Continues a CRC-32C: extend(extend(0, a), b) == crc of a then b. */
static uint32_t crc32c_extend(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t c = ~crc;
    while (n--) c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

static void put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i));
}

typedef struct {
    uint8_t key[KEY_SIZE];
    uint8_t value[MAX_VALUE];
    size_t value_size;
} sample;

/* Sample i from the generator's next two draws; `count_delta` is 1 for a
 * re-upsert (the changed version), `fetched_at` in milliseconds. */
static void make_sample(splitmix64 *r, uint64_t i, int count_delta, int64_t fetched_at, sample *s) {
    uint64_t high = (splitmix64_next(r) & ~(uint64_t)0xF000) | 0x4000;
    uint64_t low = (splitmix64_next(r) & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;
    put_be64(s->key, high);
    put_be64(s->key + 8, low);
    int64_t start = 1500000000000LL + (int64_t)i * 37000;
    int64_t end = start + 30000 + (int64_t)(i % 270) * 1000;
    uint32_t count = (uint32_t)(10 + i % 491 + count_delta);
    const char *bundle = "com.apple.health", *device = i % 4 == 0 ? NULL : "Apple Watch";
    size_t bundle_len = strlen(bundle), device_len = device ? strlen(device) : 0;
    uint8_t *p = s->value + 9;
    memcpy(p, s->key, KEY_SIZE);
    put_le(p + 16, (uint64_t)start, 8);
    put_le(p + 24, (uint64_t)end, 8);
    put_le(p + 32, count, 4);
    put_le(p + 36, (uint64_t)fetched_at, 8);
    p[44] = device ? 1 : 0;
    put_le(p + 45, bundle_len, 2);
    memcpy(p + 47, bundle, bundle_len);
    size_t payload = 47 + bundle_len;
    if (device) {
        put_le(p + payload, device_len, 2);
        memcpy(p + payload + 2, device, device_len);
        payload += 2 + device_len;
    }
    put_le(s->value, payload, 4);
    s->value[4] = 1; /* sampleUpsert */
    uint32_t crc = crc32c_extend(crc32c_extend(0, s->value + 4, 1), p, payload); /* type, then payload */
    uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
    put_le(s->value + 5, masked, 4);
    s->value_size = 9 + payload;
}

/* ---- one interface over the three engines ---- */

typedef struct engine engine;
struct engine {
    const char *name;
    const char *version;
    void (*open)(engine *, const char *dir);
    void (*close)(engine *);
    /* Writes the batch (puts, or deletes when `del`) and returns once it is durable. */
    void (*write)(engine *, const sample *batch, size_t n, int del);
    void *a, *b, *c, *d; /* the engine's handles */
};

/* RocksDB */
static void rocks_open(engine *e, const char *dir) {
    rocksdb_options_t *o = rocksdb_options_create();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    rocksdb_options_increase_parallelism(o, (int)(cores > 0 ? cores : 1));
    rocksdb_options_optimize_level_style_compaction(o, 512 << 20); /* the C++ API's default budget */
    rocksdb_options_set_create_if_missing(o, 1);
    char *err = NULL;
    e->a = rocksdb_open(o, dir, &err);
    if (err) die("rocksdb_open", err);
    e->b = o;
    rocksdb_writeoptions_t *w = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(w, 1);
    e->c = w;
    e->d = rocksdb_writebatch_create();
}
static void rocks_close(engine *e) {
    rocksdb_writebatch_destroy(e->d);
    rocksdb_writeoptions_destroy(e->c);
    rocksdb_close(e->a);
    rocksdb_options_destroy(e->b);
}
static void rocks_write(engine *e, const sample *batch, size_t n, int del) {
    rocksdb_writebatch_t *wb = e->d;
    rocksdb_writebatch_clear(wb);
    for (size_t i = 0; i < n; i++) {
        if (del) rocksdb_writebatch_delete(wb, (const char *)batch[i].key, KEY_SIZE);
        else rocksdb_writebatch_put(wb, (const char *)batch[i].key, KEY_SIZE, (const char *)batch[i].value, batch[i].value_size);
    }
    char *err = NULL;
    rocksdb_write(e->a, e->c, wb, &err);
    if (err) die("rocksdb_write", err);
}

/* LevelDB */
static void level_open(engine *e, const char *dir) {
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    char *err = NULL;
    e->a = leveldb_open(o, dir, &err);
    if (err) die("leveldb_open", err);
    e->b = o;
    leveldb_writeoptions_t *w = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(w, 1);
    e->c = w;
    e->d = leveldb_writebatch_create();
}
static void level_close(engine *e) {
    leveldb_writebatch_destroy(e->d);
    leveldb_writeoptions_destroy(e->c);
    leveldb_close(e->a);
    leveldb_options_destroy(e->b);
}
static void level_write(engine *e, const sample *batch, size_t n, int del) {
    leveldb_writebatch_t *wb = e->d;
    leveldb_writebatch_clear(wb);
    for (size_t i = 0; i < n; i++) {
        if (del) leveldb_writebatch_delete(wb, (const char *)batch[i].key, KEY_SIZE);
        else leveldb_writebatch_put(wb, (const char *)batch[i].key, KEY_SIZE, (const char *)batch[i].value, batch[i].value_size);
    }
    char *err = NULL;
    leveldb_write(e->a, e->c, wb, &err);
    if (err) die("leveldb_write", err);
}

/* LMDB */
static void lmdb_check(int rc, const char *what) {
    if (rc != 0) die(what, mdb_strerror(rc));
}
static void lmdb_open(engine *e, const char *dir) {
    MDB_env *env;
    lmdb_check(mdb_env_create(&env), "mdb_env_create");
    lmdb_check(mdb_env_set_mapsize(env, (size_t)1 << 40), "mdb_env_set_mapsize"); /* address space, not disk */
    lmdb_check(mdb_env_open(env, dir, 0, 0644), "mdb_env_open");
    MDB_txn *txn;
    MDB_dbi *dbi = malloc(sizeof *dbi);
    lmdb_check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
    lmdb_check(mdb_dbi_open(txn, NULL, 0, dbi), "mdb_dbi_open");
    lmdb_check(mdb_txn_commit(txn), "mdb_txn_commit");
    e->a = env;
    e->b = dbi;
}
static void lmdb_close(engine *e) {
    mdb_env_close(e->a);
    free(e->b);
}
static void lmdb_write(engine *e, const sample *batch, size_t n, int del) {
    MDB_txn *txn;
    MDB_dbi dbi = *(MDB_dbi *)e->b;
    lmdb_check(mdb_txn_begin(e->a, NULL, 0, &txn), "mdb_txn_begin");
    for (size_t i = 0; i < n; i++) {
        MDB_val k = {KEY_SIZE, (void *)batch[i].key};
        if (del) {
            int rc = mdb_del(txn, dbi, &k, NULL);
            if (rc != MDB_NOTFOUND) lmdb_check(rc, "mdb_del");
        } else {
            MDB_val v = {batch[i].value_size, (void *)batch[i].value};
            lmdb_check(mdb_put(txn, dbi, &k, &v, 0), "mdb_put");
        }
    }
    lmdb_check(mdb_txn_commit(txn), "mdb_txn_commit"); /* fsyncs: durable on return */
}

/* ---- the run ---- */

typedef enum { UPSERT, REUPSERT, DELETE } phase;

/* Runs one phase over samples 0..<n in batches; returns seconds spent writing. */
static double run_phase(engine *e, phase ph, uint64_t n, size_t batch_size, sample *batch, const char *label) {
    splitmix64 r = {42};
    double seconds = 0, last = now_seconds(), started = last;
    uint64_t i = 0, done = 0;
    while (i < n) {
        size_t k = 0;
        for (; i < n && k < batch_size; i++) {
            sample s;
            if (ph == REUPSERT) {
                make_sample(&r, i, 1, 2000, &s);
                if (i % 10 != 3) continue;
            } else {
                make_sample(&r, i, 0, 1000, &s);
            }
            batch[k++] = s;
        }
        if (k == 0) break;
        double t = now_seconds();
        e->write(e, batch, k, ph == DELETE);
        double after = now_seconds();
        seconds += after - t;
        done += k;
        if (after - last > 2 || i == n) {
            fprintf(stderr, "  %s %s: %" PRIu64 " (%.0f/s)\n", e->name, label, done, done / (after - started));
            last = after;
        }
    }
    return seconds;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: engine_peers rocksdb|leveldb|lmdb DIR N [--batch B]\n");
        return 2;
    }
    engine e = {0};
    const char *which = argv[1], *dir = argv[2];
    char *end = NULL;
    uint64_t n = strtoull(argv[3], &end, 10);
    size_t batch_size = 1000;
    if (!end || *end || n == 0) {
        fprintf(stderr, "engine_peers: N must be a positive integer, not '%s'\n", argv[3]);
        return 2;
    }
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch_size = (size_t)strtoul(argv[++i], NULL, 10);
        else { fprintf(stderr, "engine_peers: unknown option '%s'\n", argv[i]); return 2; }
    }
    if (batch_size == 0) { fprintf(stderr, "engine_peers: --batch must be positive\n"); return 2; }
    static char version[64];
    if (strcmp(which, "rocksdb") == 0) {
        e = (engine){.name = "rocksdb", .version = ROCKSDB_VERSION_STRING, .open = rocks_open, .close = rocks_close, .write = rocks_write};
    } else if (strcmp(which, "leveldb") == 0) {
        snprintf(version, sizeof version, "%d.%d", leveldb_major_version(), leveldb_minor_version());
        e = (engine){.name = "leveldb", .version = version, .open = level_open, .close = level_close, .write = level_write};
    } else if (strcmp(which, "lmdb") == 0) {
        snprintf(version, sizeof version, "%d.%d.%d", MDB_VERSION_MAJOR, MDB_VERSION_MINOR, MDB_VERSION_PATCH);
        e = (engine){.name = "lmdb", .version = version, .open = lmdb_open, .close = lmdb_close, .write = lmdb_write};
    } else {
        fprintf(stderr, "engine_peers: unknown engine '%s' (rocksdb, leveldb or lmdb)\n", which);
        return 2;
    }
    crc32c_init();
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) die(dir, strerror(errno));
    sample *batch = calloc(batch_size, sizeof *batch);
    if (!batch) die("calloc", strerror(errno));

    long rss_before = resident_bytes();
    e.open(&e, dir);
    double upsert = run_phase(&e, UPSERT, n, batch_size, batch, "upsert");
    long rss_after = resident_bytes();
    long long disk = directory_bytes(dir);
    double reupsert = run_phase(&e, REUPSERT, n, batch_size, batch, "re-upsert");
    e.close(&e);
    double t = now_seconds();
    e.open(&e, dir);
    double open_seconds = now_seconds() - t;
    double deletes = run_phase(&e, DELETE, n, batch_size, batch, "delete");
    e.close(&e);
    free(batch);

    uint64_t changed = n / 10 + (n % 10 > 3 ? 1 : 0);
    printf("{\"engine\":\"%s\",\"version\":\"%s\",\"n\":%" PRIu64 ",\"batch\":%zu,"
           "\"upsertPerSecond\":%.1f,\"upsertSeconds\":%.3f,\"reupsertPerSecond\":%.1f,\"deletePerSecond\":%.1f,"
           "\"openSeconds\":%.4f,\"rssDeltaBytes\":%ld,\"bytesPerKey\":%.2f,\"diskBytes\":%lld}\n",
           e.name, e.version, n, batch_size, n / upsert, upsert, changed / reupsert, n / deletes, open_seconds,
           rss_after - rss_before, (double)(rss_after - rss_before) / (double)n, disk);
    return 0;
}
