//! What the CLI tests share.

use std::process::Command;

/// The built `mmlab`, started through cargo's target runner when one is set
/// (the qemu-user leg of CI: a cross-built binary cannot be exec'd directly).
pub fn mmlab_command() -> Command {
    let exe = env!("CARGO_BIN_EXE_mmlab");
    match std::env::var("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER") {
        Ok(runner) if cfg!(target_arch = "aarch64") && !runner.trim().is_empty() => {
            let mut words = runner.split_whitespace();
            let mut c = Command::new(words.next().unwrap_or_default());
            c.args(words).arg(exe);
            c
        }
        _ => Command::new(exe),
    }
}
