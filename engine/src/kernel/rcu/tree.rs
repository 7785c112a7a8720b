//! The grace-period machinery of [`super`]: `rcu_state`, each CPU's
//! `rcu_data`, the quiescent-state bookkeeping and callback invocation
//! (kernel/rcu/tree.c). It knows CPUs by id only; the API that takes a CPU
//! handle is in [`super`].

// Single-writer counter update (the CPU's own thread), as `VmEvents::add`.
use crate::counters::PerCpuStat;
use crate::trace::{TraceClock, rcu as trace_rcu};
// The grace-period machinery sleeps on a Condvar and drops its lock around
// callbacks (`MutexGuard::unlocked`): it uses parking_lot directly rather
// than the `sync` facade, whose loom build models the allocators' locks and
// atomics, not RCU's sleeping waits. Under shuttle the wait yields to the
// scheduler instead of sleeping ([`RcuState::wait`]).
use parking_lot::Condvar;
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::time::Duration;

/// `CONFIG_RCU_CPU_STALL_TIMEOUT`: a waiter that has waited this long prints
/// which CPUs hold the grace period up, then keeps waiting.
pub const RCU_CPU_STALL_TIMEOUT: Duration = Duration::from_secs(21);

const RCU_SEQ_STATE_MASK: u64 = 3;
/// `cb_ready_at` when no callback is queued.
pub(crate) const NO_CBS: u64 = u64::MAX;

/// `rcu_seq_state()`: non-zero while a grace period is in progress.
#[inline]
pub(crate) fn rcu_seq_state(s: u64) -> u64 {
    s & RCU_SEQ_STATE_MASK
}
/// `rcu_seq_end()`: the sequence number once the current GP ends.
#[inline]
pub(crate) fn rcu_seq_end(s: u64) -> u64 {
    (s | RCU_SEQ_STATE_MASK) + 1
}
/// `rcu_seq_snap()`: the value `gp_seq` has once a full GP has elapsed from now.
#[inline]
pub(crate) fn rcu_seq_snap(s: u64) -> u64 {
    (s + 2 * RCU_SEQ_STATE_MASK + 1) & !RCU_SEQ_STATE_MASK
}
/// `rcu_seq_done()`: has `s` reached `snap` (wrap-safe, `ULONG_CMP_GE`)?
#[inline]
pub(crate) fn rcu_seq_done(s: u64, snap: u64) -> bool {
    s.wrapping_sub(snap) as i64 >= 0
}

crate::sync::thread_local! {
    static THREAD_TOKEN: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Relaxed)
    };
}
/// A non-zero number naming the current host thread.
#[inline]
pub(crate) fn this_thread() -> u64 {
    THREAD_TOKEN.with(|t| *t)
}

/// One CPU's RCU state (`struct rcu_data`) and counters.
#[derive(Debug, Default)]
pub struct RcuCpu {
    /// `current->rcu_read_lock_nesting`; written by the driving thread only.
    pub(crate) nesting: AtomicU32,
    /// A QS was asked for inside a read-side section (`rcu_read_unlock_special`).
    pub(crate) deferred_qs: AtomicBool,
    /// `gp_seq` of the GP this CPU last reported for (or noted).
    pub(crate) qs_gp: AtomicU64,
    /// Thread driving this CPU ([`this_thread`]); changed under the RCU lock.
    pub(crate) driver: AtomicU64,
    pub(crate) synchronize_calls: AtomicU64,
    pub(crate) barrier_calls: AtomicU64,
    pub(crate) callbacks_queued: AtomicU64,
    pub(crate) modelled_ns: AtomicU64,
    pub(crate) host_wait_ns: AtomicU64,
}

impl RcuCpu {
    /// Fresh state, offline.
    pub fn new() -> RcuCpu {
        RcuCpu::default()
    }
    /// Read-side nesting depth (`rcu_preempt_depth()`).
    pub fn read_depth(&self) -> u32 {
        self.nesting.load(Relaxed)
    }
    /// This CPU's counters (the global ones - grace periods, invoked
    /// callbacks - are zero here; see [`crate::Machine::rcu_counts`]).
    pub fn snapshot(&self) -> RcuCounts {
        PerCpuStat::snapshot(self)
    }
}

impl PerCpuStat for RcuCpu {
    type Counts = RcuCounts;
    fn snapshot(&self) -> RcuCounts {
        RcuCounts {
            grace_periods: 0,
            synchronize_rcu: self.synchronize_calls.load(Relaxed),
            rcu_barrier: self.barrier_calls.load(Relaxed),
            callbacks_queued: self.callbacks_queued.load(Relaxed),
            callbacks_invoked: 0,
            modelled_ns: self.modelled_ns.load(Relaxed),
            host_wait_ns: self.host_wait_ns.load(Relaxed),
        }
    }
}

crate::counter_snapshot! {
    /// RCU counters, one CPU's or summed; see [`crate::Machine::rcu_counts`].
    pub struct RcuCounts {
        /// Grace periods completed (`rcu_state.gp_seq` advances).
        pub grace_periods: u64,
        /// `synchronize_rcu()` calls.
        pub synchronize_rcu: u64,
        /// `rcu_barrier()` calls.
        pub rcu_barrier: u64,
        /// Callbacks queued by `call_rcu()` / `kvfree_rcu()`.
        pub callbacks_queued: u64,
        /// Callbacks invoked.
        pub callbacks_invoked: u64,
        /// Modelled ns of grace-period latency charged to `synchronize_rcu()` callers.
        pub modelled_ns: u64,
        /// Measured host ns spent waiting in `synchronize_rcu()`.
        pub host_wait_ns: u64,
    }
}

impl std::fmt::Display for RcuCounts {
    /// One `name value` line per counter, saying which times are modelled
    /// and which measured.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "rcu_grace_periods {}", self.grace_periods)?;
        writeln!(f, "rcu_synchronize_rcu {}", self.synchronize_rcu)?;
        writeln!(f, "rcu_barrier {}", self.rcu_barrier)?;
        writeln!(f, "rcu_callbacks_queued {}", self.callbacks_queued)?;
        writeln!(f, "rcu_callbacks_invoked {}", self.callbacks_invoked)?;
        writeln!(f, "rcu_gp_wait_modelled_ns {}", self.modelled_ns)?;
        writeln!(f, "rcu_gp_wait_host_ns {}", self.host_wait_ns)
    }
}

/// A cookie of the polled grace-period API (`get_state_synchronize_rcu()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcuCookie(pub(crate) u64);

pub(crate) type Callback = Box<dyn FnOnce() + Send>;

/// Per-CPU state kept under the RCU lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuGpState {
    pub(crate) online: bool,
    pub(crate) idle: bool,
    /// Its driver thread is blocked in an RCU wait.
    pub(crate) parked: bool,
}

impl CpuGpState {
    fn watched(self) -> bool {
        self.online && !self.idle && !self.parked
    }
}

pub(crate) struct RcuInner {
    pub(crate) gp_seq: u64,
    pub(crate) gp_seq_needed: u64,
    /// CPUs that still owe a QS to the current GP (`rcu_node->qsmask`).
    pub(crate) qsmask: Vec<bool>,
    pub(crate) qs_pending: usize,
    pub(crate) cpus: Vec<CpuGpState>,
    pub(crate) cbs: VecDeque<(u64, Callback)>,
    pub(crate) cbs_queued: u64,
    pub(crate) cbs_invoked: u64,
    pub(crate) invoking: bool,
    pub(crate) gp_completed: u64,
}

/// The machine-wide RCU state (`rcu_state`) with each CPU's `rcu_data`.
pub struct RcuState {
    /// Each CPU's `rcu_data`, by id.
    pub(crate) rdp: Box<[crossbeam::utils::CachePadded<RcuCpu>]>,
    pub(crate) inner: Mutex<RcuInner>,
    /// Waiters for GP ends and callback progress.
    pub(crate) wq: Condvar,
    /// Mirror of `gp_seq` for lock-free checks.
    pub(crate) gp_seq: AtomicU64,
    /// Tag of the oldest queued callback, or [`NO_CBS`].
    pub(crate) cb_ready_at: AtomicU64,
    /// Callbacks invoked (mirror, for counters).
    pub(crate) invoked: AtomicU64,
    pub(crate) gp_completed: AtomicU64,
}

impl std::fmt::Debug for RcuState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RcuState")
            .field("gp_seq", &self.gp_seq.load(Relaxed))
            .field("gp_completed", &self.gp_completed.load(Relaxed))
            .field("callbacks_invoked", &self.invoked.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// Who drives a grace-period change, for its trace event.
#[derive(Clone, Copy)]
pub(crate) struct Tp<'a> {
    pub(crate) cpu: usize,
    pub(crate) clock: &'a TraceClock,
}

impl RcuState {
    /// `rcu_init()` for `nr_cpus` CPUs, all offline.
    pub fn new(nr_cpus: usize) -> RcuState {
        RcuState {
            rdp: (0..nr_cpus).map(|_| Default::default()).collect(),
            inner: Mutex::new(RcuInner {
                gp_seq: 0,
                gp_seq_needed: 0,
                qsmask: vec![false; nr_cpus],
                qs_pending: 0,
                cpus: vec![CpuGpState::default(); nr_cpus],
                cbs: VecDeque::new(),
                cbs_queued: 0,
                cbs_invoked: 0,
                invoking: false,
                gp_completed: 0,
            }),
            wq: Condvar::new(),
            gp_seq: AtomicU64::new(0),
            cb_ready_at: AtomicU64::new(NO_CBS),
            invoked: AtomicU64::new(0),
            gp_completed: AtomicU64::new(0),
        }
    }
    /// CPU `id`'s `rcu_data` (`per_cpu_ptr(&rcu_data, id)`).
    #[inline]
    pub fn cpu(&self, id: usize) -> &RcuCpu {
        &self.rdp[id]
    }

    /// CPU `id`'s handle was taken: mirrors `rcu_cpu_starting()` (online
    /// for GPs that start from now on).
    pub(crate) fn cpu_online(&self, id: usize) {
        let rcu = self.cpu(id);
        let mut g = self.inner.lock();
        rcu.nesting.store(0, Relaxed);
        rcu.deferred_qs.store(false, Relaxed);
        rcu.driver.store(this_thread(), Relaxed);
        rcu.qs_gp.store(g.gp_seq, Relaxed);
        g.cpus[id] = CpuGpState { online: true, idle: false, parked: false };
    }

    /// CPU `id`'s handle is being dropped: mirrors
    /// `rcutree_report_cpu_dead()` (reports its QS and leaves the GP
    /// machinery). A handle dropped inside a read-side section ends the
    /// section: nothing can run on the CPU any more.
    pub(crate) fn cpu_offline(&self, id: usize, clock: &TraceClock) {
        let rcu = self.cpu(id);
        let mut g = self.inner.lock();
        rcu.nesting.store(0, Relaxed);
        rcu.deferred_qs.store(false, Relaxed);
        // Offline first: the report below may end the current GP and start
        // the next one at once, and that one must not wait for this CPU.
        g.cpus[id] = CpuGpState::default();
        self.report_qs(&mut g, id, rcu, Tp { cpu: id, clock });
    }

    /// `rcu_state.gp_seq`.
    pub fn gp_seq(&self) -> u64 {
        self.gp_seq.load(Acquire)
    }
    /// `rcu_gp_in_progress()`.
    pub fn gp_in_progress(&self) -> bool {
        rcu_seq_state(self.gp_seq()) != 0
    }
    /// Grace periods completed so far.
    pub fn gp_completed(&self) -> u64 {
        self.gp_completed.load(Relaxed)
    }
    /// Callbacks invoked so far.
    pub fn callbacks_invoked(&self) -> u64 {
        self.invoked.load(Relaxed)
    }

    /// `rcu_gp_init()`: start a GP watching every watched CPU; one with
    /// nobody to wait for ends at once. Called with the lock held.
    pub(crate) fn gp_start(&self, g: &mut RcuInner, tp: Tp<'_>) {
        debug_assert_eq!(rcu_seq_state(g.gp_seq), 0);
        g.gp_seq += 1;
        self.gp_seq.store(g.gp_seq, Release);
        trace_rcu::rcu_grace_period(tp.cpu, tp.clock, g.gp_seq, "start");
        let mut n = 0;
        for (bit, st) in g.qsmask.iter_mut().zip(&g.cpus) {
            *bit = st.watched();
            n += usize::from(*bit);
        }
        g.qs_pending = n;
        if n == 0 {
            self.gp_end(g, tp);
        }
    }

    /// `rcu_gp_cleanup()`: end the current GP, wake waiters, start the next
    /// one if it is needed.
    pub(crate) fn gp_end(&self, g: &mut RcuInner, tp: Tp<'_>) {
        g.gp_seq = rcu_seq_end(g.gp_seq);
        self.gp_seq.store(g.gp_seq, Release);
        trace_rcu::rcu_grace_period(tp.cpu, tp.clock, g.gp_seq, "end");
        g.gp_completed += 1;
        self.gp_completed.store(g.gp_completed, Relaxed);
        self.wq.notify_all();
        if !rcu_seq_done(g.gp_seq, g.gp_seq_needed) {
            self.gp_start(g, tp);
        }
    }

    /// `rcu_start_this_gp()`: make sure a GP ending at `snap` will happen.
    pub(crate) fn gp_request(&self, g: &mut RcuInner, snap: u64, tp: Tp<'_>) {
        if !rcu_seq_done(g.gp_seq_needed, snap) {
            g.gp_seq_needed = snap;
        }
        if rcu_seq_state(g.gp_seq) == 0 && !rcu_seq_done(g.gp_seq, snap) {
            self.gp_start(g, tp);
        }
    }

    /// `rcu_report_qs_rdp()`: CPU `id` passed a QS. Called with the lock held.
    pub(crate) fn report_qs(&self, g: &mut RcuInner, id: usize, rcu: &RcuCpu, tp: Tp<'_>) {
        rcu.qs_gp.store(g.gp_seq, Relaxed);
        if rcu_seq_state(g.gp_seq) != 0 && g.qsmask[id] {
            g.qsmask[id] = false;
            g.qs_pending -= 1;
            if g.qs_pending == 0 {
                self.gp_end(g, tp);
            }
        }
    }

    /// The calling thread takes over as `cpu`'s driver (first RCU call after
    /// a hand-off). Called with the lock held.
    pub(crate) fn adopt(&self, g: &mut RcuInner, id: usize) {
        let me = this_thread();
        let rcu = self.cpu(id);
        if rcu.driver.load(Relaxed) != me {
            rcu.driver.store(me, Relaxed);
            // Parked by the previous driver's wait: driven again, but only
            // for GPs that start from now.
            g.cpus[id].parked = false;
        }
    }

    /// Ready callbacks, if this caller may invoke them now.
    pub(crate) fn take_ready(&self, g: &mut RcuInner) -> Vec<Callback> {
        if g.invoking {
            return Vec::new();
        }
        let mut batch = Vec::new();
        while let Some((tag, _)) = g.cbs.front() {
            if !rcu_seq_done(g.gp_seq, *tag) {
                break;
            }
            batch.push(g.cbs.pop_front().expect("front exists").1);
        }
        self.cb_ready_at.store(g.cbs.front().map_or(NO_CBS, |c| c.0), Release);
        g.invoking = !batch.is_empty();
        batch
    }

    /// `rcu_do_batch()`: run `batch` with the lock dropped, then account it.
    pub(crate) fn invoke(&self, guard: &mut MutexGuard<'_, RcuInner>, batch: Vec<Callback>) {
        let n = batch.len() as u64;
        /// Clears `invoking` even if a callback panics.
        struct Done<'a>(&'a RcuState, u64);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                let mut g = self.0.inner.lock();
                g.invoking = false;
                g.cbs_invoked += self.1;
                self.0.invoked.store(g.cbs_invoked, Relaxed);
                self.0.wq.notify_all();
            }
        }
        MutexGuard::unlocked(guard, || {
            let _done = Done(self, n);
            for cb in batch {
                cb();
            }
        });
    }

    /// Park every CPU driven by this thread for the length of a wait
    /// (extended QS), reporting its QS. Panics if one is in a reader.
    pub(crate) fn park_mine(&self, g: &mut RcuInner, clock: &TraceClock, what: &str) -> Vec<usize> {
        let me = this_thread();
        let mine: Vec<usize> =
            (0..g.cpus.len()).filter(|&i| g.cpus[i].online && self.cpu(i).driver.load(Relaxed) == me).collect();
        for &i in &mine {
            let depth = self.cpu(i).read_depth();
            assert!(
                depth == 0,
                "{what}() would wait forever: this thread holds cpu {i} inside an RCU read-side critical section"
            );
        }
        for &i in &mine {
            g.cpus[i].parked = true;
            self.report_qs(g, i, self.cpu(i), Tp { cpu: i, clock });
        }
        mine
    }

    pub(crate) fn unpark(&self, g: &mut RcuInner, mine: &[usize]) {
        let me = this_thread();
        for &i in mine {
            let d = self.cpu(i);
            if d.driver.load(Relaxed) == me {
                g.cpus[i].parked = false;
                // Watched again from the next GP on.
                d.qs_gp.store(g.gp_seq, Relaxed);
            }
        }
    }

    /// Wait on the queue, printing a stall warning now and then.
    pub(crate) fn wait(&self, guard: &mut MutexGuard<'_, RcuInner>, what: &str) {
        // Under shuttle every emulated CPU is a coroutine of this one host
        // thread: a Condvar wait would block the CPUs that must report.
        // Drop the lock and let the scheduler run them; the caller checks
        // again.
        #[cfg(shuttle)]
        if crate::sync::sched::controlled() {
            MutexGuard::unlocked(guard, crate::sync::sched::spin_wait);
            return;
        }
        if self.wq.wait_for(guard, RCU_CPU_STALL_TIMEOUT).timed_out() {
            let blocking: Vec<usize> = (0..guard.qsmask.len()).filter(|&i| guard.qsmask[i]).collect();
            let _ = writeln!(
                std::io::stderr(),
                "mmlab: rcu: {what}() stalled for {}s: gp_seq {} waits for cpus {blocking:?} to report a \
                 quiescent state (rcu_quiescent_state), go idle (rcu_idle_enter) or drop their handle",
                RCU_CPU_STALL_TIMEOUT.as_secs(),
                guard.gp_seq,
            );
        }
    }
}
