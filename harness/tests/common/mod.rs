//! What the CLI tests share.

use std::process::Command;

/// cargo's target runner when the binary is cross-built (the qemu-user
/// leg of CI: a cross-built binary cannot be exec'd directly).
#[allow(dead_code)] // not every test file uses every helper
pub fn target_runner() -> Option<String> {
    std::env::var("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER")
        .ok()
        .filter(|r| cfg!(target_arch = "aarch64") && !r.trim().is_empty())
}

/// The built `mmlab`, started through [`target_runner`] when one is set.
#[allow(dead_code)]
pub fn mmlab_command() -> Command {
    let exe = env!("CARGO_BIN_EXE_mmlab");
    match target_runner() {
        Some(runner) => {
            let mut words = runner.split_whitespace();
            let mut c = Command::new(words.next().unwrap_or_default());
            c.args(words).arg(exe);
            c
        }
        None => Command::new(exe),
    }
}

/// Run `cmd`: (status, stdout, stderr).
#[allow(dead_code)]
pub fn output(cmd: &mut Command) -> (Option<i32>, String, String) {
    let o = cmd.output().expect("run mmlab");
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}
