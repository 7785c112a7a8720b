//! The barrier options (`asm/barrier.h`'s `dmb(opt)` / `dsb(opt)`
//! arguments) as types, their names and indices, and the barrier kinds.

use core::fmt;

/// Number of barrier options (domain x access kind) arm64 defines for
/// `dmb` and `dsb`.
pub const NR_OPTIONS: usize = 12;

/// The option names, indexed by [`BarrierOption::INDEX`].
pub const OPTION_NAMES: [&str; NR_OPTIONS] =
    ["sy", "st", "ld", "ish", "ishst", "ishld", "nsh", "nshst", "nshld", "osh", "oshst", "oshld"];

/// Entry names for `dmb` counts, indexed like [`OPTION_NAMES`].
pub(super) const DMB_ENTRY_NAMES: [&str; NR_OPTIONS] = [
    "dmb(sy)",
    "dmb(st)",
    "dmb(ld)",
    "dmb(ish)",
    "dmb(ishst)",
    "dmb(ishld)",
    "dmb(nsh)",
    "dmb(nshst)",
    "dmb(nshld)",
    "dmb(osh)",
    "dmb(oshst)",
    "dmb(oshld)",
];

/// Entry names for `dsb` counts, indexed like [`OPTION_NAMES`].
pub(super) const DSB_ENTRY_NAMES: [&str; NR_OPTIONS] = [
    "dsb(sy)",
    "dsb(st)",
    "dsb(ld)",
    "dsb(ish)",
    "dsb(ishst)",
    "dsb(ishld)",
    "dsb(nsh)",
    "dsb(nshst)",
    "dsb(nshld)",
    "dsb(osh)",
    "dsb(oshst)",
    "dsb(oshld)",
];

/// Index of the option called `name` ("ishst", ...), if there is one.
pub fn option_index(name: &str) -> Option<usize> {
    OPTION_NAMES.iter().position(|&n| n == name)
}

/// Whether the option at `index` covers all accesses (no `st`/`ld` suffix).
/// The table is laid out as (full, st, ld) per domain. Only the x86_64
/// native backend needs the distinction.
#[cfg(any(test, target_arch = "x86_64"))]
pub(super) const fn is_full_option(index: usize) -> bool {
    index.is_multiple_of(3)
}

mod sealed {
    /// Keeps the option traits closed: only this module's twelve option
    /// types can implement them.
    pub trait Sealed {}
}

/// A barrier option (domain and access kind). Sealed: implemented only by
/// the twelve option types of this module.
pub trait BarrierOption: sealed::Sealed + Copy + fmt::Debug + Send + Sync + 'static {
    /// The option as the assembler spells it: "sy", "ishst", ...
    const NAME: &'static str;
    /// Position of the option in [`OPTION_NAMES`] and in the count arrays,
    /// `0..NR_OPTIONS`.
    const INDEX: usize;
}

/// An option `dmb` accepts. Sealed; all twelve options implement it.
pub trait DmbOption: BarrierOption {}

/// An option `dsb` accepts. Sealed; all twelve options implement it. (It is
/// kept apart from [`DmbOption`] because the two sets may diverge, e.g. the
/// `nXS` forms that only `dsb` has.)
pub trait DsbOption: BarrierOption {}

macro_rules! barrier_options {
    ($($ty:ident, $konst:ident, $index:literal, $doc:literal;)*) => {
        $(
            #[doc = concat!("The `", stringify!($konst), "` barrier option: ", $doc)]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
            pub struct $ty;

            #[doc = concat!("The `", stringify!($konst), "` option, spelled as in the kernel: `dsb(",
                stringify!($konst), ")`.")]
            #[allow(non_upper_case_globals)]
            pub const $konst: $ty = $ty;

            impl sealed::Sealed for $ty {}

            impl BarrierOption for $ty {
                const NAME: &'static str = stringify!($konst);
                const INDEX: usize = $index;
            }

            impl DmbOption for $ty {}
            impl DsbOption for $ty {}
        )*
    };
}

barrier_options! {
    Sy, sy, 0, "all accesses, full system.";
    St, st, 1, "stores only, full system.";
    Ld, ld, 2, "loads only (against later loads and stores), full system.";
    Ish, ish, 3, "all accesses, inner shareable domain (all CPUs of one kernel).";
    IshSt, ishst, 4, "stores only, inner shareable domain.";
    IshLd, ishld, 5, "loads only, inner shareable domain.";
    Nsh, nsh, 6, "all accesses, non-shareable (this CPU only).";
    NshSt, nshst, 7, "stores only, non-shareable.";
    NshLd, nshld, 8, "loads only, non-shareable.";
    Osh, osh, 9, "all accesses, outer shareable domain (reaches DMA agents).";
    OshSt, oshst, 10, "stores only, outer shareable domain.";
    OshLd, oshld, 11, "loads only, outer shareable domain.";
}

/// Which of the three barrier instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierKind {
    /// Data memory barrier: orders accesses.
    Dmb,
    /// Data synchronization barrier: waits for accesses and maintenance to
    /// complete.
    Dsb,
    /// Instruction synchronization barrier: resynchronises the pipeline.
    Isb,
}

impl BarrierKind {
    /// The mnemonic: "dmb", "dsb" or "isb".
    pub const fn name(self) -> &'static str {
        match self {
            BarrierKind::Dmb => "dmb",
            BarrierKind::Dsb => "dsb",
            BarrierKind::Isb => "isb",
        }
    }
}

impl fmt::Display for BarrierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
