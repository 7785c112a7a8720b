//! The README's examples run: every ```console block of README.md is run
//! with the `mmlab` built for this test and its output compared with the
//! block (trycmd). stderr is merged into stdout where it is written, so the
//! run header that `stat` and `trace` print on stderr appears in place.
//! `[..]` in a line stands for host-measured numbers (wall time, cycles,
//! measured ms, the revision in the header); `...` stands for lines the
//! README leaves out. Every modelled or counted number is checked as
//! printed. `TRYCMD=overwrite cargo test -p mmlab-harness --test readme`
//! rewrites the blocks from a run (mask the measured numbers again after).

mod common;

use std::path::PathBuf;

/// The `mmlab` trycmd runs: the built binary, or, on the qemu-user leg of
/// CI (a cross-built binary cannot be exec'd directly), a script that
/// starts it through cargo's target runner.
fn mmlab_bin() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_mmlab"));
    match common::target_runner() {
        Some(runner) => {
            let dir = std::env::temp_dir().join(format!("mmlab-readme-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let script = dir.join("mmlab");
            std::fs::write(&script, format!("#!/bin/sh\nexec {runner} {} \"$@\"\n", exe.display())).expect("script");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            script
        }
        _ => exe,
    }
}

#[test]
fn readme_examples() {
    trycmd::TestCases::new()
        .register_bin("mmlab", mmlab_bin())
        .case(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
}
