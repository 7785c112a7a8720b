//! RCU for the emulated kernel: grace periods, quiescent states, callbacks.
//!
//! # The algorithm
//!
//! This is Tree RCU with a single node. A grace period (GP) is numbered by a
//! sequence counter, `gp_seq`, whose low two bits say whether a GP is in
//! progress (as `rcu_state.gp_seq` with `RCU_SEQ_STATE_MASK`): starting a GP
//! adds one, ending it rounds up to the next multiple of four. When a GP
//! starts, every CPU that RCU is watching gets its bit set in `qsmask`; each
//! such CPU clears its bit when it reports a quiescent state (QS); the report
//! that empties the mask ends the GP, wakes every waiter, and starts the next
//! GP at once if someone asked for one (`gp_seq_needed`). A caller that needs
//! a full GP from now takes `rcu_seq_snap(gp_seq)` - the end of the next GP
//! to *start* - and waits until `gp_seq` reaches it.
//!
//! Each CPU keeps (in [`RcuCpu`], its `rcu_data`) the GP for which it last
//! reported (so that its report is cheap when it already did), its read-side
//! nesting depth, and a deferred-QS flag.
//!
//! ## Who is watched (the quiescent-state and idle rules)
//!
//! - **Reporting.** An emulated CPU reports with [`rcu_quiescent_state`],
//!   which plays the scheduler tick and the context switch; drivers call it
//!   between operations (after each iteration of a test loop, say). Code that
//!   runs on a CPU between two reports is treated as a reader (RCU-sched
//!   semantics), so a driven CPU that never reports holds GPs off.
//! - **Read-side sections.** [`rcu_read_lock`] / [`rcu_read_unlock`] nest per
//!   CPU. A report made inside a section is deferred to the outermost unlock
//!   (as preemptible RCU's `rcu_read_unlock_special()`), so no GP that a
//!   section overlaps can end before the section does.
//! - **Offline.** A CPU whose [`Cpu`] handle is not held is offline: nothing
//!   runs on it, it is never in `qsmask`, and dropping the handle reports its
//!   QS for the GP in progress (`rcutree_report_cpu_dead()`). Taking a handle
//!   brings the CPU online for the *next* GP (`rcu_cpu_starting()`): it cannot
//!   hold a reader that began before the current one. Tests that hold only
//!   CPU 0 therefore wait for CPU 0 alone.
//! - **Idle.** [`rcu_idle_enter`] / [`rcu_idle_exit`] put a held CPU in an
//!   extended quiescent state (the nohz-idle `ct_idle_enter()`), for a handle
//!   that is held but not driven for a while.
//! - **Blocked driver threads.** Each CPU records the thread driving it (the
//!   thread that took the handle, updated - under the RCU lock - by the first
//!   RCU call from another thread after a hand-off). While a thread waits in
//!   [`synchronize_rcu`] or [`rcu_barrier`], every CPU it drives is in an
//!   extended QS: none of them can run anything. This is the kernel's "a task
//!   blocked in synchronize_rcu() is a context switch" for the caller's own
//!   CPU, extended to the other CPUs that a single-threaded, deterministic test
//!   interleaves on one thread (`m.all_cpus()`), which would otherwise wait
//!   for themselves forever. If one of those CPUs is inside a read-side
//!   section, the wait could never end: that panics, as lockdep would report
//!   `synchronize_rcu()` inside a reader. Caveat: after a handle is moved to
//!   another thread, code that reads without `rcu_read_lock` before that
//!   thread's first RCU call on it is not waited for.
//!
//! ## Callbacks
//!
//! [`call_rcu`] (and [`kvfree_rcu`]) queue a callback tagged with the GP
//! number it needs (`rcu_seq_snap()` at queue time, as `rcu_segcblist`
//! segments are), asking for that GP. Callbacks sit in one FIFO, as if every
//! CPU's were offloaded (`rcu_nocbs`) to one callback kthread; there is no
//! background thread: the kthread's work is done inline, by whichever CPU
//! next reports a QS (after its report) or waits in [`rcu_barrier`]. One
//! invoker runs at a time, in queue order, outside the RCU lock. A single
//! thread driving the CPUs therefore sees callbacks run at a fixed point of
//! its program, which keeps runs deterministic. Callbacks still pending when
//! the machine is dropped are dropped without being invoked.
//!
//! ## Faithful, simplified, modelled
//!
//! Faithful: the `gp_seq` encoding and its snap/done arithmetic, per-CPU QS
//! bookkeeping against a `qsmask`, deferred QS in readers, offline and idle
//! CPUs as quiescent, GPs started on demand and back to back, callbacks
//! tagged with the GP they need, `rcu_barrier` semantics, the polled-GP API,
//! an RCU CPU stall warning after [`RCU_CPU_STALL_TIMEOUT`].
//! Simplified: one node instead of a tree; no expedited GPs; no forcing of
//! quiescent states (no `rcu_gp_fqs()`): CPUs must report; callbacks are
//! global rather than per-CPU segmented lists.
//! Modelled: the latency of a GP. Each [`synchronize_rcu`] adds the cost
//! profile's `grace_period_ns` to the calling CPU's modelled RCU time and,
//! separately, the measured host time it actually waited.

use crate::counters::this_cpu_add as bump;
use crate::kernel::cpu::Cpu;
use crate::trace::{self, rcu as trace_rcu};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::Instant;
use tree::{NO_CBS, Tp, rcu_seq_done, rcu_seq_snap, rcu_seq_state, this_thread};

pub mod tree;

pub use tree::{RCU_CPU_STALL_TIMEOUT, RcuCookie, RcuCounts, RcuCpu, RcuState};

/// Who drives a grace-period change: `cpu`, for its trace event.
fn tp<'a>(cpu: &'a Cpu<'_>) -> Tp<'a> {
    Tp { cpu: cpu.id(), clock: cpu.trace_clock() }
}

/// Make sure this thread is recorded as `cpu`'s driver.
#[inline]
fn check_driver(cpu: &Cpu<'_>) {
    if cpu.rcu_data().driver.load(Relaxed) != this_thread() {
        let st = cpu.rcu_state();
        let mut g = st.inner.lock();
        st.adopt(&mut g, cpu.id());
    }
}

/// Report a quiescent state on `cpu`: mirrors the scheduler tick's / context
/// switch's `rcu_qs()` + `rcu_report_qs_rdp()`, then `rcu_core()`'s callback
/// invocation. Inside a read-side section the report is deferred to the
/// outermost [`rcu_read_unlock`]. Cheap (no lock) when this CPU has already
/// reported for the current GP and no callback is ready.
pub fn rcu_quiescent_state(cpu: &Cpu<'_>) {
    check_driver(cpu);
    let rcu = &cpu.rcu_data();
    if rcu.nesting.load(Relaxed) > 0 {
        rcu.deferred_qs.store(true, Relaxed);
        return;
    }
    let st = cpu.rcu_state();
    let s = st.gp_seq.load(Acquire);
    let need_qs = rcu_seq_state(s) != 0 && rcu.qs_gp.load(Relaxed) != s;
    let head = st.cb_ready_at.load(Acquire);
    let cbs_ready = head != NO_CBS && rcu_seq_done(s, head);
    if !need_qs && !cbs_ready {
        return;
    }
    let mut g = st.inner.lock();
    st.report_qs(&mut g, cpu.id(), rcu, tp(cpu));
    loop {
        let batch = st.take_ready(&mut g);
        if batch.is_empty() {
            break;
        }
        st.invoke(&mut g, batch);
    }
}

/// `rcu_read_lock()` on `cpu`: enter (or nest) a read-side critical section.
#[inline]
pub fn rcu_read_lock(cpu: &Cpu<'_>) {
    check_driver(cpu);
    let rcu = &cpu.rcu_data();
    rcu.nesting.store(rcu.nesting.load(Relaxed) + 1, Relaxed);
}

/// `rcu_read_unlock()` on `cpu`: leave a section; the outermost unlock
/// reports a QS deferred inside it (`rcu_read_unlock_special()`).
/// Panics when no section is open (unbalanced unlock).
#[inline]
pub fn rcu_read_unlock(cpu: &Cpu<'_>) {
    let rcu = &cpu.rcu_data();
    let n = rcu.nesting.load(Relaxed);
    assert!(n > 0, "rcu_read_unlock() on cpu {} without rcu_read_lock()", cpu.id());
    rcu.nesting.store(n - 1, Relaxed);
    if n == 1 && rcu.deferred_qs.load(Relaxed) {
        rcu.deferred_qs.store(false, Relaxed);
        rcu_quiescent_state(cpu);
    }
}

/// `ct_idle_enter()` / `rcu_idle_enter()`: `cpu` stays held but enters an
/// extended QS; GPs stop waiting for it until [`rcu_idle_exit`]. Panics
/// inside a read-side section.
pub fn rcu_idle_enter(cpu: &Cpu<'_>) {
    let rcu = &cpu.rcu_data();
    assert_eq!(rcu.read_depth(), 0, "rcu_idle_enter() inside an RCU read-side critical section on cpu {}", cpu.id());
    let st = cpu.rcu_state();
    let mut g = st.inner.lock();
    st.adopt(&mut g, cpu.id());
    g.cpus[cpu.id()].idle = true;
    st.report_qs(&mut g, cpu.id(), rcu, tp(cpu));
}

/// `ct_idle_exit()` / `rcu_idle_exit()`: `cpu` is watched again, from the
/// next GP on.
pub fn rcu_idle_exit(cpu: &Cpu<'_>) {
    let st = cpu.rcu_state();
    let mut g = st.inner.lock();
    st.adopt(&mut g, cpu.id());
    g.cpus[cpu.id()].idle = false;
    cpu.rcu_data().qs_gp.store(g.gp_seq, Relaxed);
}

/// `synchronize_rcu()`: wait until every read-side critical section and
/// every watched CPU's run between reports that began before the call has
/// ended. The calling CPU (and every other CPU this thread drives) is
/// quiescent for the wait. Adds the profile's `grace_period_ns` to `cpu`'s
/// modelled RCU time and the measured wait to its host time.
/// Panics if this thread is inside a read-side section on any of its CPUs.
pub fn synchronize_rcu(cpu: &Cpu<'_>) {
    let rcu = &cpu.rcu_data();
    let st = cpu.rcu_state();
    let t0 = Instant::now();
    let _slice = trace::mmlab::func(cpu.id(), cpu.trace_clock(), "synchronize_rcu");
    {
        let mut g = st.inner.lock();
        st.adopt(&mut g, cpu.id());
        let mine = st.park_mine(&mut g, cpu.trace_clock(), "synchronize_rcu");
        let snap = rcu_seq_snap(g.gp_seq);
        st.gp_request(&mut g, snap, tp(cpu));
        while !rcu_seq_done(g.gp_seq, snap) {
            st.wait(&mut g, "synchronize_rcu");
        }
        st.unpark(&mut g, &mine);
        trace_rcu::synchronize_rcu(cpu.id(), cpu.trace_clock(), snap, g.gp_seq);
    }
    bump(&rcu.synchronize_calls, 1);
    bump(&rcu.modelled_ns, cpu.arch().cost_profile.grace_period_ns);
    bump(&rcu.host_wait_ns, t0.elapsed().as_nanos() as u64);
}

/// `call_rcu()`: run `func` after a grace period that starts after this call.
/// See the module documentation for where callbacks run.
pub fn call_rcu(cpu: &Cpu<'_>, func: Box<dyn FnOnce() + Send>) {
    check_driver(cpu);
    let st = cpu.rcu_state();
    let mut g = st.inner.lock();
    let snap = rcu_seq_snap(g.gp_seq);
    if g.cbs.is_empty() {
        st.cb_ready_at.store(snap, Release);
    }
    g.cbs.push_back((snap, func));
    g.cbs_queued += 1;
    bump(&cpu.rcu_data().callbacks_queued, 1);
    st.gp_request(&mut g, snap, tp(cpu));
}

/// `kvfree_rcu()`: free `obj` (drop it) after a grace period.
pub fn kvfree_rcu<T: Send + 'static>(cpu: &Cpu<'_>, obj: Box<T>) {
    call_rcu(cpu, Box::new(move || drop(obj)));
}

/// `rcu_barrier()`: wait until every callback queued before the call has
/// run, running ready ones itself. Like [`synchronize_rcu`], the CPUs this
/// thread drives are quiescent for the wait, and it panics inside a reader.
pub fn rcu_barrier(cpu: &Cpu<'_>) {
    let st = cpu.rcu_state();
    let mut g = st.inner.lock();
    st.adopt(&mut g, cpu.id());
    let mine = st.park_mine(&mut g, cpu.trace_clock(), "rcu_barrier");
    let target = g.cbs_queued;
    while g.cbs_invoked < target {
        let batch = st.take_ready(&mut g);
        if batch.is_empty() {
            st.wait(&mut g, "rcu_barrier");
        } else {
            st.invoke(&mut g, batch);
        }
    }
    st.unpark(&mut g, &mine);
    drop(g);
    bump(&cpu.rcu_data().barrier_calls, 1);
}

/// `get_state_synchronize_rcu()`: a cookie that
/// [`poll_state_synchronize_rcu`] accepts once a full GP has elapsed from now.
/// Does not start a GP.
pub fn get_state_synchronize_rcu(cpu: &Cpu<'_>) -> RcuCookie {
    RcuCookie(rcu_seq_snap(cpu.rcu_state().gp_seq()))
}

/// `start_poll_synchronize_rcu()`: as [`get_state_synchronize_rcu`], and
/// ask for the GP. The caller's CPU is not counted as quiescent.
pub fn start_poll_synchronize_rcu(cpu: &Cpu<'_>) -> RcuCookie {
    check_driver(cpu);
    let st = cpu.rcu_state();
    let mut g = st.inner.lock();
    let snap = rcu_seq_snap(g.gp_seq);
    st.gp_request(&mut g, snap, tp(cpu));
    RcuCookie(snap)
}

/// `poll_state_synchronize_rcu()`: has the GP of `cookie` completed?
pub fn poll_state_synchronize_rcu(cpu: &Cpu<'_>, cookie: RcuCookie) -> bool {
    rcu_seq_done(cpu.rcu_state().gp_seq(), cookie.0)
}

#[cfg(test)]
mod tests {
    use super::tree::rcu_seq_end;
    use super::*;
    use crate::{Machine, MachineConfig};
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::time::Duration;

    fn machine(cpus: usize) -> Machine {
        Machine::boot(MachineConfig::with("16M", cpus).unwrap()).unwrap()
    }

    /// Wait (yielding, not timing anything) until a GP is in progress.
    fn until_gp_in_progress(m: &Machine) {
        while !m.rcu().gp_in_progress() {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    #[test]
    fn seq_arithmetic() {
        assert_eq!(rcu_seq_snap(0), 4);
        assert_eq!(rcu_seq_snap(1), 8, "a GP in progress does not count");
        assert_eq!(rcu_seq_end(1), 4);
        assert!(rcu_seq_done(4, 4) && !rcu_seq_done(3, 4));
        assert!(rcu_seq_done(2, u64::MAX - 1), "wraps");
    }

    #[test]
    fn single_held_cpu_synchronizes_at_once() {
        let m = machine(4);
        let c0 = m.cpu(0).unwrap();
        let before = m.rcu_counts();
        synchronize_rcu(&c0);
        let d = m.rcu_counts();
        assert_eq!(d.grace_periods - before.grace_periods, 1);
        assert_eq!(d.synchronize_rcu, 1);
        assert!(!m.rcu().gp_in_progress());
    }

    #[test]
    fn one_thread_driving_two_cpus_does_not_wait_for_itself() {
        let m = machine(2);
        let cpus = m.all_cpus().unwrap();
        synchronize_rcu(&cpus[0]);
        synchronize_rcu(&cpus[1]);
        assert_eq!(m.rcu_counts().grace_periods, 2);
        // Both are watched again afterwards: a polled GP needs both reports.
        let cookie = start_poll_synchronize_rcu(&cpus[0]);
        rcu_quiescent_state(&cpus[0]);
        assert!(!poll_state_synchronize_rcu(&cpus[0], cookie));
        rcu_quiescent_state(&cpus[1]);
        assert!(poll_state_synchronize_rcu(&cpus[0], cookie));
    }

    #[test]
    #[should_panic(expected = "read-side critical section")]
    fn synchronize_with_own_reader_open_panics() {
        let m = machine(2);
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        rcu_read_lock(&c1);
        synchronize_rcu(&c0);
    }

    #[test]
    fn polled_gp_waits_for_every_online_cpu_and_readers() {
        let m = machine(3);
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        // CPU 2 has no handle: offline, not waited for.
        let cookie = start_poll_synchronize_rcu(&c0);
        rcu_read_lock(&c1);
        rcu_read_lock(&c1);
        rcu_quiescent_state(&c0);
        rcu_quiescent_state(&c1); // deferred: inside a section
        assert!(!poll_state_synchronize_rcu(&c0, cookie));
        rcu_read_unlock(&c1);
        assert!(!poll_state_synchronize_rcu(&c0, cookie), "still nested");
        rcu_read_unlock(&c1);
        assert!(poll_state_synchronize_rcu(&c0, cookie));
        assert_eq!(m.rcu_counts().grace_periods, 1);
    }

    #[test]
    fn offline_and_idle_cpus_are_quiescent() {
        let m = machine(3);
        let (c0, c1, c2) = (m.cpu(0).unwrap(), m.cpu(1).unwrap(), m.cpu(2).unwrap());
        let cookie = start_poll_synchronize_rcu(&c0);
        rcu_quiescent_state(&c0);
        rcu_idle_enter(&c2);
        assert!(!poll_state_synchronize_rcu(&c0, cookie));
        drop(c1);
        assert!(poll_state_synchronize_rcu(&c0, cookie));
        // Idle stays quiescent for later GPs until it exits.
        let cookie = start_poll_synchronize_rcu(&c0);
        rcu_quiescent_state(&c0);
        assert!(poll_state_synchronize_rcu(&c0, cookie));
        rcu_idle_exit(&c2);
        let cookie = start_poll_synchronize_rcu(&c0);
        rcu_quiescent_state(&c0);
        assert!(!poll_state_synchronize_rcu(&c0, cookie));
        rcu_quiescent_state(&c2);
        assert!(poll_state_synchronize_rcu(&c0, cookie));
    }

    #[test]
    fn synchronize_waits_for_the_other_threads_qs() {
        let m = machine(2);
        let flag = AtomicBool::new(false);
        let returned = AtomicBool::new(false);
        let (ready_tx, ready_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let (m, flag, returned) = (&m, &flag, &returned);
            s.spawn(move || {
                let c1 = m.cpu(1).unwrap();
                ready_tx.send(()).unwrap();
                until_gp_in_progress(m);
                // CPU 1 has not reported: CPU 0 must still be waiting.
                assert!(!returned.load(Relaxed));
                flag.store(true, Relaxed);
                rcu_quiescent_state(&c1);
                done_rx.recv().unwrap();
            });
            ready_rx.recv().unwrap();
            let c0 = m.cpu(0).unwrap();
            synchronize_rcu(&c0);
            assert!(flag.load(Relaxed), "synchronize_rcu returned before CPU 1's quiescent state");
            returned.store(true, Relaxed);
            assert_eq!(m.rcu_counts().grace_periods, 1);
            done_tx.send(()).unwrap();
        });
    }

    #[test]
    fn reader_on_other_thread_holds_off_the_gp() {
        let m = machine(2);
        let flag = AtomicBool::new(false);
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let c1 = m.cpu(1).unwrap();
                rcu_read_lock(&c1);
                ready_tx.send(()).unwrap();
                until_gp_in_progress(&m);
                rcu_quiescent_state(&c1); // deferred to the unlock
                assert!(m.rcu().gp_in_progress(), "GP ended inside a reader");
                flag.store(true, Relaxed);
                rcu_read_unlock(&c1);
            });
            ready_rx.recv().unwrap();
            let c0 = m.cpu(0).unwrap();
            synchronize_rcu(&c0);
            assert!(flag.load(Relaxed), "synchronize_rcu returned while CPU 1 was in a reader");
        });
    }

    #[test]
    fn callbacks_run_after_a_gp_in_order() {
        let m = machine(2);
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let push = |n: u32| {
            let log = Arc::clone(&log);
            Box::new(move || log.lock().push(n)) as Box<dyn FnOnce() + Send>
        };
        call_rcu(&c0, push(1)); // starts GP A, which waits for CPUs 0 and 1
        rcu_quiescent_state(&c0);
        assert!(log.lock().is_empty(), "CPU 1 has not reported");
        // Queued while A runs: needs the next GP, B.
        call_rcu(&c1, push(2));
        rcu_quiescent_state(&c1); // ends A, starts B
        assert_eq!(*log.lock(), [1]);
        rcu_quiescent_state(&c1);
        call_rcu(&c0, push(3)); // needs C
        assert_eq!(*log.lock(), [1], "CPU 0 has not reported for B");
        rcu_quiescent_state(&c0); // ends B, starts C
        assert_eq!(*log.lock(), [1, 2]);
        rcu_quiescent_state(&c1);
        rcu_quiescent_state(&c0);
        assert_eq!(*log.lock(), [1, 2, 3]);
        kvfree_rcu(&c0, Box::new([0u8; 64])); // starts D
        let c = m.rcu_counts();
        assert_eq!((c.callbacks_queued, c.callbacks_invoked, c.grace_periods), (4, 3, 3));
        assert!(m.rcu().gp_in_progress());
    }

    #[test]
    fn rcu_barrier_waits_for_all_callbacks() {
        let m = machine(2);
        let ran = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let ran = Arc::new(ran);
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let c1 = m.cpu(1).unwrap();
                ready_tx.send(()).unwrap();
                while !stop.load(Relaxed) {
                    rcu_quiescent_state(&c1);
                    std::thread::sleep(Duration::from_micros(50));
                }
            });
            ready_rx.recv().unwrap();
            let c0 = m.cpu(0).unwrap();
            for _ in 0..5 {
                let ran = Arc::clone(&ran);
                call_rcu(&c0, Box::new(move || _ = ran.fetch_add(1, Relaxed)));
            }
            rcu_barrier(&c0);
            assert_eq!(ran.load(Relaxed), 5);
            stop.store(true, Relaxed);
        });
        let c = m.rcu_counts();
        assert_eq!((c.callbacks_queued, c.callbacks_invoked, c.rcu_barrier), (5, 5, 1));
        assert!(c.grace_periods >= 1);
    }

    #[test]
    fn rcu_barrier_single_thread_runs_callbacks_itself() {
        let m = machine(2);
        let cpus = m.all_cpus().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for c in &cpus {
            let ran = Arc::clone(&ran);
            call_rcu(c, Box::new(move || _ = ran.fetch_add(1, Relaxed)));
        }
        assert_eq!(ran.load(Relaxed), 0);
        rcu_barrier(&cpus[1]);
        assert_eq!(ran.load(Relaxed), 2);
        // Nothing queued: returns at once.
        rcu_barrier(&cpus[0]);
        assert_eq!(m.rcu_counts().rcu_barrier, 2);
    }

    #[test]
    fn modelled_time_is_one_grace_period_per_synchronize() {
        let m = machine(1);
        let c0 = m.cpu(0).unwrap();
        for _ in 0..3 {
            synchronize_rcu(&c0);
        }
        let gp = m.config().cost_profile.grace_period_ns;
        assert_eq!(c0.rcu_data().snapshot().modelled_ns, 3 * gp);
        let c = m.rcu_counts();
        assert_eq!((c.synchronize_rcu, c.grace_periods, c.modelled_ns), (3, 3, 3 * gp));
        let text = c.to_string();
        assert!(text.contains(&format!("rcu_gp_wait_modelled_ns {}\n", 3 * gp)), "{text}");
        assert!(text.contains("rcu_synchronize_rcu 3\n"), "{text}");
    }

    #[test]
    fn handle_moved_to_another_thread_is_adopted() {
        let m = machine(2);
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        let flag = AtomicBool::new(false);
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let c1 = c1;
                rcu_read_lock(&c1); // takes over as CPU 1's driver
                ready_tx.send(()).unwrap();
                until_gp_in_progress(&m);
                flag.store(true, Relaxed);
                rcu_read_unlock(&c1);
                rcu_quiescent_state(&c1);
            });
            ready_rx.recv().unwrap();
            synchronize_rcu(&c0);
            assert!(flag.load(Relaxed));
        });
    }
}
