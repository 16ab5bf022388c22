/* EoK cost model, memory stage: a qemu 7.2 TCG plugin that runs every guest data access through a
 * two-level write-back, write-allocate, LRU cache and counts, per guest instruction, the accesses and the
 * lines it moved between the levels while the marked region runs (docs/COSTMODEL.md, "Memory").
 *
 * Inside the region (from the first instruction of eok_region_begin to that of eok_region_end) the
 * accesses are counted and their lines recorded; at the end marker the recorded line stream is run through
 * the cache twice and the second pass is what gets counted: the steady state of a kernel called
 * repeatedly on the same buffers, which is what a board's timing loop measures. Accesses outside the
 * region are ignored (the first replay pass is the warm-up). The table is written to `out` each time the
 * end marker is reached.
 *
 * Debian ships no qemu-plugin.h, so the few plugin API functions used are declared below from the QEMU
 * plugin API documentation (API version 1, qemu 7.2).
 *
 * Arguments: begin=ADDR,end=ADDR,out=PATH,l1=BYTES,l1ways=N,l2=BYTES,l2ways=N,line=BYTES
 *            [,keyfd=FD,elf=PATH,ro=DIR,rw=DIR]
 *
 * The TB log that prices the run is written by qemu inside the process the candidate's code runs in, so
 * the plugin also vouches for it (docs/EVALUATION.md, "Trace integrity"): with keyfd= it reads a secret
 * key from an inherited pipe (before any guest instruction runs; the pipe is then closed), counts the
 * region's TB executions per start pc and an order-sensitive keyed hash of their sequence, compares every
 * translated instruction with the bytes of the guest ELF (elf=: code changed at run time is "smc"), and
 * signs the table with HMAC-SHA256. At the first translation (qemu's own start-up reads of /proc are
 * done by then) it restricts the vCPU thread with Landlock, where the kernel has it: reads beneath ro=,
 * reads and new files beneath rw=, nothing else, so the guest cannot reopen the log or the table by path
 * nor reach /proc/self/mem or /proc/self/fd.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the plugin API (qemu 7.2, version 1), as documented ---- */
typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata);
typedef void (*exit_cb_t)(qemu_plugin_id_t id, void *userdata);
extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb_t cb);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
extern uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
extern void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, udata_cb_t cb,
                                                   enum qemu_plugin_cb_flags flags, void *userdata);
extern void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, mem_cb_t cb,
                                             enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                             void *userdata);
extern unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
extern bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, exit_cb_t cb, void *userdata);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, udata_cb_t cb,
                                                 enum qemu_plugin_cb_flags flags, void *userdata);
extern const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* ---- per-instruction counts ---- */
typedef struct Stat {
  uint64_t pc, accesses, bytes, stores, l1_fills, l2_fills, l1_writebacks, l2_writebacks;
  /* scattered: accesses that do not continue this instruction's previous one (neither the next nor the
   * previous address): the element accesses of strided and indexed vector loads and stores. */
  uint64_t scattered;
  /* multi_line: executions of a strided or indexed vector store whose element accesses fall in more than
   * one line (docs/COSTMODEL.md "Scattered stores beyond L1"); `tracked` marks those stores, whose every
   * execution starts with on_store_start. */
  uint64_t multi_line;
  uint64_t exec_line; /* the line of this execution's first access */
  bool tracked, exec_fresh, exec_multi;
  uint64_t last_start, last_end; /* the previous access of this instruction */
  struct Stat *next; /* hash chain */
} Stat;

#define BUCKETS 65536
static Stat *buckets[BUCKETS];
static uint64_t begin_pc, end_pc;
static const char *out_path;
static bool in_region;

static Stat *stat_for(uint64_t pc) {
  Stat **head = &buckets[(pc >> 1) & (BUCKETS - 1)];
  for (Stat *s = *head; s; s = s->next)
    if (s->pc == pc) return s;
  Stat *s = calloc(1, sizeof *s);
  if (!s) abort();
  s->pc = pc;
  s->next = *head;
  *head = s;
  return s;
}

/* ---- caches: set-associative, LRU by a global access stamp ---- */
typedef struct {
  uint64_t *tag; /* line address + 1; 0 = empty */
  uint64_t *stamp;
  uint8_t *dirty;
  unsigned sets, ways;
} Cache;

static Cache l1, l2;

/* The region's line stream; consecutive accesses of one instruction to one line are one entry. */
typedef struct {
  uint64_t line;
  Stat *stat;
  bool store;
} Touch;
static Touch *touches;
static size_t n_touches, cap_touches;
static bool counting; /* the cache is replaying the region's stream for the counted pass */
static unsigned line_shift = 6;
static uint64_t clock_stamp;

static void cache_init(Cache *c, uint64_t bytes, unsigned ways) {
  c->ways = ways;
  c->sets = (unsigned)(bytes >> line_shift) / ways;
  size_t n = (size_t)c->sets * ways;
  c->tag = calloc(n, sizeof *c->tag);
  c->stamp = calloc(n, sizeof *c->stamp);
  c->dirty = calloc(n, 1);
  if (!c->tag || !c->stamp || !c->dirty || c->sets == 0) abort();
}

/* Returns the way holding `line` in its set, or -1; `*victim` gets the LRU way. */
static int cache_find(Cache *c, uint64_t line, size_t *base, int *victim) {
  *base = (size_t)(line % c->sets) * c->ways;
  uint64_t oldest = UINT64_MAX;
  for (unsigned w = 0; w < c->ways; w++) {
    uint64_t t = c->tag[*base + w];
    if (t == line + 1) return (int)w;
    uint64_t age = t ? c->stamp[*base + w] : 0;
    if (age < oldest) oldest = age, *victim = (int)w;
  }
  return -1;
}

/* Put `line` in L2 (a fill from DRAM, or a write-back from L1). Returns true if it was already there. */
static bool l2_touch(uint64_t line, bool make_dirty, Stat *s) {
  size_t base;
  int victim = 0, w = cache_find(&l2, line, &base, &victim);
  bool hit = w >= 0;
  if (!hit) {
    w = victim;
    if (l2.tag[base + w] && l2.dirty[base + w] && counting) s->l2_writebacks++;
    l2.tag[base + w] = line + 1;
    l2.dirty[base + w] = 0;
  }
  l2.stamp[base + w] = ++clock_stamp;
  if (make_dirty) l2.dirty[base + w] = 1;
  return hit;
}

static void access_line(uint64_t line, bool store, Stat *s) {
  size_t base;
  int victim = 0, w = cache_find(&l1, line, &base, &victim);
  if (w < 0) {
    w = victim;
    if (l1.tag[base + w] && l1.dirty[base + w]) {
      if (counting) s->l1_writebacks++;
      l2_touch(l1.tag[base + w] - 1, true, s);
    }
    bool l2_hit = l2_touch(line, false, s);
    if (counting) {
      s->l1_fills++;
      if (!l2_hit) s->l2_fills++;
    }
    l1.tag[base + w] = line + 1;
    l1.dirty[base + w] = 0;
  }
  l1.stamp[base + w] = ++clock_stamp;
  if (store) l1.dirty[base + w] = 1;
}

static void record(uint64_t line, bool store, Stat *s) {
  if (n_touches && touches[n_touches - 1].line == line && touches[n_touches - 1].stat == s) {
    touches[n_touches - 1].store |= store;
    return;
  }
  if (n_touches == cap_touches) {
    cap_touches = cap_touches ? 2 * cap_touches : 1 << 16;
    touches = realloc(touches, cap_touches * sizeof *touches);
    if (!touches) abort();
  }
  touches[n_touches++] = (Touch){line, s, store};
}

/* Run the recorded stream through the cache twice; count the second pass. */
static void replay(void) {
  for (int pass = 0; pass < 2; pass++) {
    counting = pass == 1;
    for (size_t i = 0; i < n_touches; i++) access_line(touches[i].line, touches[i].store, touches[i].stat);
  }
  counting = false;
  n_touches = 0;
}

/* Only the main guest thread (vcpu 0) is simulated: the model prices one core, qemu-user runs guest
 * threads on parallel host threads, and the cache arrays have no locks. A region that starts threads is
 * refused by the trace parser; this keeps the plugin from corrupting memory (and crashing qemu) first. */
static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata) {
  if (vcpu != 0 || !in_region) return;
  Stat *s = userdata;
  unsigned size = 1u << qemu_plugin_mem_size_shift(info);
  bool store = qemu_plugin_mem_is_store(info);
  uint64_t first = vaddr >> line_shift, last = (vaddr + size - 1) >> line_shift;
  s->accesses++;
  s->bytes += size;
  s->stores += store;
  if (s->last_end && vaddr != s->last_end && vaddr + size != s->last_start) s->scattered++;
  s->last_start = vaddr, s->last_end = vaddr + size;
  if (s->tracked) {
    if (s->exec_fresh) s->exec_fresh = false, s->exec_multi = false, s->exec_line = first;
    if (!s->exec_multi && (first != s->exec_line || last != s->exec_line)) s->exec_multi = true, s->multi_line++;
  }
  for (uint64_t line = first; line <= last; line++) record(line, store, s);
}

/* An execution of a tracked store begins: its accesses follow (exec callbacks run before the instruction). */
static void on_store_start(unsigned int vcpu, void *userdata) {
  if (vcpu != 0 || !in_region) return;
  ((Stat *)userdata)->exec_fresh = true;
}

/* A strided or indexed vector store (STORE-FP major opcode, a vector width, mop != unit stride). */
static bool scattering_vector_store(const uint8_t *p, size_t size) {
  if (size != 4) return false;
  uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  unsigned width = (w >> 12) & 7;
  return (w & 0x7f) == 0x27 && (width == 0 || width >= 5) && ((w >> 26) & 3) != 0;
}

/* ---- integrity: SHA-256 / HMAC (FIPS 180-4, RFC 2104), the region's TB executions, code checks ---- */
typedef struct { uint32_t h[8]; uint8_t buf[64]; uint64_t len; size_t fill; } Sha256;
static const uint32_t K256[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(Sha256 *c, const uint8_t *p) {
  uint32_t w[64], a[8];
  for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | p[4 * i + 1] << 16 | p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(a, c->h, sizeof a);
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = a[7] + (ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25)) + ((a[4] & a[5]) ^ (~a[4] & a[6])) + K256[i] + w[i];
    uint32_t t2 = (ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22)) + ((a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]));
    memmove(a + 1, a, 7 * sizeof *a);
    a[4] += t1;
    a[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++) c->h[i] += a[i];
}
static void sha_init(Sha256 *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->len = 0, c->fill = 0;
}
static void sha_update(Sha256 *c, const void *data, size_t n) {
  const uint8_t *p = data;
  c->len += n;
  while (n) {
    size_t k = 64 - c->fill < n ? 64 - c->fill : n;
    memcpy(c->buf + c->fill, p, k);
    c->fill += k, p += k, n -= k;
    if (c->fill == 64) sha_block(c, c->buf), c->fill = 0;
  }
}
static void sha_final(Sha256 *c, uint8_t out[32]) {
  uint64_t bits = c->len * 8;
  uint8_t pad = 0x80, zero = 0, len[8];
  sha_update(c, &pad, 1);
  while (c->fill != 56) sha_update(c, &zero, 1);
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha_update(c, len, 8);
  for (int i = 0; i < 8; i++) out[4 * i] = c->h[i] >> 24, out[4 * i + 1] = c->h[i] >> 16, out[4 * i + 2] = c->h[i] >> 8, out[4 * i + 3] = c->h[i];
}
static void hmac_sha256(const uint8_t key[32], const void *data, size_t n, uint8_t out[32]) {
  uint8_t pad[64], inner[32];
  Sha256 c;
  for (int pass = 0; pass < 2; pass++) {
    memset(pad, pass ? 0x5c : 0x36, sizeof pad);
    for (int i = 0; i < 32; i++) pad[i] ^= key[i];
    sha_init(&c);
    sha_update(&c, pad, 64);
    if (pass == 0) sha_update(&c, data, n), sha_final(&c, inner);
    else sha_update(&c, inner, 32), sha_final(&c, out);
  }
}

static uint8_t mac_key[32];
static bool keyed;
static uint64_t order_key, order_hash, order_index;
static uint64_t smc_count, smc_first;
static int landlock_abi = -1;  /* -1: not asked for (no ro=), 0: the kernel has none */
static FILE *out_file;
static const char *ro_dir, *rw_dir;
static uint8_t *elf;
static size_t elf_size;

/* An executed TB start pc and how often it ran inside the region (every translation of it counts). */
typedef struct TbRec {
  uint64_t pc, execs;
  struct TbRec *next;
} TbRec;
static TbRec *tb_buckets[BUCKETS];

static TbRec *tb_for(uint64_t pc) {
  TbRec **head = &tb_buckets[(pc >> 1) & (BUCKETS - 1)];
  for (TbRec *r = *head; r; r = r->next)
    if (r->pc == pc) return r;
  TbRec *r = calloc(1, sizeof *r);
  if (!r) abort();
  r->pc = pc;
  r->next = *head;
  *head = r;
  return r;
}

static uint64_t fmix64(uint64_t k) {
  k ^= k >> 33, k *= 0xff51afd7ed558ccdULL, k ^= k >> 33, k *= 0xc4ceb9fe1a85ec53ULL, k ^= k >> 33;
  return k;
}

/* Does the guest ELF hold these instruction bytes at `vaddr` (static binary: file offset by PT_LOAD)? */
static bool elf_has(uint64_t vaddr, const uint8_t *bytes, size_t n) {
  if (!elf || elf_size < 64) return true; /* no elf=: nothing to compare with */
  uint64_t phoff;
  uint16_t phentsize, phnum;
  memcpy(&phoff, elf + 0x20, 8), memcpy(&phentsize, elf + 0x36, 2), memcpy(&phnum, elf + 0x38, 2);
  for (unsigned i = 0; i < phnum; i++) {
    const uint8_t *ph = elf + phoff + (size_t)i * phentsize;
    if (phoff + (size_t)(i + 1) * phentsize > elf_size) return false;
    uint32_t type;
    uint64_t off, va, filesz;
    memcpy(&type, ph, 4), memcpy(&off, ph + 8, 8), memcpy(&va, ph + 16, 8), memcpy(&filesz, ph + 32, 8);
    if (type != 1 || vaddr < va || vaddr + n > va + filesz) continue;
    size_t at = (size_t)(off + (vaddr - va));
    return at + n <= elf_size && memcmp(elf + at, bytes, n) == 0;
  }
  return false; /* code outside the file's loaded bytes: written at run time */
}

static void on_tb_exec(unsigned int vcpu, void *userdata) {
  TbRec *r = userdata;
  if (vcpu != 0 || !in_region || r->pc == end_pc) return; /* the log's region: after begin's TB, before end's */
  r->execs++;
  order_hash += fmix64(r->pc ^ order_key) * (2 * order_index + 1);
  order_index++;
}

/* Landlock (ABI >= 1): the vCPU thread may read beneath ro_dir and read or create files beneath rw_dir. */
static int restrict_files(void) {
  int abi = (int)syscall(444 /* landlock_create_ruleset */, NULL, 0, 1 /* VERSION */);
  if (abi <= 0) return 0;
  uint64_t handled = (1ULL << 13) - 1; /* execute .. make_sym */
  if (abi >= 2) handled |= 1ULL << 13; /* refer */
  if (abi >= 3) handled |= 1ULL << 14; /* truncate */
  if (abi >= 5) handled |= 1ULL << 15; /* ioctl_dev */
  int rs = (int)syscall(444, &handled, sizeof handled, 0);
  if (rs < 0) return 0;
  const uint64_t read = 1ULL << 0 | 1ULL << 2 | 1ULL << 3; /* execute, read_file, read_dir */
  const uint64_t write = read | 1ULL << 1 | 1ULL << 8 | (abi >= 3 ? 1ULL << 14 : 0); /* write, make_reg, truncate */
  const char *dirs[2] = {ro_dir, rw_dir};
  const uint64_t rights[2] = {read, write};
  for (int i = 0; i < 2; i++) {
    if (!dirs[i]) continue;
    struct __attribute__((packed)) { uint64_t allowed; int32_t fd; } rule = {rights[i], open(dirs[i], O_PATH | O_CLOEXEC)};
    if (rule.fd < 0 || syscall(445 /* landlock_add_rule */, rs, 1 /* PATH_BENEATH */, &rule, 0) != 0) abort();
    close(rule.fd);
  }
  if (syscall(446 /* landlock_restrict_self */, rs, 0) != 0) abort();
  close(rs);
  return abi;
}

/* ---- region markers and output ---- */
static void dump(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m || !out_file) abort();
  fprintf(m, "# pc accesses bytes stores l1_fills l2_fills l1_writebacks l2_writebacks scattered multi_line\n");
  for (size_t b = 0; b < BUCKETS; b++)
    for (Stat *s = buckets[b]; s; s = s->next)
      if (s->accesses || s->l1_writebacks || s->l2_writebacks)
        fprintf(m, "%llx %llu %llu %llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)s->pc,
                (unsigned long long)s->accesses, (unsigned long long)s->bytes, (unsigned long long)s->stores,
                (unsigned long long)s->l1_fills, (unsigned long long)s->l2_fills,
                (unsigned long long)s->l1_writebacks, (unsigned long long)s->l2_writebacks,
                (unsigned long long)s->scattered, (unsigned long long)s->multi_line);
  if (keyed) {
    for (size_t b = 0; b < BUCKETS; b++)
      for (TbRec *r = tb_buckets[b]; r; r = r->next)
        if (r->execs) fprintf(m, "tb %llx %llu\n", (unsigned long long)r->pc, (unsigned long long)r->execs);
    fprintf(m, "order %016llx %llu\n", (unsigned long long)order_hash, (unsigned long long)order_index);
    fprintf(m, "smc %llu %llx\n", (unsigned long long)smc_count, (unsigned long long)smc_first);
    fprintf(m, "landlock %d\n", landlock_abi);
  }
  fclose(m);
  if (ftruncate(fileno(out_file), 0) != 0) abort();
  rewind(out_file);
  fwrite(buf, 1, len, out_file);
  if (keyed) {
    uint8_t tag[32];
    hmac_sha256(mac_key, buf, len, tag);
    fprintf(out_file, "mac ");
    for (int i = 0; i < 32; i++) fprintf(out_file, "%02x", tag[i]);
    fprintf(out_file, "\n");
  }
  fflush(out_file);
  free(buf);
}

static void on_begin(unsigned int vcpu, void *userdata) {
  (void)userdata;
  if (vcpu != 0) return;
  in_region = true;
}

static void on_end(unsigned int vcpu, void *userdata) {
  (void)userdata;
  if (vcpu != 0) return;
  in_region = false;
  replay();
  dump();
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  if (landlock_abi == -1 && ro_dir) landlock_abi = restrict_files(); /* qemu's start-up is over: no guest code ran yet */
  size_t n = qemu_plugin_tb_n_insns(tb);
  if (keyed) qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS, tb_for(qemu_plugin_tb_vaddr(tb)));
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    uint64_t pc = qemu_plugin_insn_vaddr(insn);
    if (keyed && !elf_has(pc, qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn)) && !smc_count++) smc_first = pc;
    if (pc == begin_pc) qemu_plugin_register_vcpu_insn_exec_cb(insn, on_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
    if (pc == end_pc) qemu_plugin_register_vcpu_insn_exec_cb(insn, on_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
    Stat *s = stat_for(pc);
    if (scattering_vector_store(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn))) {
      s->tracked = true;
      qemu_plugin_register_vcpu_insn_exec_cb(insn, on_store_start, QEMU_PLUGIN_CB_NO_REGS, s);
    }
    qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, s);
  }
}

static uint64_t arg_u64(const char *arg, const char *key, uint64_t *dst) {
  size_t k = strlen(key);
  if (strncmp(arg, key, k) == 0 && arg[k] == '=') *dst = strtoull(arg + k + 1, NULL, 0);
  return *dst;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                                               int argc, char **argv) {
  (void)info;
  uint64_t l1_bytes = 32768, l1_ways = 8, l2_bytes = 524288, l2_ways = 16, line = 64;
  for (int i = 0; i < argc; i++) {
    arg_u64(argv[i], "begin", &begin_pc);
    arg_u64(argv[i], "end", &end_pc);
    arg_u64(argv[i], "l1", &l1_bytes);
    arg_u64(argv[i], "l1ways", &l1_ways);
    arg_u64(argv[i], "l2", &l2_bytes);
    arg_u64(argv[i], "l2ways", &l2_ways);
    arg_u64(argv[i], "line", &line);
    if (strncmp(argv[i], "out=", 4) == 0) out_path = argv[i] + 4;
    if (strncmp(argv[i], "ro=", 3) == 0) ro_dir = argv[i] + 3;
    if (strncmp(argv[i], "rw=", 3) == 0) rw_dir = argv[i] + 3;
    if (strncmp(argv[i], "keyfd=", 6) == 0) {
      int fd = atoi(argv[i] + 6);
      keyed = read(fd, mac_key, sizeof mac_key) == (ssize_t)sizeof mac_key;
      close(fd);
      if (!keyed) {
        fprintf(stderr, "eok memsim: could not read the key\n");
        return -1;
      }
      memcpy(&order_key, mac_key, sizeof order_key);
    }
    if (strncmp(argv[i], "elf=", 4) == 0) {
      FILE *f = fopen(argv[i] + 4, "rb");
      if (!f || fseek(f, 0, SEEK_END) != 0) return -1;
      elf_size = (size_t)ftell(f);
      rewind(f);
      elf = malloc(elf_size);
      if (!elf || fread(elf, 1, elf_size, f) != elf_size) return -1;
      fclose(f);
    }
  }
  if (!out_path || !begin_pc || !end_pc || line == 0 || (line & (line - 1))) {
    fprintf(stderr, "eok memsim: need begin=, end=, out= and a power-of-two line=\n");
    return -1;
  }
  out_file = fopen(out_path, "w"); /* now: the guest may not be able to open files later */
  if (!out_file) {
    fprintf(stderr, "eok memsim: cannot write %s\n", out_path);
    return -1;
  }
  line_shift = (unsigned)__builtin_ctzll(line);
  cache_init(&l1, l1_bytes, (unsigned)l1_ways);
  cache_init(&l2, l2_bytes, (unsigned)l2_ways);
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
  return 0;
}
