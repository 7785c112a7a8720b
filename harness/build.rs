//! Records the revision the `mmlab` binary was built from, for the `run`
//! record of every output (`MMLAB_GIT_REV`): `git describe --always
//! --dirty`, or the crate version outside a checkout or without git.
//!
//! The build reruns when HEAD moves (a commit, a checkout): on the
//! checkout's `HEAD`, the ref it points to, `packed-refs` and the index
//! (staging a change flips `-dirty`). A checkout's `.git` may be a file
//! (a worktree); git itself says where the files are.
use std::path::PathBuf;
use std::process::Command;

/// `git ARGS` in the crate's directory, trimmed; `None` without git or
/// outside a checkout.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let rev = git(&["describe", "--always", "--dirty"])
        .unwrap_or_else(|| format!("v{}", std::env::var("CARGO_PKG_VERSION").unwrap_or_default()));
    println!("cargo:rustc-env=MMLAB_GIT_REV={rev}");
    println!("cargo:rerun-if-changed=build.rs");
    let (Some(git_dir), Some(common)) =
        (git(&["rev-parse", "--absolute-git-dir"]), git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]))
    else {
        return;
    };
    let (git_dir, common) = (PathBuf::from(git_dir), PathBuf::from(common));
    let mut watch = vec![git_dir.join("HEAD"), git_dir.join("index"), common.join("packed-refs")];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(common.join(r));
    }
    for p in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
