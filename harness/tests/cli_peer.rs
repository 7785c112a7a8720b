//! `mmlab peer` on captures that are cut or malformed: each is an error
//! (exit status 2) naming the file and the line, never a partial
//! comparison. The captures are the committed 1G-1cpu one
//! (`tests/data/arm64-peer/`), copied into a temporary directory and cut or
//! edited there.

mod common;
use common::{mmlab_command, output};
use std::path::{Path, PathBuf};

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/arm64-peer").join(name)
}

/// A copy of the shipped 1G-1cpu capture in a directory of its own.
struct Copy(PathBuf);

impl Copy {
    fn new(test: &str) -> Copy {
        Copy::of("1G-1cpu", test)
    }

    /// A copy of the shipped capture `capture`.
    fn of(capture: &str, test: &str) -> Copy {
        let d = std::env::temp_dir().join(format!("mmlab-cli-peer-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for e in std::fs::read_dir(shipped(capture)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
        }
        Copy(d)
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.0.join(file)).unwrap()
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.0.join(file), text).unwrap();
    }

    /// Keep the first `n` lines of `file`.
    fn keep_lines(&self, file: &str, n: usize) {
        let t: String = self.read(file).lines().take(n).map(|l| format!("{l}\n")).collect();
        self.write(file, &t);
    }

    /// `mmlab peer` on the copy: exit 2, nothing on stdout, stderr naming
    /// the file (and `needles`).
    #[track_caller]
    fn refused(&self, file: &str, needles: &[&str]) -> String {
        let (code, stdout, stderr) = output(mmlab_command().arg("peer").arg(&self.0));
        assert_eq!(code, Some(2), "stderr: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        let path = self.0.join(file).display().to_string();
        assert!(stderr.contains(&path), "{path} not in {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{n:?} not in {stderr}");
        }
        stderr
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The line number (1-based) of the first line of `text` containing `s`.
fn line_of(text: &str, s: &str) -> usize {
    text.lines().position(|l| l.contains(s)).unwrap() + 1
}

#[test]
fn a_truncated_zoneinfo_names_where_it_ends() {
    let c = Copy::new("zoneinfo-lines");
    // Cut after the DMA zone's pagesets, before its last lines.
    let zi = c.read("proc_zoneinfo");
    let cut = line_of(&zi, "node_unreclaimable");
    c.keep_lines("proc_zoneinfo", cut - 1);
    c.refused("proc_zoneinfo", &[&format!("line {cut}: zone DMA (from line 1) ends without its `start_pfn` line")]);
    // Cut between two zones: the zones Linux 7.2 prints are missing.
    let c = Copy::new("zoneinfo-zones");
    let dma32 = line_of(&zi, "zone    DMA32");
    c.keep_lines("proc_zoneinfo", dma32 - 1);
    c.refused("proc_zoneinfo", &["the zones end with DMA", "DMA, DMA32, Normal, Movable, Device"]);
    // Cut in the middle of a line.
    let c = Copy::new("zoneinfo-bytes");
    c.write("proc_zoneinfo", &zi[..zi.len() / 2]);
    c.refused("proc_zoneinfo", &["the last line is cut (no newline at the end)"]);
}

#[test]
fn pages_free_minus_5_is_not_a_number() {
    let c = Copy::new("pages-free");
    let zi = c.read("proc_zoneinfo");
    let n = line_of(&zi, "pages free");
    let bad = zi.replacen(zi.lines().nth(n - 1).unwrap(), "  pages free     -5", 1);
    c.write("proc_zoneinfo", &bad);
    c.refused("proc_zoneinfo", &[&format!("line {n}: `-5` is not a number")]);
}

#[test]
fn garbage_buddyinfo() {
    let c = Copy::new("buddyinfo");
    c.write("proc_buddyinfo", "\u{1}\u{7f}garbage \u{fffd} 12\n");
    c.refused("proc_buddyinfo", &["line 1: not `Node N, zone NAME ...`"]);
    let c = Copy::new("buddyinfo-short");
    c.write("proc_buddyinfo", "Node 0, zone      DMA      1      2      3\n");
    c.refused("proc_buddyinfo", &["line 1: 3 free counts; Linux 7.2 prints 11"]);
}

/// A file cut at a line boundary lacks zones zoneinfo lists, or the end
/// of boot: each is named.
#[test]
fn files_cut_at_a_line_boundary() {
    let c = Copy::new("buddyinfo-cut");
    c.write("proc_buddyinfo", "");
    c.refused("proc_buddyinfo", &["empty"]);
    let c = Copy::new("pagetypeinfo-cut");
    let pt = c.read("proc_pagetypeinfo");
    c.keep_lines("proc_pagetypeinfo", line_of(&pt, "Number of blocks type") - 1);
    c.refused("proc_pagetypeinfo", &["no `Number of blocks type` table"]);
    let c = Copy::new("dmesg-cut");
    c.keep_lines("dmesg", 50);
    c.refused("dmesg", &["line 50: no `Freeing unused kernel memory:` line"]);
}

#[test]
fn a_buddyinfo_without_a_populated_zone() {
    // 4G: DMA and Normal are populated; a buddyinfo with DMA only was cut.
    let c = Copy::new("buddyinfo-zone");
    for e in std::fs::read_dir(shipped("4G-2cpu")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), c.0.join(e.file_name())).unwrap();
    }
    c.keep_lines("proc_buddyinfo", 1);
    c.refused("proc_buddyinfo", &["no line for zone Normal, which zoneinfo lists as populated"]);
}

#[test]
fn a_missing_kernel_txt() {
    let c = Copy::new("kernel-txt");
    std::fs::remove_file(c.0.join("kernel.txt")).unwrap();
    c.refused("kernel.txt", &["missing"]);
    let c = Copy::new("kernel-txt-qemu");
    c.write("kernel.txt", "linux-image-7.2.13+deb14-arm64\n");
    c.refused("kernel.txt", &["no `qemu-system-aarch64 ...` line"]);
}

#[test]
fn a_vmstat_value_above_u64() {
    let c = Copy::new("vmstat-u64");
    let vs = c.read("proc_vmstat");
    let n = line_of(&vs, "pgfree ");
    c.write("proc_vmstat", &vs.replacen(vs.lines().nth(n - 1).unwrap(), "pgfree 18446744073709551616", 1));
    c.refused("proc_vmstat", &[&format!("line {n}: `18446744073709551616` does not fit in 64 bits")]);
}

#[test]
fn a_vmstat_cut_at_a_line_boundary() {
    let c = Copy::new("vmstat-cut");
    c.keep_lines("proc_vmstat", 100);
    let next = c.read("proc_vmstat").lines().count();
    assert_eq!(next, 100);
    c.refused("proc_vmstat", &["line 100: the file ends here; Linux 7.2 prints `"]);
}

#[test]
fn empty_files() {
    for file in [
        "kernel.txt",
        "proc_cmdline",
        "dmesg",
        "proc_meminfo",
        "proc_vmstat",
        "proc_zoneinfo",
        "proc_buddyinfo",
        "proc_pagetypeinfo",
        "proc_vmallocinfo",
        "kernel_page_tables",
        "pgtable_pages",
        // Not compared, but boot.sh writes them (and refuses them empty):
        // an empty one is a capture cut short.
        "proc_version",
        "proc_sys_vm_min_free_kbytes",
        "proc_sys_vm_lowmem_reserve_ratio",
        "proc_sys_vm_percpu_pagelist_high_fraction",
        "sys_kernel_mm_hugepages",
    ] {
        let c = Copy::new(&format!("empty-{file}"));
        c.write(file, "");
        c.refused(file, &["empty (the capture was cut before this file?)"]);
    }
    // test_vmalloc is optional, but an empty one is cut.
    let c = Copy::of("4G-2cpu", "empty-test-vmalloc");
    c.write("test_vmalloc", "");
    c.refused("test_vmalloc", &["empty (the capture was cut before this file?)"]);
}

/// The files that are not compared are checked in their format, and
/// proc_version against kernel.txt.
#[test]
fn files_not_compared_are_checked_too() {
    let c = Copy::new("proc-version");
    let v = c.read("proc_version");
    c.write("proc_version", &v.replace("7.2.13+deb14", "7.2.12+deb14"));
    c.refused(
        "proc_version",
        &["line 1: kernel 7.2.12+deb14-arm64, but kernel.txt says linux-image-7.2.13+deb14-arm64 (files of two captures?)"],
    );
    let c = Copy::new("lowmem");
    c.write("proc_sys_vm_lowmem_reserve_ratio", "256\t256\t32\t0\n");
    c.refused("proc_sys_vm_lowmem_reserve_ratio", &["line 1: 4 values; the kernel prints one per zone, 5"]);
    let c = Copy::new("fraction");
    c.write("proc_sys_vm_percpu_pagelist_high_fraction", "5\n");
    c.refused("proc_sys_vm_percpu_pagelist_high_fraction", &["line 1: `5`: the sysctl takes 0 or 8 and above"]);
    let c = Copy::new("min-free");
    c.write("proc_sys_vm_min_free_kbytes", "22528\n22528\n");
    c.refused("proc_sys_vm_min_free_kbytes", &["line 2: 2 lines; the kernel prints one"]);
    let c = Copy::new("hugepages");
    let h = c.read("sys_kernel_mm_hugepages");
    let n = line_of(&h, "hugepages-2048kB/nr_hugepages ");
    c.write(
        "sys_kernel_mm_hugepages",
        &h.replace("hugepages-2048kB/nr_hugepages 0", "hugepages-2048kB/nr_hugepages -5"),
    );
    c.refused("sys_kernel_mm_hugepages", &[&format!("line {n}: `-5` is not a number")]);
}

/// kernel.txt's qemu line: each flag once, a size and a CPU count mmlab boots.
#[test]
fn kernel_txt_flags_are_checked() {
    for (test, from, to, needle) in [
        ("m-twice", "-m 1G", "-m 1G -m 2G", "line 2: `-m` given twice"),
        ("m-banana", "-m 1G", "-m banana", "line 2: -m banana: invalid size \"banana\""),
        ("smp-999", "-smp 1", "-smp 999", "line 2: -smp 999: mmlab emulates 1 to 256 CPUs"),
        ("smp-none", "-smp 1 -m 1G -nic none", "-m 1G -nic none -smp", "line 2: `-smp` without a value"),
    ] {
        let c = Copy::new(test);
        let k = c.read("kernel.txt");
        assert!(k.contains(from), "{k}");
        c.write("kernel.txt", &k.replacen(from, to, 1));
        c.refused("kernel.txt", &[needle]);
    }
}

/// A test_vmalloc capture is read and its cases' parameters checked
/// before anything boots: a cut file, and a case mmlab cannot run on the
/// capture's machine, are refused naming the line.
#[test]
fn a_bad_test_vmalloc_capture() {
    let tv = std::fs::read_to_string(shipped("4G-2cpu").join("test_vmalloc")).unwrap();
    let c = Copy::of("4G-2cpu", "test-vmalloc-cut");
    c.keep_lines("test_vmalloc", 100);
    let case = tv.lines().take(100).enumerate().filter(|(_, l)| l.starts_with("case ")).last().unwrap().0 + 1;
    c.refused("test_vmalloc", &[&format!("line 100: the case of line {case} has no `end` (the boot was cut short?)")]);
    let c = Copy::of("4G-2cpu", "test-vmalloc-bytes");
    c.write("test_vmalloc", &tv[..3000]);
    c.refused("test_vmalloc", &["the last line is cut (no newline at the end)"]);
    // The 1G capture has one CPU; the 4G capture's cases need two.
    let c = Copy::new("test-vmalloc-cpus");
    c.write("test_vmalloc", &tv);
    let n = line_of(&tv, "nr_threads=2");
    c.refused(
        "test_vmalloc",
        &[&format!("line {n}: nr_threads=2 needs 2 CPUs (each worker runs on an emulated CPU of its own); kernel.txt says -smp 1")],
    );
    let c = Copy::of("4G-2cpu", "test-vmalloc-param");
    c.write("test_vmalloc", &tv.replacen("test_loop_count=10000", "test_loop_count=1,,2", 1));
    let n = line_of(&tv, "test_loop_count=10000");
    c.refused("test_vmalloc", &[&format!("line {n}: test_loop_count=1,,2: test_vmalloc takes one value")]);
}

#[test]
fn a_cut_page_table_dump() {
    let c = Copy::new("ptdump");
    c.keep_lines("kernel_page_tables", 30);
    c.refused("kernel_page_tables", &["line 30: the dump ends before the top of the address space"]);
    let c = Copy::new("pgtable-pages");
    c.keep_lines("pgtable_pages", 6);
    c.refused("pgtable_pages", &["no `text:` line"]);
}

#[test]
fn another_machine_than_the_captures_is_refused() {
    let (code, _, stderr) = output(mmlab_command().args(["--mem", "4G", "peer"]).arg(shipped("1G-1cpu")));
    assert_eq!(code, Some(2));
    assert!(stderr.contains("is a capture of -m 1G -smp 1"), "{stderr}");
}

/// The whole capture is compared on the capture's machine (1G, 1 CPU,
/// taken from kernel.txt) and every file has its section.
#[test]
fn a_whole_capture_is_compared() {
    let (code, stdout, stderr) = output(mmlab_command().arg("peer").arg(shipped("1G-1cpu")));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("# mmlab ") && stdout.contains(" mem=1G cpus=1 "), "{stdout}");
    for file in [
        "proc_meminfo",
        "proc_vmstat",
        "proc_zoneinfo",
        "proc_buddyinfo",
        "proc_pagetypeinfo",
        "proc_vmallocinfo",
        "kernel_page_tables",
    ] {
        assert!(stdout.contains(&format!("\n== {file}: ")), "{file} in {stdout}");
    }
    assert!(stdout.contains("\n# pgtable_pages (the real kernel's table pages, counted by the ptdump module): pgd 1 p4d 0 pud 4 pmd 6 pte 526\n"));
}
