//! libFuzzer target: the input bytes drive the same generator as
//! `mmlab fuzz` ([`mmlab_harness::fuzz::generate::decode_with`]: each
//! choice takes one or two bytes), and the sequence runs on a fresh 32 MiB,
//! 2-CPU machine with the same oracle and checks (every 64 ops and at the
//! end). A violation panics with the replay file's text, so the crash
//! report can be pasted into a file for `mmlab replay`.
//!
//! The wrong-call kinds of known library defects being fixed are left out
//! unless `MMLAB_FUZZ_ALL=1` is set.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mmlab_harness::fuzz::cli::annotate;
use mmlab_harness::fuzz::generate::{GenConfig, decode_with};
use mmlab_harness::fuzz::run::{Setup, run_list};

const KNOWN: [&str; 4] = ["vm_unmap_ram_twice", "vm_unmap_ram_wrong_count", "vfree_after_kvfree_rcu", "size_overflow"];

fuzz_target!(|data: &[u8]| {
    let all = std::env::var("MMLAB_FUZZ_ALL").is_ok_and(|v| v == "1");
    let cfg = GenConfig {
        nr_cpus: 2,
        max_live_pages: 8192 / 3,
        wrong_per_64: 8,
        exclude: if all { Vec::new() } else { KNOWN.iter().map(|s| s.to_string()).collect() },
        hvo: false,
        reserved_pfn: mmlab_harness::fuzz::generate::reserved_pfn("32M"),
    };
    let ops = decode_with(data, cfg, 512);
    let setup =
        Setup { mem: "32M".to_string(), cpus: 2, sets: Vec::new(), seed: 1, fault: None, check_every: 64 };
    let out = run_list(&setup, &ops, None).expect("the fuzz machine boots");
    if let Some(v) = out.violation {
        panic!("mmlab violation: {v}\n--- replay file ---\n{}", annotate(&setup, ops, &v));
    }
});
