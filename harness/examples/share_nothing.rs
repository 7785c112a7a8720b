//! The host's own two-thread ceiling: how much of one thread's throughput
//! each of two threads gets when they share nothing at all, and what it
//! costs them to share one cache line.
//!
//! Each thread runs the same loop over a private 256 KiB buffer (a
//! data-dependent walk with a store per step, so it fits in L2 and stays
//! busy in the core): no lock, no shared cache line, no allocation in the
//! loop. On a host whose CPUs are independent cores, two threads each run
//! it as fast as one; on one whose virtual CPUs share a physical core or
//! are overcommitted, they do not. `scripts/scaling.sh` prints this beside
//! `mmlab test-vmalloc`'s per-thread throughput, so that the emulator's
//! scaling is read against what the host can give.
//!
//! Then the two threads hand one cache line back and forth: each waits
//! for the counter in it to reach its turn and writes the next value. The
//! time per handoff is what one *bounce* costs on this host: a lock or an
//! atomic taken on one CPU after the other CPU last wrote it
//! (`test-vmalloc --set lock_stat=1` counts vmalloc's bounces).
//!
//! `cargo run --release -p mmlab-harness --example share_nothing [STEPS]`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Steps of the walk per thread; about 0.3 s on the development host.
const DEFAULT_STEPS: u64 = 200_000_000;
const WORDS: usize = 32 * 1024;

fn walk(seed: u64, steps: u64) -> u64 {
    let mut buf = vec![0u64; WORDS];
    let mut x = seed | 1;
    for w in &mut buf {
        // xorshift64: a fixed, seeded fill.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *w = x;
    }
    let (mut acc, mut j) = (0u64, 0usize);
    for _ in 0..steps {
        let v = buf[j];
        acc = acc.wrapping_add(v.rotate_left(7));
        j = (v as usize ^ j.wrapping_mul(31)) & (WORDS - 1);
        buf[j] = acc;
    }
    acc
}

/// Wall seconds for `threads` threads each doing `steps` steps.
fn run(threads: u64, steps: u64) -> f64 {
    let t = Instant::now();
    std::thread::scope(|s| {
        for k in 0..threads {
            s.spawn(move || black_box(walk(k + 1, black_box(steps))));
        }
    });
    t.elapsed().as_secs_f64()
}

/// Handoffs of the shared line; about 0.4 s at 200 ns each.
const HANDOFFS: u64 = 2_000_000;

/// A cache line of its own (128 bytes: adjacent-line prefetchers pair lines).
#[repr(align(128))]
struct Line(AtomicU64);

/// Mean ns per one-way handoff of one cache line between two threads.
fn handoff_ns(handoffs: u64) -> f64 {
    let line = Line(AtomicU64::new(0));
    let t = Instant::now();
    std::thread::scope(|s| {
        for me in 0..2 {
            let line = &line;
            s.spawn(move || {
                // Thread `me` writes the odd or the even values.
                let mut turn = me;
                while turn < handoffs {
                    while line.0.load(Ordering::Acquire) != turn {
                        std::hint::spin_loop();
                    }
                    line.0.store(turn + 1, Ordering::Release);
                    turn += 2;
                }
            });
        }
    });
    t.elapsed().as_secs_f64() * 1e9 / handoffs as f64
}

fn main() {
    let steps = match std::env::args().nth(1).map(|a| a.parse::<u64>()) {
        None => DEFAULT_STEPS,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: share_nothing [STEPS > 0]");
            std::process::exit(2);
        }
    };
    let one = run(1, steps);
    let two = run(2, steps);
    println!(
        "share_nothing: 1 thread {one:.3} s, 2 threads {two:.3} s, per-thread throughput {:.0}%",
        100.0 * one / two
    );
    println!("shared line: {:.0} ns per handoff between the two threads", handoff_ns(HANDOFFS));
}
