//! (stub until the gfp module lands)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Gfp(pub u32);
#[allow(non_upper_case_globals)]
impl Gfp {
    pub const __GFP_MOVABLE: Gfp = Gfp(1 << 3);
    pub const __GFP_RECLAIMABLE: Gfp = Gfp(1 << 4);
    pub const __GFP_HIGH: Gfp = Gfp(1 << 5);
    pub const __GFP_IO: Gfp = Gfp(1 << 6);
    pub const __GFP_FS: Gfp = Gfp(1 << 7);
    pub const __GFP_ZERO: Gfp = Gfp(1 << 8);
    pub const __GFP_DIRECT_RECLAIM: Gfp = Gfp(1 << 10);
    pub const __GFP_KSWAPD_RECLAIM: Gfp = Gfp(1 << 11);
    pub const __GFP_NOWARN: Gfp = Gfp(1 << 13);
    pub const __GFP_NOFAIL: Gfp = Gfp(1 << 15);
    pub const __GFP_NORETRY: Gfp = Gfp(1 << 16);
    pub const __GFP_COMP: Gfp = Gfp(1 << 18);
    pub const GFP_KERNEL: Gfp = Gfp((1 << 10) | (1 << 11) | (1 << 6) | (1 << 7));
    pub const GFP_ATOMIC: Gfp = Gfp((1 << 5) | (1 << 11));
    pub const GFP_NOWAIT: Gfp = Gfp(1 << 11);
    pub const GFP_HIGHUSER_MOVABLE: Gfp = Gfp((1 << 10) | (1 << 11) | (1 << 6) | (1 << 7) | (1 << 20) | (1 << 1) | (1 << 3));
    pub const fn contains(self, o: Gfp) -> bool { self.0 & o.0 == o.0 }
    pub const fn gfp_migratetype(self) -> u8 { ((self.0 >> 3) & 3) as u8 }
}
impl std::ops::BitOr for Gfp { type Output = Gfp; fn bitor(self, o: Gfp) -> Gfp { Gfp(self.0 | o.0) } }
