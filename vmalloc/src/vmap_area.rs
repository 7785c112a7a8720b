//! (temporary stand-in until the augmented tree lands)
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmapError {
    BadSize,
    NoSpace,
    Overlap,
}

#[derive(Debug)]
pub struct FreeVmapTree {
    m: BTreeMap<u64, u64>,
}

impl FreeVmapTree {
    pub fn new(start: u64, end: u64) -> Self {
        let mut m = BTreeMap::new();
        m.insert(start, end);
        FreeVmapTree { m }
    }
    pub fn alloc(&mut self, size: u64, align: u64, vstart: u64, vend: u64) -> Result<u64, VmapError> {
        if size == 0 || !size.is_multiple_of(4096) {
            return Err(VmapError::BadSize);
        }
        let align = align.max(4096);
        let found = self.m.iter().find_map(|(&s, &e)| {
            let a = s.max(vstart).next_multiple_of(align);
            (a + size <= e && a + size <= vend).then_some((s, e, a))
        });
        let (s, e, a) = found.ok_or(VmapError::NoSpace)?;
        self.m.remove(&s);
        if s < a {
            self.m.insert(s, a);
        }
        if a + size < e {
            self.m.insert(a + size, e);
        }
        Ok(a)
    }
    pub fn free(&mut self, start: u64, size: u64) -> Result<(), VmapError> {
        let end = start + size;
        if let Some((&s, &e)) = self.m.range(..end).next_back()
            && e > start
        {
            let _ = s;
            return Err(VmapError::Overlap);
        }
        let (mut s, mut e) = (start, end);
        if let Some((&ps, &pe)) = self.m.range(..start).next_back()
            && pe == start
        {
            self.m.remove(&ps);
            s = ps;
        }
        if let Some(&ne) = self.m.get(&end) {
            self.m.remove(&end);
            e = ne;
        }
        self.m.insert(s, e);
        Ok(())
    }
    pub fn free_bytes(&self) -> u64 {
        self.m.iter().map(|(s, e)| e - s).sum()
    }
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.m.iter().map(|(&s, &e)| (s, e))
    }
    pub fn check(&self) -> Result<(), String> {
        Ok(())
    }
}
