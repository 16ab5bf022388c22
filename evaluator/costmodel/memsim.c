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
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* ---- per-instruction counts ---- */
typedef struct Stat {
  uint64_t pc, accesses, bytes, stores, l1_fills, l2_fills, l1_writebacks, l2_writebacks;
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
  for (uint64_t line = first; line <= last; line++) record(line, store, s);
}

/* ---- region markers and output ---- */
static void dump(void) {
  FILE *f = fopen(out_path, "w");
  if (!f) return;
  fprintf(f, "# pc accesses bytes stores l1_fills l2_fills l1_writebacks l2_writebacks\n");
  for (size_t b = 0; b < BUCKETS; b++)
    for (Stat *s = buckets[b]; s; s = s->next)
      if (s->accesses || s->l1_writebacks || s->l2_writebacks)
        fprintf(f, "%llx %llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)s->pc,
                (unsigned long long)s->accesses, (unsigned long long)s->bytes, (unsigned long long)s->stores,
                (unsigned long long)s->l1_fills, (unsigned long long)s->l2_fills,
                (unsigned long long)s->l1_writebacks, (unsigned long long)s->l2_writebacks);
  fclose(f);
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
  size_t n = qemu_plugin_tb_n_insns(tb);
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    uint64_t pc = qemu_plugin_insn_vaddr(insn);
    if (pc == begin_pc) qemu_plugin_register_vcpu_insn_exec_cb(insn, on_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
    if (pc == end_pc) qemu_plugin_register_vcpu_insn_exec_cb(insn, on_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
    qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, stat_for(pc));
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
  }
  if (!out_path || !begin_pc || !end_pc || line == 0 || (line & (line - 1))) {
    fprintf(stderr, "eok memsim: need begin=, end=, out= and a power-of-two line=\n");
    return -1;
  }
  line_shift = (unsigned)__builtin_ctzll(line);
  cache_init(&l1, l1_bytes, (unsigned)l1_ways);
  cache_init(&l2, l2_bytes, (unsigned)l2_ways);
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
  return 0;
}
