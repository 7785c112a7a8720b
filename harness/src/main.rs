//! `mmlab`: boot an emulated arm64 machine and look at its page allocator
//! through the interfaces Linux offers (/proc files, kmem tracepoints).
//!
//! Errors in what the user asked for print `mmlab: <message>` on stderr and
//! exit with status 2.
#![forbid(unsafe_code)]

mod cli;

use clap::{Parser, Subcommand, ValueEnum};
use mmlab_engine::addr::memparse;
use mmlab_engine::trace::{TraceFormat, install_global};
use mmlab_engine::{Machine, MachineConfig};
use mmlab_harness::workload::RandomWorkload;
use mmlab_harness::{pgtables, procfs};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

/// Emulated Linux memory management on arm64.
#[derive(Parser, Debug)]
#[command(name = "mmlab", version)]
struct Cli {
    /// RAM of the machine, like `mem=` (K/M/G/T suffixes).
    #[arg(long, global = true, value_name = "SIZE", default_value = "4G")]
    mem: String,
    /// Number of CPUs.
    #[arg(long, global = true, value_name = "N", default_value_t = 2)]
    cpus: usize,
    /// A boot parameter or sysctl, repeatable: percpu_pagelist_high_fraction,
    /// min_free_kbytes, pcp.rules (7.2|6.12), lock_stat (0|1),
    /// barrier (native|count|model).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seed of the workload's random stream.
    #[arg(long, global = true, value_name = "S", default_value_t = 1)]
    seed: u64,
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
        /// (its pages stay allocated).
        #[arg(long, value_name = "N")]
        after_ops: Option<u64>,
        /// With `pagetables`: also print the kernel's ptdump
        /// (/sys/kernel/debug/kernel_page_tables).
        #[arg(long)]
        ptdump: bool,
    },
    /// Walk the kernel's translation tables for a virtual address and print
    /// every level's descriptor, decoded.
    Walk {
        /// The virtual address: hex with 0x, or decimal.
        #[arg(value_name = "VA", required_unless_present = "struct_page")]
        va: Option<String>,
        /// Walk a user address space's tables instead (by ASID).
        #[arg(long, value_name = "N", conflicts_with = "struct_page")]
        asid: Option<String>,
        /// Walk to the struct page of this frame (`pfn_to_page()` in the vmemmap).
        #[arg(long, value_name = "PFN", conflicts_with = "va")]
        struct_page: Option<String>,
    },
    /// Print kmem tracepoint events of a seeded random workload.
    Trace {
        /// What to trace.
        #[arg(value_enum)]
        what: TraceWhat,
        /// Operations (allocations plus frees).
        #[arg(long, value_name = "N")]
        ops: u64,
        /// Output: ftrace text or JSON lines.
        #[arg(long, value_enum, default_value = "ftrace")]
        format: FormatArg,
    },
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
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum TraceWhat {
    /// The page allocator's kmem events (mm_page_alloc, mm_page_free, ...).
    Pages,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Ftrace,
    Json,
}

impl From<FormatArg> for TraceFormat {
    fn from(f: FormatArg) -> TraceFormat {
        match f {
            FormatArg::Ftrace => TraceFormat::Ftrace,
            FormatArg::Json => TraceFormat::Json,
        }
    }
}

/// Machine and allocator configuration from the global options.
fn configs(cli: &Cli) -> Result<(MachineConfig, AllocatorConfig), String> {
    let mem_bytes = memparse(&cli.mem).map_err(|e| format!("--mem: {e}"))?;
    let mut mc = MachineConfig { mem_bytes, nr_cpus: cli.cpus, ..Default::default() };
    let mut ac = AllocatorConfig::default();
    for kv in &cli.set {
        cli::apply_set(kv, &mut mc, &mut ac)?;
    }
    Ok((mc, ac))
}

fn boot(mc: MachineConfig) -> Result<Machine, String> {
    Machine::boot(mc).map_err(|e| format!("boot failed: {e}"))
}

fn boot_allocator<'m>(m: &'m Machine, ac: AllocatorConfig) -> Result<PageAllocator<'m>, String> {
    PageAllocator::boot(m, ac).map_err(|e| format!("page allocator boot failed: {e}"))
}

/// Run the seeded workload over every CPU, leaving its pages allocated.
fn run_workload(m: &Machine, pa: &PageAllocator<'_>, ops: u64, seed: u64) -> Result<(), String> {
    let cpus = m.all_cpus().map_err(|e| e.to_string())?;
    let wl = RandomWorkload::new(ops, seed, pa.zone().managed_pages() / 2);
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

fn run(cli: Cli) -> Result<(), String> {
    let (mc, ac) = configs(&cli)?;
    match cli.command {
        Command::Stat { file, after_ops, ptdump } => {
            if ptdump && !matches!(file, StatFile::Pagetables) {
                return Err("--ptdump applies to `stat pagetables` only".to_string());
            }
            let m = boot(mc)?;
            let pa = boot_allocator(&m, ac)?;
            if let Some(n) = after_ops {
                run_workload(&m, &pa, n, cli.seed)?;
            }
            let text = match file {
                StatFile::Buddyinfo => procfs::buddyinfo(&pa),
                StatFile::Zoneinfo => procfs::zoneinfo(&pa),
                StatFile::Pagetypeinfo => procfs::pagetypeinfo(&pa),
                StatFile::Vmstat => procfs::vmstat(&m, &pa),
                StatFile::Costs => procfs::costs(&m),
                StatFile::Pagetables => {
                    let asp = m.kernel_as();
                    let mut s = pgtables::summary(&m, &asp);
                    if ptdump {
                        s.push('\n');
                        s.push_str(&pgtables::ptdump(&m, &asp, &pgtables::kernel_markers(&m)));
                    }
                    s
                }
            };
            write_stdout(&text)
        }
        Command::Walk { va, asid, struct_page } => {
            if let Some(pfn) = struct_page {
                let pfn = pgtables::parse_number("pfn", &pfn)?;
                let m = boot(mc)?;
                return write_stdout(&pgtables::walk_struct_page(&m, pfn)?);
            }
            let va = va.ok_or("walk needs a virtual address or --struct-page PFN")?;
            let va = pgtables::parse_number("virtual address", &va)?;
            if let Some(asid) = asid {
                let asid = pgtables::parse_number("ASID", &asid)?;
                if asid > u64::from(u16::MAX) {
                    return Err(format!("ASID {asid} out of range (0..=65535)"));
                }
                return Err(format!("no user address space with ASID {asid} (the command boots only the kernel's)"));
            }
            pgtables::check_kernel_va(va)?;
            let m = boot(mc)?;
            write_stdout(&pgtables::walk_report(&m, &m.kernel_as(), va))
        }
        Command::Trace { what: TraceWhat::Pages, ops, format } => {
            let m = boot(mc)?;
            let pa = boot_allocator(&m, ac)?;
            let sink = install_global(format.into(), Box::new(BufWriter::new(io::stdout())))
                .map_err(|e| format!("cannot install the trace layer: {e}"))?;
            run_workload(&m, &pa, ops, cli.seed)?;
            match sink.flush() {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
                _ => Ok(()),
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
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
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mmlab: {e}");
            ExitCode::from(2)
        }
    }
}
