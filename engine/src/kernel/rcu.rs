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

// Single-writer counter update (the CPU's own thread), as `VmEvents::add`.
use crate::counters::{PerCpuStat, this_cpu_add as bump};
use crate::kernel::cpu::Cpu;
use crate::trace::{self, rcu as trace_rcu};
// The grace-period machinery sleeps on a Condvar and drops its lock around
// callbacks (`MutexGuard::unlocked`): it uses parking_lot directly rather
// than the `sync` facade, whose loom build models the allocators' locks and
// atomics, not RCU's sleeping waits.
use parking_lot::Condvar;
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::time::{Duration, Instant};

/// `CONFIG_RCU_CPU_STALL_TIMEOUT`: a waiter that has waited this long prints
/// which CPUs hold the grace period up, then keeps waiting.
pub const RCU_CPU_STALL_TIMEOUT: Duration = Duration::from_secs(21);

const RCU_SEQ_STATE_MASK: u64 = 3;
/// `cb_ready_at` when no callback is queued.
const NO_CBS: u64 = u64::MAX;

/// `rcu_seq_state()`: non-zero while a grace period is in progress.
#[inline]
fn rcu_seq_state(s: u64) -> u64 {
    s & RCU_SEQ_STATE_MASK
}
/// `rcu_seq_end()`: the sequence number once the current GP ends.
#[inline]
fn rcu_seq_end(s: u64) -> u64 {
    (s | RCU_SEQ_STATE_MASK) + 1
}
/// `rcu_seq_snap()`: the value `gp_seq` has once a full GP has elapsed from now.
#[inline]
fn rcu_seq_snap(s: u64) -> u64 {
    (s + 2 * RCU_SEQ_STATE_MASK + 1) & !RCU_SEQ_STATE_MASK
}
/// `rcu_seq_done()`: has `s` reached `snap` (wrap-safe, `ULONG_CMP_GE`)?
#[inline]
fn rcu_seq_done(s: u64, snap: u64) -> bool {
    s.wrapping_sub(snap) as i64 >= 0
}

thread_local! {
    static THREAD_TOKEN: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Relaxed)
    };
}
/// A non-zero number naming the current host thread.
#[inline]
fn this_thread() -> u64 {
    THREAD_TOKEN.with(|t| *t)
}

/// One CPU's RCU state (`struct rcu_data`) and counters.
#[derive(Debug, Default)]
pub struct RcuCpu {
    /// `current->rcu_read_lock_nesting`; written by the driving thread only.
    nesting: AtomicU32,
    /// A QS was asked for inside a read-side section (`rcu_read_unlock_special`).
    deferred_qs: AtomicBool,
    /// `gp_seq` of the GP this CPU last reported for (or noted).
    qs_gp: AtomicU64,
    /// Thread driving this CPU ([`this_thread`]); changed under the RCU lock.
    driver: AtomicU64,
    synchronize_calls: AtomicU64,
    barrier_calls: AtomicU64,
    callbacks_queued: AtomicU64,
    modelled_ns: AtomicU64,
    host_wait_ns: AtomicU64,
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
pub struct RcuCookie(u64);

type Callback = Box<dyn FnOnce() + Send>;

/// Per-CPU state kept under the RCU lock.
#[derive(Clone, Copy, Debug, Default)]
struct CpuGpState {
    online: bool,
    idle: bool,
    /// Its driver thread is blocked in an RCU wait.
    parked: bool,
}

impl CpuGpState {
    fn watched(self) -> bool {
        self.online && !self.idle && !self.parked
    }
}

struct RcuInner {
    gp_seq: u64,
    gp_seq_needed: u64,
    /// CPUs that still owe a QS to the current GP (`rcu_node->qsmask`).
    qsmask: Vec<bool>,
    qs_pending: usize,
    cpus: Vec<CpuGpState>,
    cbs: VecDeque<(u64, Callback)>,
    cbs_queued: u64,
    cbs_invoked: u64,
    invoking: bool,
    gp_completed: u64,
}

/// The machine-wide RCU state (`rcu_state`), owned by [`crate::Machine`].
pub struct RcuState {
    inner: Mutex<RcuInner>,
    /// Waiters for GP ends and callback progress.
    wq: Condvar,
    /// Mirror of `gp_seq` for lock-free checks.
    gp_seq: AtomicU64,
    /// Tag of the oldest queued callback, or [`NO_CBS`].
    cb_ready_at: AtomicU64,
    /// Callbacks invoked (mirror, for counters).
    invoked: AtomicU64,
    gp_completed: AtomicU64,
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
struct Tp<'a> {
    cpu: usize,
    clock: &'a crate::trace::TraceClock,
}

impl<'a> Tp<'a> {
    fn of(cpu: &'a Cpu<'_>) -> Tp<'a> {
        Tp { cpu: cpu.id(), clock: cpu.machine().trace_clock() }
    }
}

impl RcuState {
    /// `rcu_init()` for `nr_cpus` CPUs, all offline.
    pub fn new(nr_cpus: usize) -> RcuState {
        RcuState {
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
    fn gp_start(&self, g: &mut RcuInner, tp: Tp<'_>) {
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
    fn gp_end(&self, g: &mut RcuInner, tp: Tp<'_>) {
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
    fn gp_request(&self, g: &mut RcuInner, snap: u64, tp: Tp<'_>) {
        if !rcu_seq_done(g.gp_seq_needed, snap) {
            g.gp_seq_needed = snap;
        }
        if rcu_seq_state(g.gp_seq) == 0 && !rcu_seq_done(g.gp_seq, snap) {
            self.gp_start(g, tp);
        }
    }

    /// `rcu_report_qs_rdp()`: CPU `id` passed a QS. Called with the lock held.
    fn report_qs(&self, g: &mut RcuInner, id: usize, rcu: &RcuCpu, tp: Tp<'_>) {
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
    fn adopt(&self, g: &mut RcuInner, cpu: &Cpu<'_>) {
        let me = this_thread();
        let rcu = &cpu.data().rcu;
        if rcu.driver.load(Relaxed) != me {
            rcu.driver.store(me, Relaxed);
            // Parked by the previous driver's wait: driven again, but only
            // for GPs that start from now.
            g.cpus[cpu.id()].parked = false;
        }
    }

    /// Ready callbacks, if this caller may invoke them now.
    fn take_ready(&self, g: &mut RcuInner) -> Vec<Callback> {
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
    fn invoke(&self, guard: &mut MutexGuard<'_, RcuInner>, batch: Vec<Callback>) {
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
    fn park_mine(&self, g: &mut RcuInner, machine: &crate::Machine, what: &str) -> Vec<usize> {
        let me = this_thread();
        let mine: Vec<usize> = (0..g.cpus.len())
            .filter(|&i| g.cpus[i].online && machine.cpu_data(i).is_some_and(|d| d.rcu.driver.load(Relaxed) == me))
            .collect();
        for &i in &mine {
            let depth = machine.cpu_data(i).map_or(0, |d| d.rcu.read_depth());
            assert!(
                depth == 0,
                "{what}() would wait forever: this thread holds cpu {i} inside an RCU read-side critical section"
            );
        }
        for &i in &mine {
            g.cpus[i].parked = true;
            if let Some(d) = machine.cpu_data(i) {
                self.report_qs(g, i, &d.rcu, Tp { cpu: i, clock: machine.trace_clock() });
            }
        }
        mine
    }

    fn unpark(&self, g: &mut RcuInner, machine: &crate::Machine, mine: &[usize]) {
        let me = this_thread();
        for &i in mine {
            if let Some(d) = machine.cpu_data(i)
                && d.rcu.driver.load(Relaxed) == me
            {
                g.cpus[i].parked = false;
                // Watched again from the next GP on.
                d.rcu.qs_gp.store(g.gp_seq, Relaxed);
            }
        }
    }

    /// Wait on the queue, printing a stall warning now and then.
    fn wait(&self, guard: &mut MutexGuard<'_, RcuInner>, what: &str) {
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

/// Make sure this thread is recorded as `cpu`'s driver.
#[inline]
fn check_driver(cpu: &Cpu<'_>) {
    if cpu.data().rcu.driver.load(Relaxed) != this_thread() {
        let st = cpu.machine().rcu();
        let mut g = st.inner.lock();
        st.adopt(&mut g, cpu);
    }
}

/// The handle of `cpu` was taken: mirrors `rcu_cpu_starting()` (online for
/// GPs that start from now on).
pub(crate) fn rcu_cpu_online(cpu: &Cpu<'_>) {
    let st = cpu.machine().rcu();
    let rcu = &cpu.data().rcu;
    let mut g = st.inner.lock();
    rcu.nesting.store(0, Relaxed);
    rcu.deferred_qs.store(false, Relaxed);
    rcu.driver.store(this_thread(), Relaxed);
    rcu.qs_gp.store(g.gp_seq, Relaxed);
    g.cpus[cpu.id()] = CpuGpState { online: true, idle: false, parked: false };
}

/// The handle of `cpu` is being dropped: mirrors `rcutree_report_cpu_dead()`
/// (reports its QS and leaves the GP machinery). A handle dropped inside a
/// read-side section ends the section: nothing can run on the CPU any more.
pub(crate) fn rcu_cpu_offline(cpu: &Cpu<'_>) {
    let st = cpu.machine().rcu();
    let rcu = &cpu.data().rcu;
    let mut g = st.inner.lock();
    rcu.nesting.store(0, Relaxed);
    rcu.deferred_qs.store(false, Relaxed);
    // Offline first: the report below may end the current GP and start the
    // next one at once, and that one must not wait for this CPU.
    g.cpus[cpu.id()] = CpuGpState::default();
    st.report_qs(&mut g, cpu.id(), rcu, Tp::of(cpu));
}

/// Report a quiescent state on `cpu`: mirrors the scheduler tick's / context
/// switch's `rcu_qs()` + `rcu_report_qs_rdp()`, then `rcu_core()`'s callback
/// invocation. Inside a read-side section the report is deferred to the
/// outermost [`rcu_read_unlock`]. Cheap (no lock) when this CPU has already
/// reported for the current GP and no callback is ready.
pub fn rcu_quiescent_state(cpu: &Cpu<'_>) {
    check_driver(cpu);
    let rcu = &cpu.data().rcu;
    if rcu.nesting.load(Relaxed) > 0 {
        rcu.deferred_qs.store(true, Relaxed);
        return;
    }
    let st = cpu.machine().rcu();
    let s = st.gp_seq.load(Acquire);
    let need_qs = rcu_seq_state(s) != 0 && rcu.qs_gp.load(Relaxed) != s;
    let head = st.cb_ready_at.load(Acquire);
    let cbs_ready = head != NO_CBS && rcu_seq_done(s, head);
    if !need_qs && !cbs_ready {
        return;
    }
    let mut g = st.inner.lock();
    st.report_qs(&mut g, cpu.id(), rcu, Tp::of(cpu));
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
    let rcu = &cpu.data().rcu;
    rcu.nesting.store(rcu.nesting.load(Relaxed) + 1, Relaxed);
}

/// `rcu_read_unlock()` on `cpu`: leave a section; the outermost unlock
/// reports a QS deferred inside it (`rcu_read_unlock_special()`).
/// Panics when no section is open (unbalanced unlock).
#[inline]
pub fn rcu_read_unlock(cpu: &Cpu<'_>) {
    let rcu = &cpu.data().rcu;
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
    let rcu = &cpu.data().rcu;
    assert_eq!(rcu.read_depth(), 0, "rcu_idle_enter() inside an RCU read-side critical section on cpu {}", cpu.id());
    let st = cpu.machine().rcu();
    let mut g = st.inner.lock();
    st.adopt(&mut g, cpu);
    g.cpus[cpu.id()].idle = true;
    st.report_qs(&mut g, cpu.id(), rcu, Tp::of(cpu));
}

/// `ct_idle_exit()` / `rcu_idle_exit()`: `cpu` is watched again, from the
/// next GP on.
pub fn rcu_idle_exit(cpu: &Cpu<'_>) {
    let st = cpu.machine().rcu();
    let mut g = st.inner.lock();
    st.adopt(&mut g, cpu);
    g.cpus[cpu.id()].idle = false;
    cpu.data().rcu.qs_gp.store(g.gp_seq, Relaxed);
}

/// `synchronize_rcu()`: wait until every read-side critical section and
/// every watched CPU's run between reports that began before the call has
/// ended. The calling CPU (and every other CPU this thread drives) is
/// quiescent for the wait. Adds the profile's `grace_period_ns` to `cpu`'s
/// modelled RCU time and the measured wait to its host time.
/// Panics if this thread is inside a read-side section on any of its CPUs.
pub fn synchronize_rcu(cpu: &Cpu<'_>) {
    let rcu = &cpu.data().rcu;
    let m = cpu.machine();
    let st = m.rcu();
    let t0 = Instant::now();
    let _slice = trace::mmlab::func(cpu.id(), m.trace_clock(), "synchronize_rcu");
    {
        let mut g = st.inner.lock();
        st.adopt(&mut g, cpu);
        let mine = st.park_mine(&mut g, m, "synchronize_rcu");
        let snap = rcu_seq_snap(g.gp_seq);
        st.gp_request(&mut g, snap, Tp::of(cpu));
        while !rcu_seq_done(g.gp_seq, snap) {
            st.wait(&mut g, "synchronize_rcu");
        }
        st.unpark(&mut g, m, &mine);
        trace_rcu::synchronize_rcu(cpu.id(), m.trace_clock(), snap, g.gp_seq);
    }
    bump(&rcu.synchronize_calls, 1);
    bump(&rcu.modelled_ns, m.config().cost_profile.grace_period_ns);
    bump(&rcu.host_wait_ns, t0.elapsed().as_nanos() as u64);
}

/// `call_rcu()`: run `func` after a grace period that starts after this call.
/// See the module documentation for where callbacks run.
pub fn call_rcu(cpu: &Cpu<'_>, func: Box<dyn FnOnce() + Send>) {
    check_driver(cpu);
    let st = cpu.machine().rcu();
    let mut g = st.inner.lock();
    let snap = rcu_seq_snap(g.gp_seq);
    if g.cbs.is_empty() {
        st.cb_ready_at.store(snap, Release);
    }
    g.cbs.push_back((snap, func));
    g.cbs_queued += 1;
    bump(&cpu.data().rcu.callbacks_queued, 1);
    st.gp_request(&mut g, snap, Tp::of(cpu));
}

/// `kvfree_rcu()`: free `obj` (drop it) after a grace period.
pub fn kvfree_rcu<T: Send + 'static>(cpu: &Cpu<'_>, obj: Box<T>) {
    call_rcu(cpu, Box::new(move || drop(obj)));
}

/// `rcu_barrier()`: wait until every callback queued before the call has
/// run, running ready ones itself. Like [`synchronize_rcu`], the CPUs this
/// thread drives are quiescent for the wait, and it panics inside a reader.
pub fn rcu_barrier(cpu: &Cpu<'_>) {
    let m = cpu.machine();
    let st = m.rcu();
    let mut g = st.inner.lock();
    st.adopt(&mut g, cpu);
    let mine = st.park_mine(&mut g, m, "rcu_barrier");
    let target = g.cbs_queued;
    while g.cbs_invoked < target {
        let batch = st.take_ready(&mut g);
        if batch.is_empty() {
            st.wait(&mut g, "rcu_barrier");
        } else {
            st.invoke(&mut g, batch);
        }
    }
    st.unpark(&mut g, m, &mine);
    drop(g);
    bump(&cpu.data().rcu.barrier_calls, 1);
}

/// `get_state_synchronize_rcu()`: a cookie that
/// [`poll_state_synchronize_rcu`] accepts once a full GP has elapsed from now.
/// Does not start a GP.
pub fn get_state_synchronize_rcu(cpu: &Cpu<'_>) -> RcuCookie {
    RcuCookie(rcu_seq_snap(cpu.machine().rcu().gp_seq()))
}

/// `start_poll_synchronize_rcu()`: as [`get_state_synchronize_rcu`], and
/// ask for the GP. The caller's CPU is not counted as quiescent.
pub fn start_poll_synchronize_rcu(cpu: &Cpu<'_>) -> RcuCookie {
    check_driver(cpu);
    let st = cpu.machine().rcu();
    let mut g = st.inner.lock();
    let snap = rcu_seq_snap(g.gp_seq);
    st.gp_request(&mut g, snap, Tp::of(cpu));
    RcuCookie(snap)
}

/// `poll_state_synchronize_rcu()`: has the GP of `cookie` completed?
pub fn poll_state_synchronize_rcu(cpu: &Cpu<'_>, cookie: RcuCookie) -> bool {
    rcu_seq_done(cpu.machine().rcu().gp_seq(), cookie.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Machine, MachineConfig};
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;

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
        assert_eq!(c0.data().rcu.snapshot().modelled_ns, 3 * gp);
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
