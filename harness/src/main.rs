//! `mmlab`: boot an emulated arm64 machine and look at its memory
//! management through the interfaces Linux offers (/proc files, kmem
//! tracepoints, test_vmalloc), compare configurations, and reproduce
//! published results.
//!
//! Errors in what the user asked for print `mmlab: <message>` on stderr and
//! exit with status 2. `test-vmalloc`, `compare` and `reproduce` exit with 1
//! when a test case failed.
#![forbid(unsafe_code)]
// The subcommands' doc comments are clap's help text, written for a
// terminal: `<name>` placeholders there are not HTML.
#![allow(rustdoc::invalid_html_tags)]

use clap::{Parser, Subcommand, ValueEnum};
use mmlab_engine::{Machine, MachineConfig};
use mmlab_harness::cli::MachineDefaults;
use mmlab_harness::cli::OutFormat;
use mmlab_harness::compare::{Format, Metric};
use mmlab_harness::output::trace::{TraceFormat, install_global};
use mmlab_harness::settings::Configs;
use mmlab_harness::stack::Stack;
use mmlab_harness::workload::RandomWorkload;
use mmlab_harness::{cli, pgtables, procfs, test_vmalloc};
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::Vmalloc;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

/// Emulated Linux memory management on arm64.
#[derive(Parser, Debug)]
#[command(name = "mmlab", version)]
struct Cli {
    #[command(flatten)]
    globals: cli::GlobalOpts,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a /proc file of the machine.
    Stat {
        /// Which file.
        #[arg(value_enum)]
        file: StatFile,
        /// First run a seeded random workload of N operations over all CPUs
        /// (its pages stay allocated); N is at most 10^9.
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = cli::parse_ops)]
        after_ops: Option<u64>,
        /// With `pagetables`: also print the kernel's ptdump
        /// (/sys/kernel/debug/kernel_page_tables).
        #[arg(long)]
        ptdump: bool,
    },
    /// Walk the kernel's translation tables (swapper_pg_dir) for a virtual
    /// address and print every level's descriptor, decoded. Exit status 1
    /// when the walk ends in a translation fault (the walk is printed).
    Walk {
        /// The kernel virtual address (TTBR1): hex with 0x, or decimal.
        #[arg(value_name = "VA", required_unless_present = "struct_page", allow_negative_numbers = true)]
        va: Option<String>,
        /// Walk to the struct page of this frame (`pfn_to_page()` in the vmemmap).
        #[arg(long, value_name = "PFN", conflicts_with = "va", allow_negative_numbers = true)]
        struct_page: Option<String>,
    },
    /// Boot the machine and print the per-phase breakdown (memblock, linear
    /// map, kernel image map, vmemmap, memmap init, rodata ro, end of boot,
    /// free into buddy):
    /// measured and modelled time apart, table pages per level, TLBIs by
    /// kind, barriers, and map_mem() on its own with its fixmap operations.
    /// The machine is the one every command boots for the same options:
    /// the linear map is built as Linux 7.2 builds it unless --set
    /// arm64.linear_map=0.
    Boot {
        /// One JSON object instead of the text.
        #[arg(long)]
        json: bool,
    },
    /// Compare a real arm64 kernel's /proc files and page tables (captured
    /// by scripts/arm64-peer/boot.sh into DIR) with the same machine's in
    /// mmlab, field by field: equal, formula-equal, within-spread,
    /// not-modelled, different. The machine (memory, CPUs, options) is the
    /// capture's; more DIRs are more boots of that configuration, for the
    /// boot-to-boot spread. Every file of every DIR is read and checked
    /// before anything boots: a missing, empty, cut or malformed one is an
    /// error naming the file and the line.
    Peer {
        /// The capture directory, then optionally more boots of the same
        /// configuration.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<std::path::PathBuf>,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Trace a workload's tracepoints (every layer: kmem, vmalloc, rcu and
    /// mmlab's own), or replay a real kernel's kmem trace and diff the
    /// allocator's decisions.
    Trace(mmlab_harness::trace::cli::TraceArgs),
    /// Run lib/test_vmalloc.c (Linux 7.2: thirteen cases) on the machine: nr_threads
    /// workers, each on an emulated CPU of its own, sharing one vmalloc.
    /// Times are measured host time of the emulation.
    #[command(name = "test-vmalloc")]
    TestVmalloc {
        /// Module parameters as modprobe takes them: run_test_mask (7; 1 to
        /// 0x1fff, a mask that selects no case is an error), nr_threads (0 =
        /// 1), test_loop_count (1000000; <= 0 is taken as 1, as the module
        /// does), test_repeat_count (1; likewise; loops x repeats at most
        /// 2^31-1), sequential_test_order (0), nr_pages (0 = 1), use_huge (0),
        /// nr_pcpu_objects (35000); mmlab's own: msleep_before_free (0, ms
        /// of emulated sleep before long_busy_list's vfrees),
        /// pcp_sample_interval (0). They override the mode's; each is given
        /// once, with one value.
        #[arg(value_name = "KEY=VALUE")]
        params: Vec<String>,
        /// A mode of test_vmalloc.sh: performance (sequential_test_order=1
        /// test_repeat_count=3), smoke (test_loop_count=10000
        /// test_repeat_count=10), stress (nr_threads=<cpus>
        /// test_repeat_count=20).
        #[arg(long, value_enum)]
        mode: Option<test_vmalloc::Mode>,
        /// One JSON object instead of the module's log lines.
        #[arg(long)]
        json: bool,
    },
    /// Run test_vmalloc cases under a base and one or more new
    /// configurations, interleaved and repeated, and print the A/B table:
    /// means, change with its 95 % CI, (I)/(R), and counters per call.
    Compare(CompareArgs),
    /// Fuzz allocation sequences against the kernel's invariants: seeded
    /// random operations over every CPU (page allocator, vmalloc, vmap,
    /// vm_map_ram, percpu, kvfree_rcu, map_range of a scratch region, with
    /// wrong calls mixed in), checked by an oracle; a violation is shrunk
    /// and written as a replay file.
    /// --mem defaults to 64M and --cpus to 4 here.
    Fuzz(mmlab_harness::fuzz::cli::FuzzArgs),
    /// Run a replay file (as `mmlab fuzz` writes, or hand-written) and
    /// print each operation's result; exit 1 on a violation.
    Replay(mmlab_harness::fuzz::cli::ReplayArgs),
    /// Write the hugetlb sysfs files, in order, as `echo VALUE > FILE`
    /// would, and print for each write the file read back, the time it took
    /// (measured host time, and modelled: grace periods, TLBIs, barriers)
    /// and the counters (HVO, synchronize_rcu, TLBIs, barriers, buddy and
    /// pcp traffic, contiguous-range scans). Pools of `--set hugepages=...`
    /// are grown first, as at boot.
    #[command(after_help = HUGETLB_HELP)]
    Hugetlb {
        /// FILE=VALUE writes, done in order. FILE is a file of
        /// /sys/kernel/mm/hugepages/ (the prefix may be left out):
        /// hugepages-<N>kB/{nr_hugepages, nr_overcommit_hugepages,
        /// demote_size, demote}, or the same with a size as hugepagesz=
        /// takes it (2M/nr_hugepages); or a sysctl of the default size:
        /// vm.nr_hugepages, vm.nr_overcommit_hugepages.
        #[arg(value_name = "FILE=VALUE", required = true)]
        writes: Vec<String>,
        /// One JSON object (every counter) instead of the text.
        #[arg(long)]
        json: bool,
    },
    /// Reproduce a published kernel result and print ours beside it.
    Reproduce {
        #[arg(value_enum)]
        what: ReproduceWhat,
        /// Longer runs (more loops) than the quick default (not for
        /// linear-map, which runs no loops).
        #[arg(long)]
        full: bool,
        /// Draw the figures into FILE-<name>-<figure>.svg beside FILE.svg:
        /// the deterministic model beside the published numbers (the
        /// same picture for the same seed on any host).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<std::path::PathBuf>,
        /// Write one self-contained HTML page: the agreement summary, the
        /// run's provenance, and every reproduction's plots and report
        /// (open it in any browser; nothing is fetched).
        #[arg(long, value_name = "FILE.html")]
        html: Option<std::path::PathBuf>,
        /// One JSON object instead of the text: the run, and per
        /// reproduction its name, whether it failed, its verdicts and its
        /// report.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `mmlab compare`.
#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// test_vmalloc parameters (as for test-vmalloc); a value may be a
    /// comma list, and every combination becomes rows, one per selected
    /// case: `run_test_mask=1 nr_pages=1,16,512 use_huge=0,1`. Each key
    /// once, no empty list element, no two rows that run the same.
    #[arg(value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// The baseline configuration: space-separated --set settings.
    #[arg(long, value_name = "\"KEY=VALUE ...\"", default_value = "")]
    base: String,
    /// A configuration compared with the base (repeatable).
    #[arg(long, value_name = "\"KEY=VALUE ...\"", required_unless_present = "merge")]
    new: Vec<String>,
    /// Kept runs per test and configuration, 2..=10000 (the 95 % interval
    /// needs two).
    #[arg(long, value_name = "N", default_value_t = 10, allow_negative_numbers = true, value_parser = cli::parse_repeat)]
    repeat: usize,
    /// Runs per test and configuration thrown away first, 0..=10000.
    #[arg(long, value_name = "N", default_value_t = 1, allow_negative_numbers = true, value_parser = cli::parse_warmup)]
    warmup: usize,
    /// Which time to compare: measured + modelled, or one of them.
    #[arg(long, value_enum, default_value = "total")]
    metric: Metric,
    /// Counter columns (comma list, or `all`): barrier_pairs, tlbi,
    /// pcp_drains, pcp_drain_pages, pcp_free_pages, buddy_pages,
    /// pcp_refill_pages, zone_lock, zone_lock_hold_ns, buddy_merges, sync_rcu.
    #[arg(long, value_name = "LIST")]
    counters: Option<String>,
    /// Independent seeded blocks instead of --repeat: `A..B` (half-open,
    /// B excluded) or `A..=B`. Per seed, every configuration boots afresh,
    /// runs the warm-up, then one kept run per test, all with that seed;
    /// disjoint seed ranges run as separate jobs merge exactly (--merge).
    #[arg(long, value_name = "A..B", conflicts_with = "repeat")]
    seeds: Option<String>,
    /// Merge shards written by `--seeds ... --format jsonl` and print the
    /// comparison over the union of their seeds (the shards must come from
    /// the same build, settings and tests, with disjoint seeds).
    #[arg(long, value_name = "FILE.jsonl", num_args = 1.., conflicts_with_all = ["params", "base", "new", "seeds", "repeat", "warmup"])]
    merge: Vec<std::path::PathBuf>,
    /// Output format; jsonl writes the samples (a shard) of a --seeds run
    /// or of a merge.
    #[arg(long, value_enum, default_value = "table")]
    format: OutFormat,
    /// Also draw the table as bars with 95 % whiskers into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
}

/// Examples for `mmlab hugetlb --help`.
const HUGETLB_HELP: &str = "\
Sizes on arm64 with 4K pages: hugepages-64kB, hugepages-2048kB, hugepages-32768kB, hugepages-1048576kB.
Values are parsed as the kernel's store functions do (kstrtoul; memparse for demote_size); a bad
file, size or value is an error before anything runs, a write the kernel fails at run time (demote
out of memory) is reported and the next writes still run (exit status 1).

Examples:
  mmlab --mem 8G hugetlb hugepages-2048kB/nr_hugepages=1000 hugepages-2048kB/nr_hugepages=0
  mmlab --set hugetlb_vmemmap.arm64=pause hugetlb 1G/nr_hugepages=2 1G/demote_size=2M 1G/demote=1
  mmlab --set hugetlb.gigantic=v6.11 hugetlb 1G/nr_hugepages=2 1G/nr_hugepages=0
  mmlab hugetlb vm.nr_overcommit_hugepages=64 --json";

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ReproduceWhat {
    /// Barrier batching in vmalloc (seeds §1, the test_vmalloc table).
    BarrierBatching,
    /// contpte vmalloc: TLB entries and misses, and the h:1 cost (seeds §1).
    Contpte,
    /// The pcp-drain regression of huge vmalloc by default (seeds §2).
    PcpDrain,
    /// The hugetlb_vmemmap grace-period regression (per-folio synchronize_rcu,
    /// -34.3 %) and its fix, 1G alloc/free before and after __GFP_COMP, and
    /// batched demote (seeds §4).
    Hvo,
    /// Faster linear map creation: map_mem() per variant, M2 16G to Altra 512G (seeds §3).
    LinearMap,
    /// Every reproduction above, in quick mode unless --full.
    All,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum StatFile {
    Buddyinfo,
    Zoneinfo,
    Pagetypeinfo,
    Vmstat,
    /// The kernel's translation tables: counts per level.
    Pagetables,
    /// Barrier and TLBI counts with their modelled time and cost profile.
    Costs,
    /// /proc/vmallocinfo (with --after-ops: after a seeded vmalloc workload).
    Vmallocinfo,
    /// The Vmalloc and hugetlb (HugePages_*, Hugepagesize, Hugetlb) lines of /proc/meminfo.
    Meminfo,
    /// Every file of /sys/kernel/mm/hugepages/hugepages-*kB/ (as `grep -r .` prints them).
    Hugepages,
    /// Which parts of the machine are emulated boot state (boot.state=real): reservations, CMA, the
    /// kernel image's vmalloc areas.
    BootState,
}

/// Every configuration from the global options, with the machine every
/// command but fuzz defaults to.
fn all_configs(cli: &Cli) -> Result<Configs, String> {
    cli.globals.configs(MachineDefaults::MACHINE)
}

/// `hugetlb`: check every write, boot, write; returns whether a write
/// failed.
fn run_hugetlb(cli: &Cli, writes: &[String], json: bool) -> Result<bool, String> {
    use mmlab_harness::hugetlb;
    cli.globals.refuse_seed("hugetlb")?;
    let c = all_configs(cli)?;
    let writes = hugetlb::parse_writes(writes, c.hugetlb.default_hugepagesz).map_err(|e| e.to_string())?;
    let report = hugetlb::run(&c, &writes)?;
    let run = cli.globals.record(&c);
    let text = if json {
        run.insert_into(&hugetlb::render::json(&report))
    } else {
        run.header() + &hugetlb::render::text(&report)
    };
    write_stdout(&text)?;
    Ok(report.any_failed())
}

/// Run the seeded workload over every CPU, leaving its pages allocated.
fn run_workload(m: &Machine, pa: &PageAllocator<'_>, ops: u64, seed: u64) -> Result<(), String> {
    let cpus = m.all_cpus().map_err(|e| e.to_string())?;
    let wl = RandomWorkload::new(ops, seed, pa.managed_pages() / 2);
    wl.run(pa, &cpus, |_| {});
    Ok(())
}

/// Write to stdout; a closed pipe (`| head`) ends output quietly.
fn write_stdout(s: &str) -> Result<(), String> {
    let mut out = io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(()),
    }
}

/// `test-vmalloc`; returns whether a test case failed.
fn run_test_vmalloc(cli: &Cli, args: &[String], mode: Option<test_vmalloc::Mode>, json: bool) -> Result<bool, String> {
    let g = &cli.globals;
    let (params, nr_cpus) = test_vmalloc::resolve(args, mode, g.cpus)?;
    for n in params.normalisation_notes() {
        eprintln!("mmlab: note: {n}");
    }
    let mut c = all_configs(cli)?;
    c.machine.nr_cpus = nr_cpus;
    let stack = Stack::boot(&c)?;
    let pa = stack.allocator()?;
    let vm = stack.vmalloc(&pa);
    let report = test_vmalloc::run(stack.machine(), &pa, &vm, &params, g.seed())?;
    let run = g.record(&c);
    let text = if json {
        run.insert_into(&test_vmalloc::render_json(&report, &g.set))
    } else {
        run.header() + &test_vmalloc::render_text(&report, &g.set)
    };
    write_stdout(&text)?;
    Ok(report.any_failed())
}

/// `compare`; returns whether a test case failed.
fn run_compare(cli: &Cli, a: &CompareArgs) -> Result<bool, String> {
    use mmlab_harness::compare::{self, Spec, Variant};
    use mmlab_harness::shard;
    if let Some(path) = &a.plot {
        if matches!(a.format, OutFormat::Jsonl) {
            return Err("--plot draws the table; a jsonl shard has none (plot the --merge)".to_string());
        }
        cli::check_writable("--plot", path)?;
    }
    let metric = a.metric;
    let counters = match a.counters.as_deref() {
        None => Vec::new(),
        Some("all") => compare::COUNTERS.to_vec(),
        Some(list) => list.split(',').map(|c| compare::counter(c.trim())).collect::<Result<Vec<_>, _>>()?,
    };
    let mut run_record = None;
    let outcome = if a.merge.is_empty() {
        let g = &cli.globals;
        if a.seeds.is_some() && g.seed.is_some() && g.config.is_none() {
            return Err("--seed: --seeds A..B gives every block its own seed".to_string());
        }
        let rows = compare::rows_from_args(&a.params)?;
        let threads = rows.iter().map(|r| r.params.threads()).max().unwrap_or(1);
        let common = g.configs(MachineDefaults { cpus: threads.max(2), ..MachineDefaults::MACHINE })?;
        run_record = Some(g.record(&common));
        let mut variants = vec![Variant::parse("base", &a.base)];
        for (i, n) in a.new.iter().enumerate() {
            let label = if a.new.len() == 1 { "new".to_string() } else { format!("new{}", i + 1) };
            variants.push(Variant::parse(&label, n));
        }
        let spec = Spec {
            machine: MachineConfig {
                mem_bytes: common.machine.mem_bytes,
                mem_banks: common.machine.mem_banks,
                nr_cpus: common.machine.nr_cpus,
                ..Default::default()
            },
            common: g.set.clone(),
            variants,
            rows,
            repeats: a.repeat,
            warmup: a.warmup,
            seed: g.seed(),
            metric,
        };
        spec.check_settings()?;
        let progress = |p: &str| eprintln!("mmlab compare: {p}");
        match &a.seeds {
            Some(range) => compare::run_seeds(spec, &cli::parse_seed_range(range)?, progress)?,
            None if matches!(a.format, OutFormat::Jsonl) => {
                return Err("--format jsonl writes the samples of a --seeds run: give --seeds A..B".to_string());
            }
            None => compare::run(spec, progress)?,
        }
    } else {
        if cli.globals.machine_given() || cli.globals.seed.is_some() {
            return Err(
                "--merge takes the settings and seeds from the shards; --set, --cpus, --mem and --seed do not apply"
                    .to_string(),
            );
        }
        let mut shards = Vec::new();
        for path in &a.merge {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| format!("--merge: reading {name}: {e}"))?;
            shards.push((name.clone(), shard::read(&name, &text)?));
            // The merge records the run of its first shard's job: the
            // settings every shard shares.
            run_record = run_record.or_else(|| mmlab_harness::provenance::RunRecord::of_lines(&text));
        }
        shard::merge(&shards, metric)?
    };
    let format: Format = match a.format {
        OutFormat::Jsonl => {
            let lines = shard::to_jsonl(&outcome)?;
            // The header line records the run; the samples follow it.
            let lines = match (&run_record, lines.split_once('\n')) {
                (Some(r), Some((head, rest))) => format!("{}\n{rest}", r.insert_after_first(head)),
                _ => lines,
            };
            return write_stdout(&lines).map(|()| outcome.any_failed());
        }
        OutFormat::Report(f) => f,
    };
    if let Some(n) = outcome.rows.iter().flat_map(|r| r.samples.iter().map(Vec::len)).min()
        && n < 2
    {
        return Err(format!(
            "{n} sample per side: the 95 % interval needs at least 2 (give more seeds, or write --format jsonl and --merge the shards)"
        ));
    }
    let table = compare::render(&outcome, format, &counters);
    let table = match (&run_record, format) {
        (Some(r), Format::Json) => r.insert_into(&table),
        (Some(r), Format::Table) => r.header() + &table,
        _ => table,
    };
    write_stdout(&table)?;
    if let Some(path) = &a.plot {
        write_file(path, &compare::plot(&outcome, "mmlab compare"))?;
    }
    Ok(outcome.any_failed())
}

/// `reproduce`; returns whether a test case failed.
///
/// A reproduction boots the published configurations its report names, not
/// the machine of the global options: those stay at their defaults (the
/// run header and record show them, with `--seed`), and a `--config`
/// record re-runs only if it holds the defaults.
/// Where `reproduce` writes besides standard output.
struct Outputs<'a> {
    plot: Option<&'a std::path::Path>,
    html: Option<&'a std::path::Path>,
    json: bool,
}

fn run_reproduce(cli: &Cli, what: ReproduceWhat, full: bool, out: Outputs<'_>) -> Result<bool, String> {
    let Outputs { plot, html, json } = out;
    use mmlab_harness::reproduce::{self, Length, summary};
    const NOT_HERE: &str = "reproduce runs the published configurations; --set, --cpus and --mem do not apply";
    if cli.globals.config.is_none() && cli.globals.machine_given() {
        return Err(NOT_HERE.to_string());
    }
    let c = all_configs(cli)?;
    let defaults = cli::GlobalOpts::default().configs(MachineDefaults::MACHINE)?;
    if mmlab_harness::provenance::config_json(&c) != mmlab_harness::provenance::config_json(&defaults) {
        return Err(format!("--config: the record has another machine or settings; {NOT_HERE}"));
    }
    let names: Vec<&'static str> = match what {
        ReproduceWhat::BarrierBatching => vec!["barrier-batching"],
        ReproduceWhat::Contpte => vec!["contpte"],
        ReproduceWhat::PcpDrain => vec!["pcp-drain"],
        ReproduceWhat::Hvo => vec!["hvo"],
        ReproduceWhat::LinearMap => vec!["linear-map"],
        ReproduceWhat::All => reproduce::ALL.to_vec(),
    };
    if matches!(what, ReproduceWhat::LinearMap) {
        // map_mem() is modelled from counts: no loops, no random numbers.
        if full {
            return Err("--full: linear-map runs no loops (map_mem() is modelled from its counts)".to_string());
        }
        cli.globals.refuse_seed("reproduce linear-map")?;
    }
    if let Some(path) = plot {
        cli::check_dir_writable("--plot", path)?;
    }
    if let Some(path) = html {
        cli::check_writable("--html", path)?;
    }
    let len = if full { Length::FULL } else { Length::QUICK };
    let mode = if full { "full" } else { "quick" };
    let run = cli.globals.record(&c);
    if !json {
        // The header names the global options, as every text output's
        // does; the machines are each reproduction's own.
        let header = run.header();
        write_stdout(&format!(
            "{} {mode}; machines: each reproduction's own, named in its report\n",
            header.trim_end()
        ))?;
    }
    let t0 = std::time::Instant::now();
    let mut failed = false;
    let mut done = Vec::new();
    for (i, &name) in names.iter().enumerate() {
        let r = reproduce::by_name(name, len, cli.globals.seed())?;
        failed |= r.failed;
        if !json {
            write_stdout(&format!("{}{}", if i > 0 { "\n" } else { "" }, r.text))?;
        }
        if let Some(path) = plot {
            for (suffix, svg) in &r.plots {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("mmlab");
                let file = path.with_file_name(format!("{stem}-{name}-{suffix}.svg"));
                write_file(&file, svg)?;
                eprintln!("mmlab reproduce: wrote {}", file.display());
            }
        }
        if json || html.is_some() {
            done.push((name, r));
        }
    }
    let host_seconds = t0.elapsed().as_secs_f64();
    if let Some(path) = html {
        write_file(path, &reproduce::html::report(&run, mode, host_seconds, &done))?;
        eprintln!("mmlab reproduce: wrote {}", path.display());
    }
    if json {
        let report = summary::Report {
            mode,
            host_seconds,
            reproductions: done.iter().map(|(name, r)| summary::Entry::new(name, &r.data, r.failed, &r.text)).collect(),
        };
        write_stdout(&run.insert_into(&mmlab_harness::output::json::to_line(&report)))?;
    } else {
        write_stdout(&format!(
            "\n# {} in {host_seconds:.1} s measured host time on {}\n",
            names.join(", "),
            std::env::consts::ARCH
        ))?;
    }
    Ok(failed)
}

/// `fuzz`; returns whether a violation was found. The machine defaults
/// to 64M and 4 CPUs (small enough to run out of memory often).
fn run_fuzz(cli: &Cli, a: &mmlab_harness::fuzz::cli::FuzzArgs) -> Result<bool, String> {
    mmlab_harness::fuzz::cli::fuzz(&cli.globals, a)
}

/// `replay`; the machine and settings come from the file.
fn run_replay(cli: &Cli, a: &mmlab_harness::fuzz::cli::ReplayArgs) -> Result<bool, String> {
    if cli.globals.machine_given() || cli.globals.seed.is_some() {
        return Err(
            "replay takes the machine, seed and settings from the file; --set, --cpus, --mem and --seed do not apply"
                .into(),
        );
    }
    // The whole file is checked before the trace layer or the machine starts.
    let r = mmlab_harness::fuzz::cli::load_replay(&a.file)?;
    if a.trace {
        let sink = install_global(TraceFormat::Ftrace, Box::new(BufWriter::new(io::stdout())))
            .map_err(|e| format!("cannot install the trace layer: {e}"))?;
        let r = mmlab_harness::fuzz::cli::run_replay(&r, io::stderr().lock());
        if let Err(e) = sink.flush()
            && e.kind() != io::ErrorKind::BrokenPipe
        {
            return Err(format!("writing output: {e}"));
        }
        return r;
    }
    mmlab_harness::fuzz::cli::run_replay(&r, io::stdout().lock())
}

/// Write a file, with the path in the error.
fn write_file(path: &std::path::Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn run(cli: &Cli) -> Result<bool, String> {
    let no_hugetlb = match &cli.command {
        Command::TestVmalloc { .. } => Some("test-vmalloc"),
        Command::Compare(_) => Some("compare"),
        // Threads share no hugetlb: each runs an executor of its own.
        Command::Fuzz(a) if a.threads > 1 => Some("fuzz --threads"),
        Command::Boot { .. } => Some("boot"),
        Command::Walk { .. } => Some("walk"),
        _ => None,
    };
    if let Some(what) = no_hugetlb {
        cli.globals.refuse_hugetlb(what)?;
    }
    match &cli.command {
        Command::Compare(a) => run_compare(cli, a),
        Command::Reproduce { what, full, plot, html, json } => {
            run_reproduce(cli, *what, *full, Outputs { plot: plot.as_deref(), html: html.as_deref(), json: *json })
        }
        Command::Hugetlb { writes, json } => run_hugetlb(cli, writes, *json),
        Command::Fuzz(a) => run_fuzz(cli, a),
        Command::Replay(a) => run_replay(cli, a),
        Command::TestVmalloc { params, mode, json } => run_test_vmalloc(cli, params, *mode, *json),
        &Command::Stat { file, after_ops, ptdump } => run_stat(cli, file, after_ops, ptdump),
        &Command::Boot { json } => run_boot(cli, json),
        Command::Peer { dirs, json } => {
            use mmlab_harness::peer;
            let g = &cli.globals;
            // Every capture is read and checked whole before anything boots.
            let p = peer::prepare(dirs, g.mem.as_deref(), g.cpus, &g.set)?;
            if let Some(r) = &g.recorded {
                r.check(&p.configs)?;
            }
            let mut report = p.compare()?;
            report.test_vmalloc = p.test_vmalloc(g.seed())?;
            let run = mmlab_harness::provenance::RunRecord::new(&p.configs, &p.sets, g.seed());
            let text = if *json {
                run.insert_into(&mmlab_harness::output::json::to_line(&report))
            } else {
                run.header() + &report.to_string()
            };
            write_stdout(&text).map(|()| false)
        }
        Command::Walk { va, struct_page } => {
            cli.globals.refuse_seed("walk")?;
            let c = all_configs(cli)?;
            let header = cli.globals.record(&c).header();
            let (text, faulted) = if let Some(pfn) = struct_page {
                let pfn = pgtables::parse_number("pfn", pfn)?;
                let stack = Stack::boot(&c)?;
                pgtables::walk_struct_page(stack.machine(), pfn)?
            } else {
                let va = va.as_deref().ok_or("walk needs a virtual address or --struct-page PFN")?;
                let va = pgtables::parse_number("virtual address", va)?;
                pgtables::check_kernel_va(va, c.machine.va_layout())?;
                let stack = Stack::boot(&c)?;
                let m = stack.machine();
                pgtables::walk_report(m, &m.kernel_as(), va)
            };
            write_stdout(&(header + &text))?;
            if faulted {
                eprintln!("mmlab: walk: translation fault");
            }
            Ok(faulted)
        }
        Command::Trace(a) => mmlab_harness::trace::cli::run(&cli.globals, a),
    }
}

/// `boot`: boot the machine, bring the page allocator up as the last
/// phase, print the breakdown.
fn run_boot(cli: &Cli, json: bool) -> Result<bool, String> {
    use mmlab_harness::output::boot::BootReport;
    cli.globals.refuse_seed("boot")?;
    let c = all_configs(cli)?;
    let stack = Stack::boot(&c)?;
    let m = stack.machine();
    let (pa, free) =
        m.measure_phase("free into buddy", "memblock_free_all(), deferred_init_memmap(); the boot's work", || {
            stack.allocator()
        });
    let pa = pa?;
    let report = BootReport::collect(m, &pa, &free);
    let run = cli.globals.record(&c);
    let text = if json {
        run.insert_into(&mmlab_harness::output::json::to_line(&report))
    } else {
        run.header() + &report.render()
    };
    write_stdout(&text).map(|()| false)
}

/// `stat FILE`: boot, run the seeded workload of `--after-ops` (the
/// vmalloc one for vmallocinfo and meminfo, the page one otherwise), print
/// the file.
fn run_stat(cli: &Cli, file: StatFile, after_ops: Option<u64>, ptdump: bool) -> Result<bool, String> {
    let c = all_configs(cli)?;
    if ptdump && !matches!(file, StatFile::Pagetables) {
        return Err("--ptdump applies to `stat pagetables` only".to_string());
    }
    if after_ops.is_some() && matches!(file, StatFile::BootState) {
        return Err("--after-ops does not apply to `stat boot-state` (it reports what the boot left)".to_string());
    }
    if after_ops.is_none() {
        cli.globals.refuse_seed("stat without --after-ops")?;
    }
    // The /proc and sysfs files keep the kernel's format: the run's header
    // goes to stderr.
    eprint!("{}", cli.globals.record(&c).header());
    let stack = Stack::boot(&c)?;
    let m = stack.machine();
    if !matches!(file, StatFile::BootState) {
        // The /proc file keeps the kernel's layout; say on stderr what
        // of it is emulated boot state.
        eprintln!("{}", mmlab_harness::output::boot_state::note(m));
    }
    let pa = stack.allocator()?;
    // vmalloc_init() and the boot's vmalloc areas, then the boot-time pools
    // (hugepages=), as hugetlb_init grows them.
    let vm = stack.vmalloc(&pa);
    let (ht, _) = stack.hugetlb(&pa)?;
    let vmalloc_file = |print: fn(&Vmalloc<'_, '_>) -> String| -> Result<String, String> {
        if let Some(n) = after_ops {
            vmalloc_workload(m, &vm, n, cli.globals.seed())?;
        }
        Ok(print(&vm))
    };
    let page_workload = || match after_ops {
        Some(n) => run_workload(m, &pa, n, cli.globals.seed()),
        None => Ok(()),
    };
    let text = match file {
        StatFile::Vmallocinfo => vmalloc_file(|vm| vm.vmallocinfo())?,
        StatFile::Meminfo => {
            if let Some(n) = after_ops {
                vmalloc_workload(m, &vm, n, cli.globals.seed())?;
            }
            procfs::Meminfo::collect(&pa, vm.meminfo_counts(), ht.meminfo()).to_string()
        }
        StatFile::Hugepages => {
            page_workload()?;
            mmlab_hugetlb::sysfs::sysfs_listing(&ht.sysfs())
        }
        StatFile::Buddyinfo => page_workload().map(|()| procfs::buddyinfo(&pa))?,
        StatFile::Zoneinfo => {
            page_workload()?;
            let hugetlb_pages = ht.meminfo().hugetlb_kb / (mmlab_engine::PAGE_SIZE >> 10);
            let nr_vmalloc = vm.meminfo_counts().nr_vmalloc;
            procfs::zoneinfo_with(&pa, &procfs::Vmstat::collect(&m.vm_events(), &pa, nr_vmalloc, hugetlb_pages))
        }
        StatFile::Pagetypeinfo => page_workload().map(|()| procfs::pagetypeinfo(&pa))?,
        StatFile::Vmstat => {
            page_workload()?;
            let hugetlb_pages = ht.meminfo().hugetlb_kb / (mmlab_engine::PAGE_SIZE >> 10);
            procfs::Vmstat::collect(&m.vm_events(), &pa, vm.meminfo_counts().nr_vmalloc, hugetlb_pages).to_string()
        }
        StatFile::Costs => page_workload().map(|()| procfs::costs(m))?,
        StatFile::BootState => mmlab_harness::output::boot_state::render(m, &pa, &vm),
        StatFile::Pagetables => {
            page_workload()?;
            let asp = m.kernel_as();
            let mut s = pgtables::summary(m, &asp);
            if ptdump {
                s.push('\n');
                s.push_str(&mmlab_engine::arch::arm64::pgtable::ptdump::ptdump(
                    m,
                    &asp,
                    &mmlab_engine::arch::arm64::pgtable::ptdump::kernel_markers(m.va_layout(), m.fixmap_layout()),
                ));
            }
            s
        }
    };
    write_stdout(&text).map(|()| false)
}

fn main() -> ExitCode {
    let mut cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            if !e.use_stderr() {
                // --help, --version
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let msg = e.render().to_string();
            eprint!("mmlab: {}", msg.strip_prefix("error: ").unwrap_or(&msg));
            return ExitCode::from(2);
        }
    };
    cli.globals = match std::mem::take(&mut cli.globals).load_config() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("mmlab: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&cli) {
        Ok(false) => ExitCode::SUCCESS,
        Ok(true) => ExitCode::from(1),
        Err(e) => {
            eprintln!("mmlab: {e}");
            ExitCode::from(2)
        }
    }
}

/// A seeded vmalloc workload for `stat vmallocinfo|meminfo --after-ops N`:
/// vmalloc 1..=100 pages or vfree a random live area (xoshiro256**), leaving
/// the live ones allocated like a running system.
fn vmalloc_workload(m: &Machine, vm: &mmlab_vmalloc::Vmalloc<'_, '_>, ops: u64, seed: u64) -> Result<(), String> {
    let cpu = m.cpu(0).map_err(|e| e.to_string())?;
    let mut rng = mmlab_engine::rng::Xoshiro256StarStar::seed_from_u64(seed);
    let mut live: Vec<u64> = Vec::new();
    for _ in 0..ops {
        if live.is_empty() || rng.chance(3, 5) {
            let pages = 1 + rng.below(100);
            match vm.vmalloc(&cpu, pages * mmlab_engine::PAGE_SIZE) {
                Ok(a) => live.push(a),
                Err(e) => return Err(e.to_string()),
            }
        } else {
            let i = rng.below(live.len() as u64) as usize;
            vm.vfree(&cpu, live.swap_remove(i)).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
