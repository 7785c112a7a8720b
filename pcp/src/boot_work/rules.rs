//! The rules that make the boot's work of one machine out of the base
//! record: each stands for a kernel caller whose allocations depend on the
//! machine's memory or CPUs, and is expanded at its marker (`r <rule>`) in
//! the record (module docs of the parent).
//!
//! | rule | kernel | pages |
//! |---|---|---|
//! | `early` | `ftrace_init()` → `ftrace_allocate_records()`; `early_trace_init()` → `rb_allocate_cpu_buffer()` of the boot CPU; the slabs of `kmem_cache_init()`, `sched_init()`, `workqueue_init_early()`, `rcu_init()` | 220 for 56,193 mcount records in groups of order 7, 6, 4, 3, 2 (faithful); 9 (faithful: 3 buffers × (2 pages + reader)); 288 (fitted) |
//! | `hash NAME` | `alloc_large_system_hash()` from its caller ([`HASH_TABLES`]) | `bucketsize << log2qty`, `log2qty` from `nr_kernel_pages` (faithful) |
//! | `futex` | `futex_init()` → `alloc_pages_exact_nid()` | 64 × roundup_pow_of_two(256 × CPUs) bytes (faithful) |
//! | `percpu` | `bringup_nonboot_cpus()`: each CPU's ring buffers (`trace_rb_cpu_prepare()`), the slabs of its kthreads, sysfs devices and caches | per CPU after the first: 9 (faithful) + 199 (fitted) |
//! | `memory_blocks` | `memory_dev_init()` → `add_memory_block()` per 128 MiB block | 4,448 bytes of slab per block (fitted) |
//! | `ftrace_free` | `ftrace_free_init_mem()` → `ftrace_free_pages()` | the last record group (order 2) freed (faithful) |
//!
//! The fitted numbers come from seven traced boots of Debian 7.2.13 on QEMU
//! virt (1, 4, 16 GiB with 1 CPU; 4 GiB with 2 CPUs; 1, 4, 16 GiB with 4
//! CPUs; `tests/data/arm64-peer/boot-work-sites.tsv`; least squares over
//! the configurations): slab pages grow by 187 per CPU in the trace and
//! about 12 per CPU before it (the pages `trace_init()` comes too late to
//! see: pgalloc less what the trace saw and the boot CPU's ring buffer); the
//! memory-block devices take 13, 37, 139 pages for 8, 32, 128 blocks; 288
//! early pages make the 4 GiB / 1 CPU boot's `pgalloc` (8,208 and 8,210 in
//! two untraced boots).

use super::BootRuleWork;
use mmlab_engine::{Gfp, PAGE_SHIFT, PAGE_SIZE};

/// What the rules need to know of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BootMachine {
    /// Possible CPUs (`num_possible_cpus()`).
    pub cpus: u64,
    /// `nr_kernel_pages` (and `nr_all_pages`: no highmem): the pages memblock
    /// had free when `free_area_init()` counted them.
    pub nr_kernel_pages: u64,
    /// Memory blocks (`memory_block_size_bytes()`: 128 MiB on arm64).
    pub memory_blocks: u64,
}

/// `MIN_MEMORY_BLOCK_SIZE` on arm64: `1 << SECTION_SIZE_BITS` (27).
pub const MEMORY_BLOCK_SIZE: u64 = 128 << 20;
/// mcount records of Debian 7.2.13's image ("ftrace: allocating 56193
/// entries in 220 pages").
pub const FTRACE_RECORDS: u64 = 56_193;
/// `sizeof(struct dyn_ftrace)` on arm64.
const DYN_FTRACE_SIZE: u64 = 16;
/// Pages of one CPU's ring buffers at boot: the global, snapshot and temp
/// buffers, each `nr_pages = max(DIV_ROUND_UP(size, capacity), 2)` data
/// pages and a reader page (`rb_allocate_cpu_buffer()`, with the minimal
/// size `tracer_alloc_buffers()` keeps until tracing is used).
pub const RING_BUFFER_PAGES_PER_CPU: u64 = 3 * (2 + 1);
/// Fitted: slab pages of the early caches (`kmem_cache_init()` and the rest
/// of `mm_core_init()` .. `trace_init()`), one CPU.
pub const EARLY_SLAB_PAGES: u64 = 288;
/// Fitted: slab pages each CPU after the first adds (its kthreads, its
/// sysfs devices, SLUB's per-CPU slabs of every cache it allocates from).
pub const PERCPU_SLAB_PAGES: u64 = 199;
/// Fitted: slab bytes per memory block device (`struct memory_block`, its
/// kobject and sysfs attributes).
pub const MEMORY_BLOCK_SLAB_BYTES: u64 = 4_448;

/// The gfp of a slab page (`allocate_slab()` after boot).
const SLAB_GFP: Gfp = Gfp::GFP_KERNEL
    .union(Gfp::__GFP_NOWARN)
    .union(Gfp::__GFP_NORETRY)
    .union(Gfp::__GFP_COMP)
    .union(Gfp::__GFP_NOMEMALLOC);
/// `alloc_cpu_data()`'s gfp.
const RING_GFP: Gfp = Gfp::GFP_KERNEL.union(Gfp::__GFP_RETRY_MAYFAIL).union(Gfp::__GFP_COMP).union(Gfp::__GFP_ZERO);

/// How a table's entry count is given to `alloc_large_system_hash()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entries {
    /// 0: from `nr_kernel_pages` and `scale`.
    Auto,
    /// A fixed count.
    Fixed(u64),
    /// `roundup_pow_of_two(n × num_possible_cpus())`, also both limits.
    PerCpu(u64),
    /// The previous table's entries (TCP bind: `ehash_mask + 1`).
    Previous,
}

/// One `alloc_large_system_hash()` call after `mem_init()` (allocated from
/// the page allocator with `alloc_pages_exact()`: `hashdist` is 0 without
/// NUMA).
#[derive(Clone, Copy, Debug)]
pub struct HashTable {
    /// The name dmesg prints ("... hash table entries: ...").
    pub name: &'static str,
    /// The caller.
    pub kernel: &'static str,
    /// `bucketsize`.
    pub bucketsize: u64,
    /// `numentries`.
    pub entries: Entries,
    /// `scale`.
    pub scale: u32,
    /// `HASH_ZERO`.
    pub zero: bool,
    /// `low_limit`.
    pub low: u64,
    /// `high_limit` (0: 1/16 of memory).
    pub high: u64,
}

/// The tables, in the order the 7.2 boot allocates them. The bucket sizes
/// are the ones dmesg's bytes/entries give on Debian's arm64 build.
pub const HASH_TABLES: [HashTable; 10] = [
    HashTable {
        name: "Mount-cache",
        kernel: "mnt_init() (fs/namespace.c)",
        bucketsize: 8,
        entries: Entries::Auto,
        scale: 19,
        zero: true,
        low: 0,
        high: 0,
    },
    HashTable {
        name: "Mountpoint-cache",
        kernel: "mnt_init() (fs/namespace.c)",
        bucketsize: 8,
        entries: Entries::Auto,
        scale: 19,
        zero: true,
        low: 0,
        high: 0,
    },
    HashTable {
        name: "posixtimers",
        kernel: "posixtimer_init() (kernel/time/posix-timers.c)",
        bucketsize: 16,
        entries: Entries::PerCpu(512),
        scale: 0,
        zero: false,
        low: 0,
        high: 0,
    },
    HashTable {
        name: "IP idents",
        kernel: "ip_rt_init() (net/ipv4/route.c)",
        bucketsize: 8,
        entries: Entries::Auto,
        scale: 16,
        zero: true,
        low: 2048,
        high: 256 * 1024,
    },
    HashTable {
        name: "tcp_listen_portaddr_hash",
        kernel: "inet_hashinfo2_init() (net/ipv4/inet_hashtables.c)",
        bucketsize: 16,
        entries: Entries::Auto,
        scale: 21,
        zero: false,
        low: 0,
        high: 64 * 1024,
    },
    HashTable {
        name: "Table-perturb",
        kernel: "inet_hashinfo2_init() (net/ipv4/inet_hashtables.c)",
        bucketsize: 4,
        entries: Entries::Fixed(65_536),
        scale: 0,
        zero: false,
        low: 65_536,
        high: 65_536,
    },
    HashTable {
        name: "TCP established",
        kernel: "tcp_init() (net/ipv4/tcp.c)",
        bucketsize: 8,
        entries: Entries::Auto,
        scale: 17,
        zero: false,
        low: 0,
        high: 512 * 1024,
    },
    HashTable {
        name: "TCP bind",
        kernel: "tcp_init() (net/ipv4/tcp.c)",
        bucketsize: 32,
        entries: Entries::Previous,
        scale: 17,
        zero: false,
        low: 0,
        high: 64 * 1024,
    },
    HashTable {
        name: "MPTCP token",
        kernel: "mptcp_token_init() (net/mptcp/token.c)",
        bucketsize: 24,
        entries: Entries::Auto,
        scale: 20,
        zero: true,
        low: 0,
        high: 64 * 1024,
    },
    HashTable {
        name: "UDP",
        kernel: "udp_table_init() (net/ipv4/udp.c)",
        bucketsize: 64,
        entries: Entries::Auto,
        scale: 21,
        zero: false,
        low: 256,
        high: 65_536,
    },
];

/// `roundup_pow_of_two()`.
fn roundup_pow_of_two(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}

/// `get_order()`.
pub fn get_order(size: u64) -> u32 {
    (size.max(1).div_ceil(PAGE_SIZE)).next_power_of_two().trailing_zeros()
}

/// `alloc_large_system_hash()`'s entry count (mm/mm_init.c): from
/// `nr_kernel_pages` rounded up to a MiB, one bucket per `2^scale` bytes
/// (one step more per 4× above 64 GiB without a high limit), at least a
/// page of buckets, a power of two, clamped to the limits and to 1/16 of
/// memory.
pub fn hash_entries(
    nr_kernel_pages: u64,
    bucketsize: u64,
    numentries: u64,
    mut scale: u32,
    low: u64,
    high: u64,
) -> u64 {
    let mut n = numentries;
    if n == 0 {
        n = nr_kernel_pages.next_multiple_of((1 << 20) / PAGE_SIZE);
        if high == 0 {
            let mut adapt = (64u64 << 30) >> PAGE_SHIFT;
            while adapt < n {
                scale += 1;
                adapt <<= 2;
            }
        }
        n = if scale > PAGE_SHIFT { n >> (scale - PAGE_SHIFT) } else { n << (PAGE_SHIFT - scale) };
        if n * bucketsize < PAGE_SIZE {
            n = PAGE_SIZE / bucketsize;
        }
    }
    n = roundup_pow_of_two(n);
    let mut max = if high != 0 { high } else { ((nr_kernel_pages << PAGE_SHIFT) >> 4) / bucketsize };
    max = max.min(0x8000_0000);
    n = n.max(low).min(max);
    1 << (63 - n.leading_zeros())
}

/// Every hash table's (entries, bytes) on `m`, in [`HASH_TABLES`] order.
pub fn hash_tables(m: &BootMachine) -> Vec<(HashTable, u64, u64)> {
    let mut prev = 0;
    HASH_TABLES
        .iter()
        .map(|t| {
            let (num, low, high) = match t.entries {
                Entries::Auto => (0, t.low, t.high),
                Entries::Fixed(n) => (n, t.low, t.high),
                Entries::PerCpu(k) => {
                    let n = roundup_pow_of_two(k * m.cpus);
                    (n, n, n)
                }
                Entries::Previous => (prev, t.low, t.high),
            };
            let e = hash_entries(m.nr_kernel_pages, t.bucketsize, num, t.scale, low, high);
            prev = e;
            (*t, e, e * t.bucketsize)
        })
        .collect()
}

/// `futex_init()`'s table: (entries, bytes).
pub fn futex_table(m: &BootMachine) -> (u64, u64) {
    let n = roundup_pow_of_two((256 * m.cpus).max(4));
    (n, n * 64)
}

/// One step a rule asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuleOp {
    /// An allocation on `cpu`.
    Alloc { cpu: usize, order: u32, gfp: Gfp },
    /// `alloc_pages_exact()`'s trim of the allocation just made: split it
    /// and free its pages from `keep` on, one by one (`make_alloc_exact`).
    TrimTo { keep: u64 },
    /// Free the early rule's last ftrace record group.
    FreeFtraceGroup,
}

/// Slab pages of `pages` in the order mix of the traces' slab allocations
/// (a fifth in order-3 slabs, a fifth in order 2, a little in order 1, the
/// rest single pages; one page in twenty reclaimable), on `cpu`.
fn slab_pages(cpu: usize, pages: u64, out: &mut Vec<RuleOp>) {
    let o3 = pages / 5 / 8;
    let o2 = pages * 22 / 100 / 4;
    let o1 = pages * 6 / 100 / 2;
    let o0 = pages - o3 * 8 - o2 * 4 - o1 * 2;
    let reclaimable = pages / 20;
    for (order, n) in [(3, o3), (2, o2), (1, o1)] {
        out.extend((0..n).map(|_| RuleOp::Alloc { cpu, order, gfp: SLAB_GFP }));
    }
    out.extend((0..o0).map(|i| RuleOp::Alloc {
        cpu,
        order: 0,
        gfp: if i < reclaimable { SLAB_GFP | Gfp::__GFP_RECLAIMABLE } else { SLAB_GFP },
    }));
}

/// `alloc_pages_exact(size)`: the order that holds it, trimmed.
fn alloc_exact(cpu: usize, bytes: u64, gfp: Gfp, out: &mut Vec<RuleOp>) {
    let order = get_order(bytes);
    out.push(RuleOp::Alloc { cpu, order, gfp });
    let keep = bytes.div_ceil(PAGE_SIZE);
    if keep < 1 << order {
        out.push(RuleOp::TrimTo { keep });
    }
}

/// The ftrace record groups: the largest power of two of the pages left,
/// each `__get_free_pages(GFP_KERNEL | __GFP_ZERO, order)`.
pub fn ftrace_groups() -> Vec<u32> {
    let mut pages = (FTRACE_RECORDS * DYN_FTRACE_SIZE).div_ceil(PAGE_SIZE);
    let mut orders = Vec::new();
    while pages > 0 {
        let o = 63 - pages.leading_zeros();
        orders.push(o);
        pages -= 1 << o;
    }
    orders
}

/// Expand rule `name` (with its argument) for `m`: the steps and the
/// report line. `None` for a rule this mmlab does not know.
pub(crate) fn expand(name: &str, arg: Option<&str>, m: &BootMachine) -> Option<(Vec<RuleOp>, BootRuleWork)> {
    let mut ops = Vec::new();
    let line = |rule: String, kernel: &'static str, formula: String, fidelity: &'static str| BootRuleWork {
        rule,
        kernel,
        formula,
        fidelity,
        allocations: 0,
        pages: 0,
    };
    let report = match name {
        "early" => {
            for order in ftrace_groups() {
                ops.push(RuleOp::Alloc { cpu: 0, order, gfp: Gfp::GFP_KERNEL | Gfp::__GFP_ZERO });
            }
            ops.extend((0..RING_BUFFER_PAGES_PER_CPU).map(|_| RuleOp::Alloc { cpu: 0, order: 0, gfp: RING_GFP }));
            slab_pages(0, EARLY_SLAB_PAGES, &mut ops);
            line(
                "early".into(),
                "ftrace_init(), early_trace_init(), kmem_cache_init() .. rcu_init() (before trace_init())",
                format!(
                    "ftrace records {:?} (orders) + boot CPU ring buffers {RING_BUFFER_PAGES_PER_CPU} + slabs {EARLY_SLAB_PAGES}",
                    ftrace_groups()
                ),
                "faithful (ftrace, ring buffers); fitted (slabs)",
            )
        }
        "hash" => {
            // The record spells the name with '_' for ' '.
            let want = arg?;
            let (t, e, bytes) = hash_tables(m).into_iter().find(|(t, ..)| t.name.replace(' ', "_") == want)?;
            let gfp = if t.zero { Gfp::GFP_ATOMIC | Gfp::__GFP_ZERO } else { Gfp::GFP_ATOMIC };
            alloc_exact(0, bytes, gfp, &mut ops);
            line(
                format!("hash {}", t.name),
                t.kernel,
                format!("alloc_large_system_hash: {e} entries x {} bytes (order {})", t.bucketsize, get_order(bytes)),
                "faithful",
            )
        }
        "futex" => {
            let (e, bytes) = futex_table(m);
            alloc_exact(0, bytes, Gfp::GFP_KERNEL, &mut ops);
            line(
                "futex".into(),
                "futex_init() (kernel/futex/core.c)",
                format!("roundup_pow_of_two(256 x {} CPUs) = {e} buckets x 64 bytes", m.cpus),
                "faithful",
            )
        }
        "percpu" => {
            for cpu in 1..m.cpus as usize {
                ops.extend((0..RING_BUFFER_PAGES_PER_CPU).map(|_| RuleOp::Alloc { cpu: 0, order: 0, gfp: RING_GFP }));
                slab_pages(cpu, PERCPU_SLAB_PAGES, &mut ops);
            }
            line(
                "percpu".into(),
                "bringup_nonboot_cpus(): trace_rb_cpu_prepare(), the CPU's kthreads, devices and slabs",
                format!(
                    "({} CPUs - 1) x ({RING_BUFFER_PAGES_PER_CPU} ring buffer + {PERCPU_SLAB_PAGES} slab pages)",
                    m.cpus
                ),
                "faithful (ring buffers); fitted (slabs)",
            )
        }
        "memory_blocks" => {
            let pages = (m.memory_blocks * MEMORY_BLOCK_SLAB_BYTES).div_ceil(PAGE_SIZE);
            ops.extend((0..pages).map(|_| RuleOp::Alloc { cpu: 0, order: 0, gfp: SLAB_GFP }));
            line(
                "memory_blocks".into(),
                "memory_dev_init() -> add_memory_block() (drivers/base/memory.c)",
                format!("{} blocks of 128 MiB x {MEMORY_BLOCK_SLAB_BYTES} bytes of slab", m.memory_blocks),
                "fitted",
            )
        }
        "ftrace_free" => {
            ops.push(RuleOp::FreeFtraceGroup);
            line(
                "ftrace_free".into(),
                "ftrace_free_init_mem() -> ftrace_free_pages() (kernel/trace/ftrace.c)",
                "the last record group, whose records were all in init text".into(),
                "faithful",
            )
        }
        _ => return None,
    };
    Some((ops, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(gib: u64, cpus: u64, nr_kernel_pages: u64) -> BootMachine {
        BootMachine { cpus, nr_kernel_pages, memory_blocks: (gib << 30) / MEMORY_BLOCK_SIZE }
    }

    /// The entries dmesg printed on the peers (1G/1, 4G/2, 16G/4), from
    /// `nr_kernel_pages` within a few percent of the kernel's.
    #[test]
    fn hash_tables_match_the_peers_dmesg() {
        let want: [(u64, u64, [u64; 10]); 3] = [
            (1, 1, [2048, 2048, 512, 16384, 512, 65536, 8192, 8192, 1024, 512]),
            (4, 2, [8192, 8192, 1024, 65536, 2048, 65536, 32768, 32768, 4096, 2048]),
            (16, 4, [32768, 32768, 2048, 262144, 8192, 65536, 131072, 65536, 16384, 8192]),
        ];
        for (gib, cpus, entries) in want {
            let m = machine(gib, cpus, (gib << 30) / PAGE_SIZE * 94 / 100);
            let got: Vec<u64> = hash_tables(&m).iter().map(|&(_, e, _)| e).collect();
            assert_eq!(got, entries, "{gib}G/{cpus}");
        }
        assert_eq!(futex_table(&machine(16, 4, 0)), (1024, 65536));
        assert_eq!(futex_table(&machine(1, 1, 0)), (256, 16384));
    }

    #[test]
    fn ftrace_groups_are_the_220_pages_in_5_groups() {
        assert_eq!(ftrace_groups(), [7, 6, 4, 3, 2]);
        assert_eq!(ftrace_groups().iter().map(|o| 1u64 << o).sum::<u64>(), 220);
    }

    #[test]
    fn slab_mix_adds_up() {
        for pages in [1, 7, EARLY_SLAB_PAGES, PERCPU_SLAB_PAGES] {
            let mut ops = Vec::new();
            slab_pages(1, pages, &mut ops);
            let n: u64 = ops
                .iter()
                .map(|o| match o {
                    RuleOp::Alloc { order, .. } => 1u64 << order,
                    _ => 0,
                })
                .sum();
            assert_eq!(n, pages);
        }
    }
}
