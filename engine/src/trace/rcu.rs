//! RCU events: the kernel's `rcu:rcu_grace_period` (include/trace/events/rcu.h,
//! TREE_RCU) for grace-period start and end, and mmlab's own
//! `mmlab_rcu:synchronize_rcu` for a finished synchronize_rcu() wait, which
//! the kernel does not trace.

use super::clock::TraceClock;

/// The RCU flavour name the kernel prints (`rcu_state.name` of a
/// preemptible kernel).
pub const RCU_NAME: &str = "rcu_preempt";

/// A grace-period event: `gpevent` is the kernel's string (`"start"`,
/// `"end"`); `gp_seq` is `rcu_state.gp_seq` after the change.
///
/// Mirrors `rcu:rcu_grace_period`, fired in kernel/rcu/tree.c
/// `rcu_gp_init()` (`"start"`) and `rcu_gp_cleanup()` (`"end"`). `cpu` is
/// the emulated CPU whose call drove the change (the kernel's GP kthread
/// has no fixed CPU).
#[inline]
pub fn rcu_grace_period(cpu: usize, clock: &TraceClock, gp_seq: u64, gpevent: &'static str) {
    tracing::event!(
        name: "rcu_grace_period",
        target: "rcu",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        rcuname = RCU_NAME,
        gp_seq = gp_seq,
        gpevent = gpevent,
    );
}

/// mmlab's own: a `synchronize_rcu()` on `cpu` waited for the grace period
/// ending at `snap` and returned with `rcu_state.gp_seq` at `gp_seq`.
#[inline]
pub fn synchronize_rcu(cpu: usize, clock: &TraceClock, snap: u64, gp_seq: u64) {
    tracing::event!(
        name: "synchronize_rcu",
        target: "mmlab_rcu",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        snap = snap,
        gp_seq = gp_seq,
    );
}
