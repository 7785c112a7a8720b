//! The README's examples run: every ```console block of README.md is run
//! with the `mmlab` built for this test and its output compared with the
//! block (trycmd). stderr is merged into stdout where it is written, so the
//! run header that `stat` and `trace` print on stderr appears in place.
//! `[..]` in a line stands for host-measured numbers (wall time, cycles,
//! measured ms, the revision in the header); `...` stands for lines the
//! README leaves out. Every modelled or counted number is checked as
//! printed. `TRYCMD=overwrite cargo test -p mmlab-harness --test readme`
//! rewrites the blocks from a run (mask the measured numbers again after).

#[test]
fn readme_examples() {
    trycmd::TestCases::new()
        .register_bin("mmlab", trycmd::cargo::cargo_bin!("mmlab"))
        .case(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
}
