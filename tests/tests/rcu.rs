//! RCU regressions found by running test-vmalloc on two workers.

use mmlab_engine::kernel::rcu::{poll_state_synchronize_rcu, rcu_quiescent_state, start_poll_synchronize_rcu};

#[test]
fn a_cpu_going_offline_is_not_waited_for_by_the_gp_its_report_starts() {
    let m = mmlab_tests::machine("16M", 2);
    let c0 = m.cpu(0).unwrap();
    let c1 = m.cpu(1).unwrap();
    // GP 1 starts and waits for both CPUs.
    let first = start_poll_synchronize_rcu(&c0);
    rcu_quiescent_state(&c0);
    // A second GP is requested while the first still waits for CPU 1.
    let second = start_poll_synchronize_rcu(&c0);
    assert!(!poll_state_synchronize_rcu(&c0, first));
    // CPU 1 goes offline: its report ends GP 1, which starts GP 2 at once;
    // GP 2 must not wait for the CPU that just left.
    drop(c1);
    assert!(poll_state_synchronize_rcu(&c0, first));
    rcu_quiescent_state(&c0);
    assert!(poll_state_synchronize_rcu(&c0, second), "GP 2 waited for an offline CPU");
}
